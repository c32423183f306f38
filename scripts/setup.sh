#!/usr/bin/env bash
# Provides what kformer needs on a Debian 12 machine: the Debian packages, and a Kokkos built
# into .deps/ ($KFORMER_DEPS): 3.4.01 from Debian's trilinos source package, or 4.6.01 from its
# release tarball. Nothing is built when Kokkos_ROOT names a site's Kokkos.
# Idempotent and quiet when there is nothing to do.
#
#   scripts/setup.sh                  Debian packages + Kokkos 3.4.01 OpenMP+Serial (preset default)
#   scripts/setup.sh --cuda           also Kokkos 3.4.01 CUDA for this machine's GPU (nvidia-smi:
#                                     VOLTA70, AMPERE80, AMPERE86, HOPPER90 (ADA89 with 4.6.01 only);
#                                     AMPERE80 without a GPU; KFORMER_CUDA_ARCH=HOPPER90 overrides)
#                                     into .deps/kokkos-3.4.01-cuda-<arch>, with the CUDA 13 fixes and
#                                     the team-reduction fix of scripts/patches/; preset cuda (Ampere80)
#                                     or cuda-<arch> (cuda-volta70, cuda-ampere86, cuda-hopper90)
#                                     Also cudnn-frontend 1.23.0 (header-only, for cuDNN's
#                                     attention) into .deps/cudnn-frontend-1.23.0, from
#                                     $KFORMER_CUDNN_FRONTEND_TARBALL, else ../shared/deps/
#   scripts/setup.sh --kokkos 4.6.01  Kokkos 4.6.01 OpenMP+Serial from kokkos-4.6.01.tar.gz
#                                     ($KFORMER_KOKKOS_TARBALL, else ../shared/deps/); preset kokkos46.
#                                     With --cuda also 4.6.01 CUDA (.deps/kokkos-4.6.01-cuda-<arch>);
#                                     preset kokkos46-cuda (Ampere80) or kokkos46-cuda-hopper90
#   Kokkos_ROOT=/path scripts/setup.sh  use a site's Kokkos (3.4 or later): packages only
set -euo pipefail

top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
deps=${KFORMER_DEPS:-$top/.deps}
kokkos_version=3.4.01
want_cuda=0
while [ $# -gt 0 ]; do
  case "$1" in
    --cuda) want_cuda=1 ;;
    --kokkos)
      [ $# -ge 2 ] || { echo "setup.sh: --kokkos needs a version (3.4.01 or 4.6.01)" >&2; exit 2; }
      kokkos_version=$2; shift ;;
    --kokkos=*) kokkos_version=${1#--kokkos=} ;;
    -h|--help) sed -n '2,21p' "$0"; exit 0 ;;
    *) echo "setup.sh: unknown argument '$1' (valid: --cuda, --kokkos 3.4.01|4.6.01)" >&2; exit 2 ;;
  esac
  shift
done
case "$kokkos_version" in
  3.4.01|4.6.01) ;;
  *) echo "setup.sh: --kokkos $kokkos_version is not one setup.sh builds (3.4.01 or 4.6.01); for another, build it and pass Kokkos_ROOT" >&2; exit 2 ;;
esac

log() { echo "setup: $*" >&2; }

# --- Debian packages ------------------------------------------------------------------------
packages=(cmake g++ make git pkg-config libopenmpi-dev openmpi-bin libopenblas-dev libopenblas-openmp-dev
          libyaml-cpp-dev libcli11-dev nlohmann-json3-dev libgtest-dev libbenchmark-dev
          dpkg-dev xz-utils ca-certificates shellcheck
          python3-torch python3-numpy python3-matplotlib
          clang-14 libclang-rt-14-dev     # the deck fuzzer (scripts/fuzz_deck.sh): clang++ and libFuzzer
          libdnnl-dev ocl-icd-opencl-dev) # oneDNN: the host vendor GEMM for bf16 inputs (OpenBLAS 0.3.21 has no sbgemm);
                                          # Debian builds it with an OpenCL GPU runtime, so its CMake config needs OpenCL
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

