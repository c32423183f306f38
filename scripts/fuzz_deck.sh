#!/usr/bin/env bash
# Fuzzes kformer's deck handling (YAML deck + key=value overrides + resolve_and_validate, and what
# a run computes from a valid deck before it allocates) with libFuzzer for a bounded time.
# The target (tests/fuzz/deck_target.cpp) is built here with clang++ and AddressSanitizer +
# UndefinedBehaviorSanitizer from the config sources alone: Kokkos headers only (Serial), no
# Kokkos library, no MPI, no initialisation. Seeds: input/*.yaml and tests/fuzz/corpus/.
#
#   scripts/fuzz_deck.sh [--seconds N] [--build DIR] [--kokkos-include DIR] [--work DIR]
#   scripts/fuzz_deck.sh --merge ...          then add the new inputs that add coverage to
#                                             tests/fuzz/corpus/ (to commit them)
#   scripts/fuzz_deck.sh --reproduce FILE...  run the target on these inputs only
#
# --build: a configured kformer build (for generated/kformer_config.hpp; default build/default).
# --work: where the target, its working corpus and crash files go (default BUILD/fuzz).
# Exit 0: no crash; 1: a crash, a leak, a timeout or a failed build (the reproducer is in
# WORK/crashes/: keep it by copying it into tests/fuzz/crashes/); 77: no clang++ with the libFuzzer
# runtime here (Debian: clang-14 libclang-rt-14-dev), so nothing was fuzzed.
set -euo pipefail

top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
seconds=60
build=$top/build/default
kokkos_include=""
work=""
merge=0
reproduce=()
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) seconds=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    --kokkos-include) kokkos_include=$2; shift 2 ;;
    --work) work=$2; shift 2 ;;
    --merge) merge=1; shift ;;
    --reproduce) shift; reproduce=("$@"); break ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    *) echo "fuzz_deck.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
work=${work:-$build/fuzz}
log() { echo "fuzz_deck: $*"; }

# --- clang++ with libFuzzer, or skip -------------------------------------------------------
cxx=${CLANGXX:-}
if [ -z "$cxx" ]; then
  for c in clang++-14 clang++; do command -v "$c" >/dev/null 2>&1 && { cxx=$c; break; }; done
fi
mkdir -p "$work/obj" "$work/corpus" "$work/crashes"
if [ -z "$cxx" ] || ! echo 'extern "C" int LLVMFuzzerTestOneInput(const char*, unsigned long) { return 0; }' |
     "$cxx" -x c++ - -fsanitize=fuzzer,address,undefined -o "$work/probe" >"$work/probe.log" 2>&1; then
  log "SKIPPED: no clang++ with the libFuzzer runtime (${cxx:-no clang++ on PATH}); on Debian 12:" \
      "apt-get install clang-14 libclang-rt-14-dev (scripts/setup.sh does)"
  exit 77
fi

# --- the build ------------------------------------------------------------------------------
generated=$build/generated
[ -f "$generated/kformer_config.hpp" ] || {
  log "no $generated/kformer_config.hpp: configure kformer first (cmake --preset default), or pass --build DIR"; exit 1; }
if [ -z "$kokkos_include" ]; then
  kokkos_dir=$(sed -n 's/^Kokkos_DIR:PATH=//p' "$build/CMakeCache.txt" 2>/dev/null || true)
  kokkos_include=$(cd "${kokkos_dir:-$top/.deps/kokkos-3.4.01-openmp/lib/cmake/Kokkos}/../../.." 2>/dev/null && pwd)/include
fi
[ -f "$kokkos_include/KokkosCore_config.h" ] || { log "no KokkosCore_config.h in $kokkos_include: pass --kokkos-include"; exit 1; }

# memory.cpp and run_plan.cpp include Kokkos headers. A Serial-only view of the install's
# configuration lets clang compile them without OpenMP or CUDA; nothing of Kokkos runs.
shim=$work/kokkos-serial
mkdir -p "$shim"
sed -E -e 's@^#define (KOKKOS_ENABLE_(OPENMP|OPENMPTARGET|THREADS|CUDA|HIP|HPX|SYCL)([ _].*)?)$@/* \1: off for the deck fuzzer */@' \
    -e 's@^#define (KOKKOS_ARCH_(KEPLER|MAXWELL|PASCAL|VOLTA|TURING|AMPERE|HOPPER|VEGA|NAVI|INTEL_GPU).*)$@/* \1 */@' \
    -e 's@^/\* #undef KOKKOS_ENABLE_SERIAL \*/$@#define KOKKOS_ENABLE_SERIAL@' \
    "$kokkos_include/KokkosCore_config.h" >"$shim/KokkosCore_config.h.new"
