#!/usr/bin/env bash
# Keeps a GPU run's raw outputs in the repository: copies the folder fetched from the device tool
# after scripts/gpu_session.sh (its manifest.json, gpu_session.tgz and the plain files beside it)
# into docs/gpu-runs/<date>-<gpu-slug>/, from which scripts/gpu_tables.py makes docs/' GPU tables.
#
#   scripts/gpu_keep.sh RUN_DIR [NAME]     NAME: the folder's name instead (DATE-GPU-..., e.g.
#                                          2026-11-27-h100-2 for a second run that day)
#
# The archive is unpacked, the plain files laid over it, and the whole checked against the manifest
# (scripts/gpu_manifest.py check): each file listed with its sha256, none unlisted, each text and at
# most 512 KiB, a GPU named. Any problem: one line and exit 2, nothing kept. KFORMER_GPU_RUNS: the
# folder of kept runs (default docs/gpu-runs; the tests point it elsewhere).
set -euo pipefail

top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
die() { echo "gpu_keep: $*" >&2; exit 2; }
case "${1:-}" in -h|--help) sed -n '2,12p' "$0"; exit 0 ;; "") die "usage: scripts/gpu_keep.sh RUN_DIR [NAME]" ;; esac
run=$1 name=${2:-}
runs=${KFORMER_GPU_RUNS:-$top/docs/gpu-runs}
[ -d "$run" ] || die "no folder $run"
[ -z "$name" ] || [[ "$name" =~ ^[0-9]{4}-[0-9]{2}-[0-9]{2}-[a-z0-9][a-z0-9.-]*$ ]] ||
  die "NAME '$name' is not DATE-GPU[-...] in lower case (e.g. 2026-11-27-h100-2)"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/run"
tgz=$run/gpu_session.tgz
if [ -f "$tgz" ]; then
  # Files and folders only, inside the run: no link or absolute path may write elsewhere.
  listing=$(tar tvzf "$tgz" 2>&1) || die "$tgz is not a readable gzipped tar archive"
  odd=$(awk '$1 !~ /^[-d]/' <<<"$listing" | head -n 1)
  [ -z "$odd" ] || die "$tgz holds something other than files and folders: $odd"
  tar tzf "$tgz" | grep -qE '^/|(^|/)\.\.(/|$)' && die "$tgz holds a path outside the run"
  tar xzf "$tgz" -C "$tmp/run" --no-same-owner --no-same-permissions || die "$tgz could not be unpacked"
fi
# The plain files over the archive's: the manifest's sha256 then shows that both are the run's.
(cd "$run" && find . -path ./gpu_session.tgz -prune -o \( -type f -o -type l \) -print0) |
  while IFS= read -r -d '' f; do
    mkdir -p "$tmp/run/$(dirname "$f")"
    cp -P "$run/$f" "$tmp/run/$f"
  done
chmod -R u+rwX,go+rX "$tmp/run"

default=$(/usr/bin/python3 "$top/scripts/gpu_manifest.py" check "$tmp/run" 2>&1) || die "$run${default#gpu_manifest: "$tmp"/run}"
dest=$runs/${name:-$default}
[ ! -e "$dest" ] || die "$dest exists: that run is kept already (give NAME to keep another, e.g. $default-2)"
mkdir -p "$runs"
cp -R "$tmp/run" "$dest"
echo "gpu_keep: $(find "$dest" -type f -printf '%s\n' | awk '{n++; s += $1} END {printf "%d files, %.0f KiB", n, s / 1024}')" \
  "in ${dest#"$top"/}; now scripts/gpu_tables.py"