# --- Kokkos source -------------------------------------------------------------------------
# 3.4.01: packages/kokkos of Debian's trilinos source package.
kokkos_source_3() {
  local src=$deps/src/kokkos-3.4.01
  if [ ! -f "$src/CMakeLists.txt" ]; then
    local work=$deps/src/apt
    mkdir -p "$work/lists/partial" "$work/dl"
    # A private deb-src list: the system's apt sources stay untouched.
    echo "deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian bookworm main" \
      > "$work/sources.list"
    local o=(-o "Dir::Etc::SourceList=$work/sources.list" -o Dir::Etc::SourceParts=/dev/null
             -o "Dir::State::Lists=$work/lists" -o Debug::NoDropPrivs=1)
    log "downloading Debian's trilinos source package (Kokkos 3.4.01 lives in it)"
    apt-get "${o[@]}" update -qq
    (cd "$work/dl" && apt-get "${o[@]}" source --download-only -qq trilinos >/dev/null 2>&1)
    local tarball
    tarball=$(find "$work/dl" -name 'trilinos_*.orig.tar.*' | head -n 1)
    local inner
    inner=$(tar -tzf "$tarball" | head -n 1 | cut -d/ -f1)
    mkdir -p "$src.tmp"
    tar -xzf "$tarball" -C "$src.tmp" --strip-components=3 "$inner/packages/kokkos"
    grep -q "3.4.01" "$src.tmp/master_history.txt" || { echo "setup: the trilinos source does not hold Kokkos 3.4.01" >&2; exit 1; }
    rm -rf "$src" && mv "$src.tmp" "$src"
    rm -rf "$work"   # the 166 MB tarball is not needed once Kokkos is extracted
  fi
  echo "$src"
}

# The absolute path of $1 in ../shared/deps/ (beside the checkout; for a git worktree also beside
# the main checkout), or nothing.
shared_dep() {
  local dirs=("$top/../shared/deps") common
  common=$(git -C "$top" rev-parse --path-format=absolute --git-common-dir 2>/dev/null || true)
  [ -n "$common" ] && dirs+=("$(dirname "$common")/../shared/deps")
  for d in "${dirs[@]}"; do
    if [ -f "$d/$1" ]; then (cd "$d" && echo "$(pwd)/$1"); return 0; fi
  done
}

# 4.6.01: the release tarball, which no package registry here has (see ../shared/deps/README.md).
kokkos_tarball() {
  if [ -n "${KFORMER_KOKKOS_TARBALL:-}" ]; then
    [ -f "$KFORMER_KOKKOS_TARBALL" ] || { echo "setup: KFORMER_KOKKOS_TARBALL=$KFORMER_KOKKOS_TARBALL does not exist" >&2; exit 1; }
    echo "$KFORMER_KOKKOS_TARBALL"; return 0
  fi
  local found
  found=$(shared_dep "kokkos-$kokkos_version.tar.gz")
  [ -n "$found" ] && { echo "$found"; return 0; }
  echo "setup: no kokkos-$kokkos_version.tar.gz in ../shared/deps/: set KFORMER_KOKKOS_TARBALL to the Kokkos $kokkos_version release source" >&2
  exit 1
}

# cudnn-frontend, the header-only C++ API of cuDNN's graphs (kernels.attention=vendor), into
# .deps/cudnn-frontend-<version> where CMake looks by default. Optional: without its tarball the
# CUDA build goes on without cuDNN's attention, and setup says so.
cudnn_frontend_version=1.23.0
unpack_cudnn_frontend() {
  local dest=$deps/cudnn-frontend-$cudnn_frontend_version
  [ -f "$dest/include/cudnn_frontend.h" ] && return 0
  local tarball=${KFORMER_CUDNN_FRONTEND_TARBALL:-}
  if [ -n "$tarball" ]; then
    [ -f "$tarball" ] || { echo "setup: KFORMER_CUDNN_FRONTEND_TARBALL=$tarball does not exist" >&2; exit 1; }
  else
    tarball=$(shared_dep "cudnn-frontend-$cudnn_frontend_version.tar.gz")
    if [ -z "$tarball" ]; then
      log "no cudnn-frontend-$cudnn_frontend_version.tar.gz in ../shared/deps/ (set KFORMER_CUDNN_FRONTEND_TARBALL): the CUDA build will have no kernels.attention=vendor"
      return 0
    fi
  fi
  log "extracting cudnn-frontend $cudnn_frontend_version from $tarball"
  rm -rf "$dest.tmp" && mkdir -p "$dest.tmp"
  tar -xzf "$tarball" -C "$dest.tmp" --strip-components=1
  local v=$dest.tmp/include/cudnn_frontend_version.h ma mi pa
  IFS=. read -r ma mi pa <<<"$cudnn_frontend_version"
  if ! grep -q "CUDNN_FRONTEND_MAJOR_VERSION $ma\$" "$v" 2>/dev/null || ! grep -q "CUDNN_FRONTEND_MINOR_VERSION $mi\$" "$v" ||
     ! grep -q "CUDNN_FRONTEND_PATCH_VERSION $pa\$" "$v"; then
    echo "setup: $tarball does not hold cudnn-frontend $cudnn_frontend_version (check KFORMER_CUDNN_FRONTEND_TARBALL)" >&2; exit 1
  fi
  rm -rf "$dest" && mv "$dest.tmp" "$dest"
}