cmp -s "$shim/KokkosCore_config.h.new" "$shim/KokkosCore_config.h" || mv "$shim/KokkosCore_config.h.new" "$shim/KokkosCore_config.h"
rm -f "$shim/KokkosCore_config.h.new"
printf '#ifndef KOKKOS_DECLARE_HPP_\n#define KOKKOS_DECLARE_HPP_\n#include <decl/Kokkos_Declare_SERIAL.hpp>\n#endif\n' >"$shim/d"
printf '#ifndef KOKKOS_FWD_HPP_\n#define KOKKOS_FWD_HPP_\n#include <fwd/Kokkos_Fwd_SERIAL.hpp>\n#endif\n' >"$shim/f"
printf '#ifndef KOKKOS_SETUP_HPP_\n#define KOKKOS_SETUP_HPP_\n#endif\n' >"$shim/s"
printf '#ifndef KOKKOS_POST_INCLUDE_HPP_\n#define KOKKOS_POST_INCLUDE_HPP_\n#endif\n' >"$shim/p"
for pair in d:DeclareBackend f:FwdBackend s:SetupBackend p:PostInclude; do
  dst=$shim/KokkosCore_Config_${pair#*:}.hpp
  cmp -s "$shim/${pair%%:*}" "$dst" || mv "$shim/${pair%%:*}" "$dst"
  rm -f "$shim/${pair%%:*}"
done

includes=(-I"$top/miniapp" -I"$top" -I"$top/kernels" -I"$top/comm" -I"$top/tests/fuzz" -I"$generated"
          -I"$shim" -I"$kokkos_include")
for family in "$top"/kernels/*/; do includes+=(-I"${family%/}"); done  # gemm/, attention/, ... (kernels/CMakeLists.txt)
# The standard Kokkos was built for (its headers may need it: a Kokkos built for C++20, as 5.0 must
# be, uses requires-clauses), never older than kformer's C++17.
std='c++17'
grep -q '^#define KOKKOS_ENABLE_CXX20' "$kokkos_include/KokkosCore_config.h" && std='c++20'
grep -q '^#define KOKKOS_ENABLE_CXX23' "$kokkos_include/KokkosCore_config.h" && std='c++2b'
common=("-std=$std" -g -O1 -fno-omit-frame-pointer "${includes[@]}")
fuzzflags=("-fsanitize=fuzzer-no-link,address,undefined" -fno-sanitize-recover=undefined)
# Instrumented: the deck path, from the Config to the run plan and its memory estimate.
instrumented=(miniapp/settings/schema.cpp miniapp/settings/config.cpp miniapp/settings/validate.cpp
              miniapp/settings/deck_echo.cpp miniapp/settings/read_settings.cpp miniapp/platform/node_memory.cpp
              miniapp/model/model_spec.cpp miniapp/model/block_dims.cpp miniapp/plan/memory.cpp
              miniapp/plan/run_plan.cpp miniapp/parallel/schedule.cpp comm/backend_choice.cpp
              miniapp/settings/systems.cpp miniapp/model/numerics.cpp tests/fuzz/deck_target.cpp)
newest_header=$(find "$top/miniapp" "$top/kernels" "$top/comm" "$top/tests/fuzz" "$generated" "$shim" -name '*.h*' \
                  -newer "$work/deck_fuzz" 2>/dev/null | head -n 1 || true)
[ -f "$work/deck_fuzz" ] || newest_header=always
compile() {  # $1 source, rest flags; skips an object newer than its source when no header changed
  local src=$1 obj
  obj=$work/obj/$(basename "${1%.cpp}").o; shift
  if [ -z "$newest_header" ] && [ "$obj" -nt "$top/$src" ]; then return 0; fi
  "$cxx" "${common[@]}" "$@" -c "$top/$src" -o "$obj" 2>"$obj.log" || { cat "$obj.log" >&2; return 1; }
}
t0=$(date +%s)
pids=()
for src in "${instrumented[@]}"; do
  compile "$src" "${fuzzflags[@]}" & pids+=($!)
  [ ${#pids[@]} -ge "$(nproc)" ] && { wait "${pids[0]}" || exit 1; pids=("${pids[@]:1}"); }
done
for p in "${pids[@]}"; do wait "$p" || { log "build failed (compiler output above)"; exit 1; }; done
objs=()
for src in "${instrumented[@]}"; do objs+=("$work/obj/$(basename "${src%.cpp}").o"); done
"$cxx" -fsanitize=fuzzer,address,undefined "${objs[@]}" -Wl,--gc-sections -lyaml-cpp -o "$work/deck_fuzz" \
  || { log "link failed"; exit 1; }
log "built $work/deck_fuzz with $cxx in $(( $(date +%s) - t0 )) s"

# --- the dictionary: every key, section and choice of the schema, and YAML's punctuation ------
{
  grep -oE '"[a-z_]+(\.[a-z_]+)+"' "$top/miniapp/settings/schema.cpp" | sort -u | while read -r k; do
    k=${k//\"/}
    echo "\"$k\""; echo "\"${k##*.}:\""; echo "\"${k%%.*}:\""; echo "\"$k=\""
  done
  # the choices: literal lists in the schema, the enums' name tables, predict.system's presets
  grep -hoE '\{"[a-z0-9_-]+"(, "[a-z0-9_-]+")+\}' "$top/miniapp/settings/schema.cpp" "$top/miniapp/settings/choices.hpp" |
    grep -oE '"[a-z0-9_-]+"'
  grep -oE '^      \{"[a-z0-9-]+",' "$top/miniapp/settings/systems.cpp" | grep -oE '"[a-z0-9-]+"'
  for t in '%%' '@world ' '---' '- ' '[' ']' '{' '}' ': ' '&a ' '*a' '!!str ' '? ' '~' 'null' '-0' '0x10' '1e400' \
           '9223372036854775807' '2147483648' 'nan' '.inf' "'" '#' '|' '>'; do
    printf '"%s"\n' "$t"
  done
  printf '"\\""\n"\\x0a  "\n"\\xff"\n"\\x00"\n'
} | sort -u >"$work/deck.dict"

# No leak checking: yaml-cpp's own leaks are not kformer's to fix, and LeakSanitizer's exit-time
# scan of a large heap can outlast the run.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0:abort_on_error=1:symbolize=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
if [ ${#reproduce[@]} -gt 0 ]; then
  exec "$work/deck_fuzz" -error_exitcode=1 "${reproduce[@]}"
fi

# --- the bounded run ------------------------------------------------------------------------
rm -f "$work/crashes"/*
log "fuzzing for $seconds s (corpus: $work/corpus, seeds: tests/fuzz/corpus and input/)"
set +e
# A single allocation over 256 MB is reported at once, with its stack; an out-of-memory found by
# the RSS limit makes libFuzzer print a heap profile that can take many minutes, hence the KILL.
timeout -s KILL $((seconds + 120)) "$work/deck_fuzz" "$work/corpus" "$top/tests/fuzz/corpus" "$top/input" \
  -dict="$work/deck.dict" -max_total_time="$seconds" -max_len=4096 -timeout=30 -malloc_limit_mb=256 \
  -rss_limit_mb=2048 -detect_leaks=0 -error_exitcode=1 -timeout_exitcode=1 -artifact_prefix="$work/crashes/" \
  -print_final_stats=1 >"$work/fuzz.log" 2>&1
rc=$?
set -e
grep -E '^(INFO: Seed|#[0-9]+ +DONE|Done [0-9]+ runs)' "$work/fuzz.log" || true
runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/fuzz.log")
rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$work/fuzz.log")
log "${runs:-?} executions in $seconds s (${rate:-?}/s); working corpus $(find "$work/corpus" -type f | wc -l) inputs"
crashes=$(find "$work/crashes" -type f | sort)
if [ $rc -ne 0 ] || [ -n "$crashes" ]; then
  grep -E 'BUG:|ERROR: (AddressSanitizer|libFuzzer|LeakSanitizer)|runtime error:|SUMMARY:' "$work/fuzz.log" | head -20
  tail -n 40 "$work/fuzz.log"
  log "FAILED (exit $rc); reproducers: ${crashes:-none written}"
  log "reproduce: scripts/fuzz_deck.sh --build $build --reproduce FILE; keep it: copy FILE into tests/fuzz/crashes/"
  exit 1
fi
if [ $merge -eq 1 ]; then
  before=$(find "$top/tests/fuzz/corpus" -type f | wc -l)
  "$work/deck_fuzz" -merge=1 -max_len=4096 -timeout=30 "$top/tests/fuzz/corpus" "$work/corpus" >"$work/merge.log" 2>&1
  log "merged: tests/fuzz/corpus has $(find "$top/tests/fuzz/corpus" -type f | wc -l) inputs (was $before)"
fi
log "no crash"
