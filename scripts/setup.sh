#!/usr/bin/env bash
# Provides what kformer needs on a Debian 12 machine: the Debian packages, and Kokkos 3.4.01
# built from Debian's trilinos source package into .deps/ (unless Kokkos_ROOT is given).
# Idempotent and quiet when there is nothing to do.
#
#   scripts/setup.sh            Debian packages + Kokkos OpenMP+Serial
#   scripts/setup.sh --cuda     also Kokkos CUDA (Ampere80 by default; KFORMER_CUDA_ARCH=HOPPER90
#                               for an H100/H200) with the CUDA 13 fixes applied
set -euo pipefail

top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
deps=${KFORMER_DEPS:-$top/.deps}
kokkos_version=3.4.01
want_cuda=0
for a in "$@"; do
  case "$a" in
    --cuda) want_cuda=1 ;;
    -h|--help) sed -n '2,9p' "$0"; exit 0 ;;
    *) echo "setup.sh: unknown argument '$a' (valid: --cuda)" >&2; exit 2 ;;
  esac
done

log() { echo "setup: $*" >&2; }

# --- Debian packages ------------------------------------------------------------------------
packages=(cmake g++ make git pkg-config libopenmpi-dev openmpi-bin libopenblas-dev libopenblas-openmp-dev
          libyaml-cpp-dev libcli11-dev nlohmann-json3-dev libgtest-dev libbenchmark-dev
          dpkg-dev xz-utils ca-certificates shellcheck
          python3-torch python3-numpy python3-matplotlib
          clang-14 libclang-rt-14-dev)   # the deck fuzzer (scripts/fuzz_deck.sh): clang++ and libFuzzer
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  sudo=""; [ "$(id -u)" -ne 0 ] && sudo="sudo"
  log "installing Debian packages: ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# --- Kokkos source from Debian's trilinos package -------------------------------------------
kokkos_source() {
  local src=$deps/src/kokkos-$kokkos_version
  if [ ! -f "$src/CMakeLists.txt" ]; then
    local work=$deps/src/apt
    mkdir -p "$work/lists/partial" "$work/dl"
    # A private deb-src list: the system's apt sources stay untouched.
    echo "deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian bookworm main" \
      > "$work/sources.list"
    local o=(-o "Dir::Etc::SourceList=$work/sources.list" -o Dir::Etc::SourceParts=/dev/null
             -o "Dir::State::Lists=$work/lists" -o Debug::NoDropPrivs=1)
    log "downloading Debian's trilinos source package (Kokkos $kokkos_version lives in it)"
    apt-get "${o[@]}" update -qq
    (cd "$work/dl" && apt-get "${o[@]}" source --download-only -qq trilinos >/dev/null 2>&1)
    local tarball
    tarball=$(find "$work/dl" -name 'trilinos_*.orig.tar.*' | head -n 1)
    local inner
    inner=$(tar -tzf "$tarball" | head -n 1 | cut -d/ -f1)
    mkdir -p "$src.tmp"
    tar -xzf "$tarball" -C "$src.tmp" --strip-components=3 "$inner/packages/kokkos"
    grep -q "3.4.01" "$src.tmp/master_history.txt" || { echo "setup: the trilinos source does not hold Kokkos $kokkos_version" >&2; exit 1; }
    rm -rf "$src" && mv "$src.tmp" "$src"
    rm -rf "$work"   # the 166 MB tarball is not needed once Kokkos is extracted
  fi
  echo "$src"
}