kokkos_source_4() {
  local src=$deps/src/kokkos-$kokkos_version
  if [ ! -f "$src/CMakeLists.txt" ]; then
    local tarball
    tarball=$(kokkos_tarball)
    log "extracting Kokkos $kokkos_version from $tarball"
    rm -rf "$src.tmp" && mkdir -p "$src.tmp"
    tar -xzf "$tarball" -C "$src.tmp" --strip-components=1
    local ma mi pa
    IFS=. read -r ma mi pa <<<"$kokkos_version"
    if ! grep -q "set(Kokkos_VERSION_MAJOR $ma)" "$src.tmp/CMakeLists.txt" ||
       ! grep -q "set(Kokkos_VERSION_MINOR $((10#$mi)))" "$src.tmp/CMakeLists.txt" ||
       ! grep -q "set(Kokkos_VERSION_PATCH $((10#$pa)))" "$src.tmp/CMakeLists.txt"; then
      echo "setup: $tarball does not hold Kokkos $kokkos_version (check KFORMER_KOKKOS_TARBALL)" >&2; exit 1
    fi
    rm -rf "$src" && mv "$src.tmp" "$src"
  fi
  echo "$src"
}

kokkos_source() {
  case "$kokkos_version" in 3.*) kokkos_source_3 ;; *) kokkos_source_4 ;; esac
}

# Applies a patch of scripts/patches/ to a Kokkos source tree once: a patch that already applies
# in reverse is in place. Fails loudly when neither direction applies (another Kokkos tree).
apply_patch() {  # $1 = source tree, $2 = patch file
  local s=$1 p=$2
  if patch -p1 -d "$s" -R --dry-run -s -f <"$p" >/dev/null 2>&1; then return 0; fi
  patch -p1 -d "$s" --forward -s <"$p" >/dev/null ||
    { echo "setup: $(basename "$p") does not apply to $s: remove $s to start from a fresh source" >&2; exit 1; }
}

# Kokkos 3.4.01 for CUDA: the three CUDA 13 fixes, the Hopper arch it lacks, and our fix of its
# team-reduction race (scripts/patches/); each is idempotent.
patch_kokkos3_for_cuda() {
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
  apply_patch "$s" "$top/scripts/patches/kokkos-3.4.01-team-reduce-race.patch"
}

# Kokkos 4.6.01 for CUDA 13: nvcc_wrapper's default arch (sm_70, which CUDA 13 rejects; it only
# matters for compiles without an -arch flag, such as CMake's checks) and three API updates.
patch_kokkos4_for_cuda() {
  local s=$1
  sed -i 's/^default_arch="sm_70"$/default_arch="sm_80"/' "$s/bin/nvcc_wrapper"
  apply_patch "$s" "$top/scripts/patches/kokkos-$kokkos_version-cuda13.patch"
}

