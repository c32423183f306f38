#!/usr/bin/env bash
# Every bad input tried against kformer's deck handling, given to the real binary (--dry-run, one
# rank): docs/bad-input.md is this script's output, so the table says what kformer really prints.
#   bad_input_table.sh KFORMER SOURCE_DIR --write   regenerate docs/bad-input.md
#   bad_input_table.sh KFORMER SOURCE_DIR --check   fail when an input breaks the rule (exit code
#                                                   2, exactly one line on stderr) or the table
#                                                   differs from docs/bad-input.md
# The few inputs that must be accepted (Kokkos' own flags, "-0" where 0 is valid) are listed too.
set -u
kformer=$(cd "$(dirname "$1")" && pwd)/$(basename "$1"); src=$(cd "$2" && pwd); mode=${3:---check}
doc=$src/docs/bad-input.md
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
export OMP_NUM_THREADS=1 OMP_PROC_BIND=false  # no Kokkos start-up warning on stderr
cp "$src/input/tiny.yaml" "$tmp/tiny.yaml"
mkdir "$tmp/decks"
fails=0
rows=()

# md_code TEXT: TEXT as one markdown table cell of code, bytes a terminal would not show escaped.
# Prints a placeholder and keeps TEXT's bytes in $tmp/md/; md_cells fills every placeholder of
# the table in one python3 run (one per cell took most of this test's time).
mkdir "$tmp/md"
md_code() {
  local f
  f=$(mktemp "$tmp/md/XXXXXX")
  printf '%s' "$1" >"$f"
  printf '@md:%s@' "${f##*/}"
}
plain() {  # plain TEXT: TEXT with its placeholders' raw text, for a FAIL line
  local s=$1
  while [[ $s =~ @md:([A-Za-z0-9]+)@ ]]; do s=${s/"${BASH_REMATCH[0]}"/$(<"$tmp/md/${BASH_REMATCH[1]}")}; done
  printf '%s' "$s"
}
md_cells() {  # md_cells FILE: each placeholder of FILE replaced by its cell, in place
  /usr/bin/python3 - "$1" "$tmp/md" <<'PY'
import os, re, sys
path, cells = sys.argv[1], sys.argv[2]
def cell(m):
    out = ""
    for ch in open(os.path.join(cells, m.group(1)), "rb").read().decode("utf-8", "backslashreplace"):
        o = ord(ch)
        out += "\\n" if ch == "\n" else "\\t" if ch == "\t" else ("\\x%02x" % o) if o < 0x20 or o == 0x7f else ch
    return "`" + out.replace("|", "\\|") + "`"
text = open(path, "rb").read().decode("utf-8", "surrogateescape")
open(path, "wb").write(re.sub(r"@md:([A-Za-z0-9]+)@", cell, text).encode("utf-8", "surrogateescape"))
PY
}