# The three CUDA 13 fixes and the Hopper arch that Kokkos 3.4.01 lacks; each is idempotent.
patch_kokkos_for_cuda13() {
  local s=$1
  sed -i 's/^default_arch="sm_35"/default_arch="sm_80"/' "$s/bin/nvcc_wrapper"
  local half=$s/core/src/Cuda/Kokkos_Cuda_Half.hpp
  if ! grep -q "CUDART_VERSION >= 13000" "$half"; then
    # CUDA 13's cuda_fp16.h no longer fits 3.4's __half wrapper: take the float-backed fallback.
    sed -i 's/^#include <Kokkos_Macros.hpp>$/#include <Kokkos_Macros.hpp>\n#if defined(KOKKOS_ENABLE_CUDA)\n#include <cuda_runtime_api.h>\n#endif/' "$half"
    sed -i 's/^      defined(KOKKOS_ARCH_MAXWELL52))$/      defined(KOKKOS_ARCH_MAXWELL52)) \&\& \\\n    !(defined(CUDART_VERSION) \&\& CUDART_VERSION >= 13000)/' "$half"
  fi
  local space=$s/core/src/Cuda/Kokkos_CudaSpace.cpp
  if ! grep -q "cudaMemLocationTypeDevice" "$space"; then
    perl -0pi -e 's/CUDA_SAFE_CALL\(cudaMemPrefetchAsync\(ptr, bytes, space.cuda_device\(\),\s*space.cuda_stream\(\)\)\);/#if CUDART_VERSION >= 13000\n    cudaMemLocation loc{cudaMemLocationTypeDevice, space.cuda_device()};\n    CUDA_SAFE_CALL(cudaMemPrefetchAsync(ptr, bytes, loc, 0, space.cuda_stream()));\n#else\n    CUDA_SAFE_CALL(cudaMemPrefetchAsync(ptr, bytes, space.cuda_device(),\n                                        space.cuda_stream()));\n#endif/' "$space"
  fi
  local arch=$s/cmake/kokkos_arch.cmake
  if ! grep -q HOPPER90 "$arch"; then
    sed -i 's/^KOKKOS_ARCH_OPTION(AMPERE86        GPU  "NVIDIA Ampere generation CC 8.6")$/&\nKOKKOS_ARCH_OPTION(HOPPER90        GPU  "NVIDIA Hopper generation CC 9.0")/' "$arch"
    sed -i 's/^CHECK_CUDA_ARCH(AMPERE86  sm_86)$/&\nCHECK_CUDA_ARCH(HOPPER90  sm_90)/' "$arch"
    sed -i 's/^#cmakedefine KOKKOS_ARCH_AMPERE86$/&\n#cmakedefine KOKKOS_ARCH_HOPPER90/' "$s/cmake/KokkosCore_config.h.in"
  fi
}

build_kokkos() {  # $1 = name of the install, rest = cmake options
  local name=$1; shift
  local prefix=$deps/$name
  [ -f "$prefix/.complete" ] && return 0
  local src
  src=$(kokkos_source)
  local bdir=$deps/build/$name
  log "building Kokkos $kokkos_version ($name) into $prefix"
  rm -rf "$bdir" "$prefix"
  cmake -S "$src" -B "$bdir" -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX="$prefix" \
        -DCMAKE_CXX_STANDARD=17 -DKokkos_CXX_STANDARD=17 "$@" >"$deps/$name.configure.log" 2>&1 \
    || { echo "setup: Kokkos configure failed, see $deps/$name.configure.log" >&2; exit 1; }
  cmake --build "$bdir" -j "$(nproc)" >"$deps/$name.build.log" 2>&1 \
    || { echo "setup: Kokkos build failed, see $deps/$name.build.log" >&2; exit 1; }
  cmake --install "$bdir" >/dev/null
  rm -rf "$bdir"
  touch "$prefix/.complete"
}

if [ -n "${Kokkos_ROOT:-}" ]; then
  [ -d "$Kokkos_ROOT" ] || { echo "setup: Kokkos_ROOT=$Kokkos_ROOT does not exist; unset it to build Kokkos $kokkos_version from Debian's source" >&2; exit 1; }
  exit 0
fi

mkdir -p "$deps"
build_kokkos "kokkos-$kokkos_version-openmp" -DKokkos_ENABLE_SERIAL=ON -DKokkos_ENABLE_OPENMP=ON

if [ $want_cuda -eq 1 ]; then
  arch=${KFORMER_CUDA_ARCH:-AMPERE80}
  cuda=${CUDA_HOME:-/usr/local/cuda}
  [ -x "$cuda/bin/nvcc" ] || { echo "setup: --cuda needs nvcc at $cuda/bin/nvcc (set CUDA_HOME)" >&2; exit 1; }
  src=$(kokkos_source)
  patch_kokkos_for_cuda13 "$src"
  lower=$(echo "$arch" | tr '[:upper:]' '[:lower:]')
  PATH=$cuda/bin:$PATH build_kokkos "kokkos-$kokkos_version-cuda-$lower" \
    -DCMAKE_CXX_COMPILER="$src/bin/nvcc_wrapper" -DKokkos_ENABLE_SERIAL=ON \
    -DKokkos_ENABLE_CUDA=ON -DKokkos_ENABLE_CUDA_LAMBDA=ON -DKokkos_ARCH_"$arch"=ON \
    -DCUDAToolkit_ROOT="$cuda"
fi
