#!/usr/bin/env bash
# Runs shellcheck over every shell script of jobscripts/ and scripts/ (and these tests), from the
# source root so that `# shellcheck source=...` paths resolve.
#   usage: tests/jobscripts/shellcheck_test.sh SHELLCHECK SOURCE_DIR
set -euo pipefail
shellcheck=$1 src=$2
cd "$src"
files=(jobscripts/*.sh jobscripts/*.pbs jobscripts/*.slurm scripts/*.sh tests/*/*.sh)
"$shellcheck" -x "${files[@]}"
echo "shellcheck: ${#files[@]} scripts clean"