# try WANT GROUP "INPUT AS SHOWN" -- ARGS...   (run in $tmp, four at a time: start-up is most
# of each run; decks are written there first and each has a name of its own). Each run's Open MPI
# singleton keeps its session directory in a folder of its own, which Open MPI creates: singletons
# all take job family 0, so two at once would share /tmp's ompi.HOST.UID/jf.0, and the first to end
# removes it under the other, which then fails in orte_init (seen twice in fresh-clone runs).
n=0; wants=(); groups=(); shown=()
try() {
  wants[n]=$1; groups[n]=$2; shown[n]=$3; shift 4
  (cd "$tmp" && OMPI_MCA_orte_tmpdir_base="$tmp/ompi/$n" "$kformer" --dry-run "$@" >"$tmp/c$n.out" 2>"$tmp/c$n.err"
   echo $? >"$tmp/c$n.rc") &
  n=$((n + 1))
  while [ "$(jobs -rp | wc -l)" -ge 4 ]; do wait -n; done
}
verdicts() {  # after every try: check each run and make its table row
  wait
  local i rc lines msg
  for ((i = 0; i < n; i++)); do
    rc=$(cat "$tmp/c$i.rc"); lines=$(wc -l <"$tmp/c$i.err")
    msg=$(head -n 1 "$tmp/c$i.err" | sed -E 's/the [0-9.e+]+ GB per rank of this node \([0-9.e+]+ GB ([a-z ]+) \/ 1 rank\)/the N GB per rank of this node (N GB \1 \/ 1 rank)/')
    if [ "$rc" -ne "${wants[i]}" ]; then
      echo "FAIL: $(plain "${shown[i]}"): exit $rc, expected ${wants[i]}"; cat "$tmp/c$i.err"; fails=$((fails + 1))
    elif [ "${wants[i]}" -ne 0 ] && { [ "$lines" -ne 1 ] || [[ "$msg" != "kformer: error: "* ]]; }; then
      echo "FAIL: $(plain "${shown[i]}"): $lines lines on stderr, expected one 'kformer: error:' line:"; cat "$tmp/c$i.err"
      fails=$((fails + 1))
    fi
    [ "${wants[i]}" -eq 0 ] && msg="(accepted)"
    rows+=("| ${groups[i]} | ${shown[i]} | $rc | $(md_code "${msg#kformer: error: }") |")
  done
}
# shellcheck disable=SC2059  # the deck is the format: its escapes (\n, \0, \xff) are the point
deck() { printf -- "$1" >"$tmp/$2"; }   # deck FORMAT NAME: write a deck (printf escapes)
# yaml WANT NAME FORMAT [NOTE]: the deck FORMAT written to NAME and tried, shown as its text
# shellcheck disable=SC2059  # the deck is the format: its escapes (\n, \0, \xff) are the point
yaml() { deck "$3" "$2"; try "$1" yaml "$(md_code "$(printf -- "$3")")${4:+ $4}" -- "$2"; }
T=tiny.yaml

# --- the deck file ---------------------------------------------------------------------------
try 2 file "a deck that does not exist" -- missing.yaml
try 2 file "a directory" -- decks
try 2 file "/dev/zero (endless)" -- /dev/zero
deck '' empty.yaml;                                  try 2 file "an empty file" -- empty.yaml
deck '# only a comment\n\n' comments.yaml;           try 2 file "only comments" -- comments.yaml
head -c 1100000 /dev/zero | tr '\0' '#' >"$tmp/big.yaml"; try 2 file "a 1.1 MB file" -- big.yaml
deck 'model:\n  n_layers: 2\0\1\2\3' binary.yaml;    try 2 file "NUL and binary bytes" -- binary.yaml
deck 'model:\n  family: gpt\n  # caf\xe9 (Latin-1)\n' latin1.yaml; try 2 file "a Latin-1 byte" -- latin1.yaml
deck '\xff\xfem\0o\0d\0e\0l\0:\0' utf16.yaml;       try 2 file "UTF-16 text" -- utf16.yaml

# --- YAML structure --------------------------------------------------------------------------
yaml 2 scalar.yaml          '42\n'
yaml 2 list.yaml            '- model\n- train\n'
yaml 2 docs.yaml            'model:\n  n_layers: 2\n---\ntrain:\n  steps: 3\n'
yaml 2 broken.yaml          'model:\n  n_layers: [1, 2\n'
yaml 2 tab.yaml             'model:\n\tn_layers: 2\n'
yaml 2 comma.yaml           ',\n' "(yaml-cpp's endless empty documents)"
yaml 2 bracket.yaml         'model:\n  n_layers: 2\n]\n'
yaml 2 alias.yaml           'model: *anchor\n'
yaml 2 alias2.yaml          'model: &m\n  n_layers: 2\ntrain: *m\n'
yaml 2 dup.yaml             'model:\n  n_layers: 2\n  n_layers: 3\n'
yaml 2 dup2.yaml            'model:\n  n_layers: 2\nmodel.n_layers: 3\n'
yaml 2 dup3.yaml            'model:\n  n_layers: 2\nmodel:\n  d_model: 32\n'
yaml 2 complexkey.yaml      '? [a, b]\n: 1\n'
yaml 2 emptykey.yaml        '"": 1\n'
yaml 2 nullkey.yaml         '~: 1\n'
yaml 2 section.yaml         'modle:\n  n_layers: 2\n'
yaml 2 key.yaml             'model:\n  n_laeyrs: 2\n'
yaml 2 scalarsection.yaml   'model: 3\n'
yaml 2 listvalue.yaml       'model:\n  n_layers: [2, 3]\n'
yaml 2 mapvalue.yaml        'model:\n  n_layers: {a: 1}\n'
yaml 2 listtext.yaml        'output:\n  json: [a.json, b.json]\n'
yaml 2 nested.yaml          'parallel:\n  stage_layers: [[1, 2], 3]\n'
yaml 2 nullvalue.yaml       'model:\n  n_layers:\n'
yaml 2 bool.yaml            'model:\n  n_layers: yes\n'
yaml 2 nl.yaml              'output:\n  json: "run\\nlog.json"\n'
yaml 0 emptysection.yaml    'kernels:\n' '(an empty section)'

# --- values (command line; the same checks apply in a deck, with its line named) -------------
for o in model.n_layers=0 model.n_layers=-3 model.n_layers=1025 model.n_layers=2.5 model.n_layers=1e3 \
         model.n_layers=0x10 model.n_layers=4_000 model.n_layers= "model.n_layers= " model.n_layers=two \
         model.n_layers=99999999999999999999 model.n_heads=0 model.d_model=2000000000 model.vocab_size=1 \
         train.seq_len=-0 train.steps=3000000000 train.global_batch=9e18 train.global_batch=9000000000000000000 \
         train.micro_batch=-1 train.lr=nan train.lr=inf train.lr=-1 train.lr=1e400 train.lr=1e-400 \
         train.lr=0x1p-3 parallel.zero=4 parallel.tp=0 model.family=bert model.family=GPT \
         parallel.stage_layers=1,x "parallel.stage_layers=3,3," parallel.stage_layers=1,-1 \
         straggler.rank=-2 straggler.slowdown=0.5 straggler.slowdown=1e9 comm.timeout_s=1e300 \
         comm.emulate.bandwidth_gbps=1e-9 $'output.json=run\nlog.json' $'output.json=\xff.json'; do
  try 2 value "$(md_code "$o")" -- "$T" "$o"
done
try 0 value "$(md_code 'train.lr=-0')" -- "$T" train.lr=-0
# cuDNN's flash attention: bf16 only, and only in a CUDA build with cuDNN (this table's build has none)
try 2 value "$(md_code 'kernels.attention=vendor')" -- "$T" kernels.attention=vendor
try 2 value "$(md_code 'kernels.attention=vendor train.precision=bf16') (a build without cuDNN)" -- "$T" \
  kernels.attention=vendor train.precision=bf16

# --- the command line ------------------------------------------------------------------------
for o in model.n_layers =3 model.n_laeyrs=2 n_layers=3 modle.n_layers=2 model=3 comm.emulate=1 zzzz.qqqq=1 \
         $'model.n_lay\ners=2'; do
  try 2 cli "$(md_code "kformer $T $o")" -- "$T" "$o"
done
try 2 cli "$(md_code "kformer $T xxx...=1") (a 300-character key)" -- "$T" "$(printf 'x%.0s' {1..300})=1"
try 2 cli "$(md_code 'kformer model.n_layers=2')" -- model.n_layers=2
try 2 cli "$(md_code 'kformer') (no deck)" --
try 2 cli "$(md_code "kformer $T --frobnicate")" -- "$T" --frobnicate
try 0 cli "$(md_code "kformer $T --kokkos-threads=1")" -- "$T" --kokkos-threads=1

# --- layouts and sizes that do not fit -------------------------------------------------------
while IFS= read -r line; do
  read -r -a args <<<"$line"
  try 2 layout "$(md_code "$line")" -- "$T" "${args[@]}"
done <<'EOF'
parallel.tp=3
parallel.tp=2
parallel.dp=2
model.n_heads=5
model.n_kv_heads=2
train.seq_len=64
train.global_batch=6 train.micro_batch=4
straggler.rank=1
parallel.schedule=interleaved parallel.virtual_stages=2
model.max_seq_len=4194304 train.seq_len=4194304 train.micro_batch=1024 train.global_batch=1024
train.global_batch=16777216 train.micro_batch=1
train.steps=2147483647 train.global_batch=1048576 train.micro_batch=1 model.max_seq_len=4194304 train.seq_len=4194304
model.d_model=1048576 model.vocab_size=16777216
memory.limit_gb=0.0001
comm.backend=nccl
train.recompute_layers=2
train.recompute=op
EOF

# --- token files (data.source), opened before training -------------------------------------
/usr/bin/python3 - "$tmp" <<'PY'
import struct, sys
d = sys.argv[1]
head = lambda n: struct.pack("<256i", 20240520, 1, n, *([0] * 253))
open(f"{d}/negative.bin", "wb").write(head(-5) + b"\x01\x00" * 10)
open(f"{d}/short.bin", "wb").write(head(1000) + b"\x01\x00" * 10)
open(f"{d}/few.bin", "wb").write(head(10) + b"\x01\x00" * 10)
open(f"{d}/bigtoken.bin", "wb").write(head(100) + b"\xff\xff" * 100)
open(f"{d}/text.txt", "w").write("hello\n")
PY
for f in negative.bin short.bin few.bin bigtoken.bin text.txt missing.bin; do
  try 2 data "$(md_code "data.source=$f")" -- "$T" data.source="$f"
done

verdicts
{
  cat <<'EOF'
# Bad input: what kformer says

Every bad deck, value and command line tried against kformer's deck handling, and the one line
it prints for each (on stderr, after `kformer: error: `). Each exits with code 2 before anything
is allocated; the rows marked *(accepted)* are inputs that must keep working. The table is the
output of `tests/fuzz/bad_input_table.sh KFORMER . --write` (run with `kformer --dry-run` on one
rank, decks written to files named as in the messages); the `bad_input_table` test fails when
kformer's answers and this page differ. `N GB` stands for the machine's memory.

The rules behind the messages: every key has a type and a range (`kformer --keys`); counts the
trainer keeps in an `int` stop at 2147483647; products of sizes that the code keeps in 32-bit
or 64-bit integers are checked together (attention rows per micro-batch, pipeline steps per
iteration, tokens of the whole run); without `memory.limit_gb` the estimate per rank must fit
this machine's memory; text values (paths) are one line of UTF-8; a deck is one UTF-8 YAML
document of at most 1 MiB whose maps are sections and whose keys appear once.

Beyond these, `scripts/fuzz_deck.sh` (ctest label `fuzz`) feeds libFuzzer's mutations of decks
and overrides through the same code and fails on any crash, on an exception other than the one
line, and on a deck that passes validation but fails later. What it found is kept in
`tests/fuzz/crashes/` and replayed by the `deck_replay` test:

- every deck: a stack-use-after-scope in the walk over the YAML map (a reference into the
  temporary pair of yaml-cpp's iterator), there since the first deck loader;
- a deck that starts with `,` (or has a `,` where a document starts): yaml-cpp 0.7's `LoadAll`,
  which the loader first used to see a second document, returns empty documents for it without
  end and allocates until the machine runs out (the loader now counts documents itself).

Bad input met later, each with its own one-line message and exit code, and its own test:
checkpoints that are missing, truncated, corrupted, of another model or unwritable
([checkpoints.md](checkpoints.md), test `checkpoint_np4`); a hung or dead rank (exit 4,
[user-guide.md](user-guide.md) section 11, test `watchdog_hang_np4`); a loss that stays
non-finite (exit 3, `train.max_nan`, test `cli_np4`); walltime signals (exit 0 with a checkpoint,
test `signal_np4`). Exit codes: [user-guide.md](user-guide.md) section 10.

| kind | input | exit | message |
|---|---|---|---|
EOF
  printf '%s\n' "${rows[@]}"
} >"$tmp/table.md"
md_cells "$tmp/table.md" || { echo "FAIL: the table's cells could not be written"; exit 1; }

if [ "$mode" = --write ]; then
  cp "$tmp/table.md" "$doc"
  echo "bad_input_table: wrote $doc (${#rows[@]} inputs, $fails failures)"
else
  diff -u "$doc" "$tmp/table.md" >"$tmp/diff" || {
    echo "FAIL: docs/bad-input.md differs from what kformer says (regenerate with --write):"; head -n 60 "$tmp/diff"
    fails=$((fails + 1)); }
fi
[ $fails -eq 0 ] && echo "bad_input_table: ${#rows[@]} inputs, each refused with one line (or accepted as listed)"
exit $((fails > 0))