# Builds and installs Kokkos into .deps/<name> unless it is there already. The file .complete
# records the patches of scripts/patches/ the install was built with (empty: none) and, for 4.x,
# that it was built without Kokkos' deprecated code, so that an install from before a patch or
# that option was added or changed is rebuilt instead of silently kept.
#
# 4.x is built with Kokkos_ENABLE_DEPRECATED_CODE_4=OFF (its default is ON): what 4.x deprecated,
# 5.0 removes, so a kformer that builds against these installs uses none of it, and builds as well
# against a site's 4.x, which keeps the deprecated code (docs/kokkos-versions.md).
build_kokkos() {  # $1 = name of the install, $2 = file in scripts/patches/ ("" = none), rest = cmake options
  local name=$1 patch=$2; shift 2
  local prefix=$deps/$name stamp=""
  [ -n "$patch" ] && stamp=$(cd "$top/scripts/patches" && sha256sum "$patch")
  case "$kokkos_version" in
    4.*) local no_deprecated=Kokkos_ENABLE_DEPRECATED_CODE_4=OFF
         set -- "$@" "-D$no_deprecated"
         stamp="$stamp${stamp:+ }$no_deprecated" ;;
  esac
  if [ -f "$prefix/.complete" ] && [ "$(cat "$prefix/.complete")" = "$stamp" ]; then return 0; fi
  local src
  src=$(kokkos_source)
  local bdir=$deps/build/$name std=(-DCMAKE_CXX_STANDARD=17)
  # 4.x takes the standard from CMAKE_CXX_STANDARD and warns about its own variable.
  case "$kokkos_version" in 3.*) std+=(-DKokkos_CXX_STANDARD=17) ;; esac
  log "building Kokkos $kokkos_version ($name) into $prefix"
  rm -rf "$bdir" "$prefix"
  cmake -S "$src" -B "$bdir" -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX="$prefix" \
        "${std[@]}" "$@" >"$deps/$name.configure.log" 2>&1 \
    || { echo "setup: Kokkos configure failed, see $deps/$name.configure.log" >&2; exit 1; }
  # The compiler's progress on stderr as it goes; every line in the log.
  local rc
  { cmake --build "$bdir" -j "$(nproc)" 2>&1 |
      "$top/scripts/build_progress.sh" "setup: Kokkos $kokkos_version" "$deps/$name.build.log"; rc=${PIPESTATUS[0]}; } || true
  [ "$rc" -eq 0 ] || { echo "setup: Kokkos build failed, see $deps/$name.build.log" >&2; exit 1; }
  cmake --install "$bdir" >/dev/null
  rm -rf "$bdir"
  printf '%s' "$stamp" >"$prefix/.complete"
}

# Before the Kokkos builds: a site's own Kokkos (Kokkos_ROOT) takes cuDNN's attention too.
if [ $want_cuda -eq 1 ]; then
  mkdir -p "$deps"
  unpack_cudnn_frontend
fi

if [ -n "${Kokkos_ROOT:-}" ]; then
  [ -d "$Kokkos_ROOT" ] || { echo "setup: Kokkos_ROOT=$Kokkos_ROOT does not exist; unset it to build Kokkos $kokkos_version into .deps" >&2; exit 1; }
  exit 0
fi

mkdir -p "$deps"
build_kokkos "kokkos-$kokkos_version-openmp" "" -DKokkos_ENABLE_SERIAL=ON -DKokkos_ENABLE_OPENMP=ON

if [ $want_cuda -eq 1 ]; then
  # shellcheck source=scripts/cuda_arch.sh
  source "$top/scripts/cuda_arch.sh"
  arch=$(kformer_cuda_arch "$kokkos_version")
  cuda=${CUDA_HOME:-/usr/local/cuda}
  [ -x "$cuda/bin/nvcc" ] || { echo "setup: --cuda needs nvcc at $cuda/bin/nvcc (set CUDA_HOME)" >&2; exit 1; }
  src=$(kokkos_source)
  lower=$(echo "$arch" | tr '[:upper:]' '[:lower:]')
  opts=(-DCMAKE_CXX_COMPILER="$src/bin/nvcc_wrapper" -DKokkos_ENABLE_SERIAL=ON
        -DKokkos_ENABLE_CUDA=ON "-DKokkos_ARCH_$arch=ON" -DCUDAToolkit_ROOT="$cuda")
  case "$kokkos_version" in
    3.*) patch_kokkos3_for_cuda "$src"; opts+=(-DKokkos_ENABLE_CUDA_LAMBDA=ON)
         patch="kokkos-3.4.01-team-reduce-race.patch" ;;
    *) patch_kokkos4_for_cuda "$src"; patch="kokkos-$kokkos_version-cuda13.patch" ;;
  esac
  before=$(cat "$deps/kokkos-$kokkos_version-cuda-$lower/.complete" 2>/dev/null || echo none)
  PATH=$cuda/bin:$PATH build_kokkos "kokkos-$kokkos_version-cuda-$lower" "$patch" "${opts[@]}"
  preset=$(kformer_cuda_preset "$arch" "$kokkos_version")
  [ "$before" = "$(cat "$deps/kokkos-$kokkos_version-cuda-$lower/.complete")" ] || log "Kokkos $kokkos_version CUDA ($arch) is in $deps/kokkos-$kokkos_version-cuda-$lower$(
    [ -n "$preset" ] && echo "; build kformer with: cmake --preset $preset")"
fi
