# shellcheck shell=bash
# Sourced by setup.sh: which Kokkos CUDA architecture to build for, and which CMake preset builds
# kformer for it. One Kokkos install (.deps/kokkos-<version>-cuda-<arch>) and one build directory
# (build/cuda, build/cuda-<arch>) per architecture, because a Kokkos 3.4 build aborts at start-up
# on a GPU of another major compute capability.

# Prints the Kokkos arch name: $KFORMER_CUDA_ARCH if set, else the one of the compute capability
# of this machine's GPU (nvidia-smi), else AMPERE80 (no GPU: a compile-only build, as in CI).
# Fails with one line when the arch is one this Kokkos version does not know.
kformer_cuda_arch() {  # $1 = Kokkos version (3.4.01, 4.6.01)
  local version=$1 arch=${KFORMER_CUDA_ARCH:-} caps=""
  if [ -z "$arch" ]; then
    if command -v nvidia-smi >/dev/null 2>&1; then
      caps=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | tr -d ' ' | sort -u || true)
    fi
    if [ "$(echo "$caps" | grep -c .)" -gt 1 ]; then
      echo "setup: this machine has GPUs of compute capabilities $(echo "$caps" | tr '\n' ' ')and one Kokkos build serves one: set KFORMER_CUDA_ARCH (e.g. AMPERE80)" >&2
      return 1
    fi
    case "$caps" in
      "") arch=AMPERE80 ;;
      7.0) arch=VOLTA70 ;;
      8.0) arch=AMPERE80 ;;
      8.6) arch=AMPERE86 ;;
      8.9) arch=ADA89 ;;
      9.0) arch=HOPPER90 ;;
      *)
        echo "setup: no Kokkos arch known here for the GPU's compute capability $caps: set KFORMER_CUDA_ARCH to the Kokkos name (e.g. AMPERE80, HOPPER90; see Kokkos' Kokkos_ARCH_* options)" >&2
        return 1 ;;
    esac
  fi
  # Kokkos 3.4 stops at Ampere; setup.sh adds HOPPER90 to it, nothing newer.
  if [[ $version == 3.* ]]; then
    case "$arch" in
      ADA89)
        echo "setup: the GPU is an Ada (compute capability 8.9), which Kokkos $version does not know: set KFORMER_CUDA_ARCH=AMPERE86 (its code runs on 8.9), or build Kokkos 4.6.01 (--kokkos 4.6.01), which has ADA89" >&2
        return 1 ;;
      BLACKWELL*)
        echo "setup: Kokkos $version does not know $arch: build Kokkos 4.6.01 (--kokkos 4.6.01) or use a site's Kokkos 4.x (Kokkos_ROOT)" >&2
        return 1 ;;
    esac
  fi
  echo "$arch"
}

# The configure/build/test preset of an arch: 'cuda' for AMPERE80, 'cuda-<arch>' otherwise
# (CMakePresets.json has cuda-volta70, cuda-ampere86 and cuda-hopper90); with Kokkos 4.6.01
# 'kokkos46-cuda' and 'kokkos46-cuda-hopper90', and none for the other arches (empty).
kformer_cuda_preset() {  # $1 = Kokkos arch name, $2 = Kokkos version (default 3.4.01)
  case "${2:-3.4.01}:$1" in
    3.*:AMPERE80) echo cuda ;;
    3.*:*) echo "cuda-$(echo "$1" | tr '[:upper:]' '[:lower:]')" ;;
    *:AMPERE80) echo kokkos46-cuda ;;
    *:HOPPER90) echo kokkos46-cuda-hopper90 ;;
  esac
}
