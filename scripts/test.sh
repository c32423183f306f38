#!/usr/bin/env bash
# Set-up if needed, build the default preset, run every test (ctest); non-zero on any failure.
#   scripts/test.sh              all tests
#   scripts/test.sh -L unit      ctest arguments pass through (labels: unit, mpi, kernels, ...)
# Two tests at a time (-j2) where both fit: a test takes the whole of a 2-core machine unless it is
# one process of one thread and untimed (kformer_test_defaults, cmake/KformerTesting.cmake).
set -euo pipefail
# shellcheck source=scripts/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

mkdir -p "$top/build"
kformer_configure default
kformer_build default
cd "$top" && ctest --preset default -j2 "$@"
