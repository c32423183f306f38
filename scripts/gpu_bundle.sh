#!/usr/bin/env bash
# Builds here, for a GPU machine that has CUDA but no MPI, yaml-cpp or OpenBLAS (the lent
# H100/H200), a bundle that runs there as it is: kformer and the CUDA test binaries, built for
# one GPU arch, with every shared library they need that such a machine lacks.
#
#   scripts/gpu_bundle.sh [ARCH]     ARCH: Kokkos' name, HOPPER90 (H100/H200, default) or AMPERE80 (A100)
#   KFORMER_BUNDLE_KOKKOS=4.6.01 scripts/gpu_bundle.sh [ARCH]
#                                    the same against Kokkos 4.6.01 (a site's 4.x), into
#                                    build/gpu-bundle-kokkos46/ from build/gpu-<arch>-kokkos46/
#
# Produces build/gpu-bundle/ (KFORMER_BUNDLE_DIR to change; the build itself is build/gpu-<arch>/):
#   bin/      kformer, kformer-kernel-bench, kformer-sm-share and kformer-sustained (bench/contention), test_*_cuda (the kernel tests on the GPU),
#             test_comm_nccl; their RPATH is $ORIGIN/../lib, so no LD_LIBRARY_PATH is needed for
#             what lib/ holds
#   py/       the Python scripts scripts/gpu_perf.sh runs and the decks they read, in the
#             checkout's layout (bench/, scripts/, input/), of the binaries' commit
#   lib/      what `ldd` names (MPI, yaml-cpp, libstdc++, ...), except glibc, the driver (libcuda) and CUDA's own libraries
#             (cudart, cuBLAS, NCCL: hundreds of MB, and the GPU machine has them; gpu_check.sh
#             finds them in its CUDA install or Python wheels)
#   lib/openmpi/  Open MPI's components and help texts: a singleton (no mpirun, no orted) runs
#             with them under OMPI_MCA_ess_singleton_isolated=1 (gpu_check.sh sets it)
#   MANIFEST  arch, git hash, the glibc it needs, the CUDA libraries it expects there, and the
#             CPU's iteration-1 loss of input/tiny.yaml (the host build), which gpu_check.sh compares
#   build/gpu-bundle.tar.xz   the same, packed (about a sixth): what the device tool carries
# Then, on the GPU machine: scripts/gpu_check.sh (correctness) or scripts/gpu_perf.sh (issue 19's
# measurements), with the device tool: carry ["build/gpu-bundle.tar.xz"], command
# "tar -C build -xJf build/gpu-bundle.tar.xz && scripts/gpu_session.sh ...".
#
# Kokkos for ARCH: Kokkos_ROOT when set, else ${KFORMER_DEPS:-.deps}/kokkos-<version>-cuda-<arch>
# (version: KFORMER_BUNDLE_KOKKOS, 3.4.01 unless set), which scripts/setup.sh --cuda
# (KFORMER_CUDA_ARCH=ARCH) builds when it is missing or stale.
set -euo pipefail

top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
log() { echo "gpu_bundle: $*" >&2; }
die() { echo "gpu_bundle: $*" >&2; exit 1; }

arch=${1:-HOPPER90}
case "$arch" in
  -h|--help) sed -n '2,31p' "$0"; exit 0 ;;
  *[!A-Z0-9]*|"") die "'$arch' is not a Kokkos GPU arch name (e.g. HOPPER90, AMPERE80)" ;;
esac
lower=$(echo "$arch" | tr '[:upper:]' '[:lower:]')
kokkos_version=${KFORMER_BUNDLE_KOKKOS:-3.4.01}
case "$kokkos_version" in
  3.4.01) suffix="" ;;
  4.6.01) suffix=-kokkos46 ;;
  *) die "KFORMER_BUNDLE_KOKKOS=$kokkos_version: 3.4.01 or 4.6.01 (for another Kokkos, Kokkos_ROOT)" ;;
esac
deps=${KFORMER_DEPS:-$top/.deps}
cuda=${CUDA_HOME:-/usr/local/cuda}
bdir=$top/build/gpu-$lower$suffix
out=$(realpath -m "${KFORMER_BUNDLE_DIR:-$top/build/gpu-bundle$suffix}")
[ -x "$cuda/bin/nvcc" ] || die "no nvcc at $cuda/bin/nvcc: set CUDA_HOME to the CUDA toolkit"

# --- Kokkos built for ARCH -------------------------------------------------------------------
if [ -n "${Kokkos_ROOT:-}" ]; then
  kokkos=$Kokkos_ROOT
else
  # setup.sh knows whether an install is current (its patches): quiet when it is, else it
  # (re)builds it, several minutes. The version is named, never found by a glob: .deps may hold
  # both versions' CUDA installs for ARCH.
  KFORMER_CUDA_ARCH=$arch KFORMER_DEPS=$deps "$top/scripts/setup.sh" --cuda --kokkos "$kokkos_version"
  kokkos=$deps/kokkos-$kokkos_version-cuda-$lower
  [ -f "$kokkos/.complete" ] || die "scripts/setup.sh --cuda --kokkos $kokkos_version left no $kokkos"
fi
# Kokkos 3.4 refuses a GPU of another major compute capability: check before a long build.
grep -q "^#define KOKKOS_ARCH_$arch\b" "$kokkos/include/KokkosCore_config.h" 2>/dev/null ||
  die "$kokkos is not a Kokkos built for $arch (its KokkosCore_config.h lacks KOKKOS_ARCH_$arch)"
log "Kokkos $kokkos"

# --- build -----------------------------------------------------------------------------------
mkdir -p "$bdir"
# RPATH (not RUNPATH, hence --disable-new-dtags) so that it also serves the libraries' own
# dependencies and Open MPI's dlopen()ed components. No host CBLAS: on the GPU the vendor GEMM is
# cuBLAS, and OpenBLAS (35 MB with every CPU's kernels) would not fit the 64 MiB a carry takes.
PATH=$cuda/bin:$PATH cmake -S "$top" -B "$bdir" -DCMAKE_BUILD_TYPE=Release \
  -DKokkos_ROOT="$kokkos" -DCMAKE_CXX_COMPILER="$kokkos/bin/nvcc_wrapper" \
  -DCUDAToolkit_ROOT="$cuda" -DNCCL_ROOT="$cuda" \
  -DKFORMER_ENABLE_MPI=ON -DKFORMER_ENABLE_BLAS=ON -DKFORMER_ENABLE_NCCL=ON \
  -DKFORMER_ENABLE_TESTS=ON -DKFORMER_ENABLE_BENCHMARKS=ON -DCMAKE_DISABLE_FIND_PACKAGE_BLAS=ON \
  -DCMAKE_BUILD_WITH_INSTALL_RPATH=ON "-DCMAKE_INSTALL_RPATH=\$ORIGIN/../lib" \
  -DCMAKE_EXE_LINKER_FLAGS=-Wl,--disable-new-dtags >"$bdir.configure.log" 2>&1 ||
  { tail -20 "$bdir.configure.log" >&2; die "configure failed (log: $bdir.configure.log)"; }
targets=(kformer kformer-kernel-bench kformer-sm-share kformer-sustained)
while read -r t; do targets+=("$t"); done < <(cmake --build "$bdir" --target help |
  sed -n 's/^\.\.\. \(test_[a-z_]*_cuda\|test_comm_nccl\)$/\1/p' | sort)
[ ${#targets[@]} -gt 4 ] || die "the build in $bdir has no CUDA test targets: is $kokkos a CUDA Kokkos?"
log "building ${targets[*]} in $bdir (nvcc: long on few cores)"
build_args=()
for t in "${targets[@]}"; do build_args+=(--target "$t"); done
PATH=$cuda/bin:$PATH cmake --build "$bdir" -j "${KFORMER_JOBS:-$(nproc)}" "${build_args[@]}" >"$bdir.build.log" 2>&1 ||
  { grep -E "error" "$bdir.build.log" | head -20 >&2; die "build failed (log: $bdir.build.log)"; }

# --- the bundle ------------------------------------------------------------------------------
# glibc and the driver come with the GPU machine; so do CUDA's own libraries (classified below
# by where they resolve here).
is_glibc() {
  case "$1" in
    libc.so.*|libm.so.*|libpthread.so.*|libdl.so.*|librt.so.*|libresolv.so.*|libutil.so.*|ld-linux*|linux-vdso*) return 0 ;;
    libcuda.so.*|libnvidia-*) return 0 ;;
  esac
  return 1
}
# Open MPI components for networks absent there (UCX, PSM, libfabric, verbs) or for SHMEM would
# drag in their own stacks: a singleton on one node needs none of them.
component_deny='^lib(uc[pmst]|psm|fabric|ibverbs|rdmacm|munge|infinipath|nl-|efa|oshmem|cuda\.)'

rm -rf "$out.tmp"
mkdir -p "$out.tmp/bin" "$out.tmp/lib"
cuda_libs=()
bundle_deps() {  # $1 = an ELF file: copy what it needs into lib/
  local name path real
  while read -r name path; do
    is_glibc "$name" && continue
    [ "$path" = "not" ] && die "$1 needs $name, which is not found here"
    real=$(readlink -f "$path")
    case "$real" in
      "$(readlink -f "$cuda")"/*) [[ " ${cuda_libs[*]} " == *" $name "* ]] || cuda_libs+=("$name"); continue ;;
    esac
    [ -e "$out.tmp/lib/$name" ] || cp -L "$path" "$out.tmp/lib/$name"
  done < <(ldd "$1" | awk '$2 == "=>" {print $1, $3}')
}
for t in "${targets[@]}"; do
  cp "$bdir/bin/$t" "$out.tmp/bin/"
  bundle_deps "$out.tmp/bin/$t"
done
# gpu_perf.sh's scripts and decks (they import each other by these relative paths).
for f in bench/step_vs_torch_gpu.py bench/torch_gpt.py bench/torch_families.py bench/attention_vs_sdpa.py scripts/reference/kformer_ref.py \
         scripts/gpu_perf_summary.py input/gpt3-small.yaml input/tiny.yaml; do
  mkdir -p "$out.tmp/py/$(dirname "$f")"
  cp "$top/$f" "$out.tmp/py/$f"
done
if [ -e "$out.tmp/lib/libmpi.so.40" ] && command -v ompi_info >/dev/null; then
  ompi_lib=$(ompi_info --path pkglibdir --parsable | sed -n 's/^path:pkglibdir://p')
  ompi_share=$(ompi_info --path pkgdatadir --parsable | sed -n 's/^path:pkgdatadir://p')
  mkdir -p "$out.tmp/lib/openmpi/components" "$out.tmp/lib/openmpi/help" "$out.tmp/lib/openmpi/hwloc-plugins"
  for c in "$ompi_lib"/mca_*.so; do
    ldd "$c" | awk '$2 == "=>" {print $1}' | grep -Eq "$component_deny" && continue
    cp "$c" "$out.tmp/lib/openmpi/components/"
    bundle_deps "$c"
  done
  cp "$ompi_share"/*.txt "$out.tmp/lib/openmpi/help/"
fi

# Debian's Open MPI libraries and components carry RUNPATH /usr/lib/x86_64-linux-gnu/openmpi/lib,
# which hides the executable's RPATH from their own lookups: point it at the bundle instead
# ($ORIGIN, or $ORIGIN/../.. from lib/openmpi/components), in place (the string only shrinks).
set_runpaths() {  # FILE=NEW_PATH ...
  python3 - "$@" <<'PY'
import struct, sys
for arg in sys.argv[1:]:
    path, new = arg.split("=", 1)
    with open(path, "r+b") as f:
        elf = f.read()
        if elf[:4] != b"\x7fELF" or elf[4] != 2:
            sys.exit(f"{path}: not a 64-bit ELF file")
        phoff, = struct.unpack_from("<Q", elf, 0x20)
        phentsize, phnum = struct.unpack_from("<HH", elf, 0x36)
        loads, dynamic = [], None
        for i in range(phnum):
            p_type, _, p_offset, p_vaddr, _, p_filesz = struct.unpack_from("<IIQQQQ", elf, phoff + i * phentsize)
            if p_type == 1:
                loads.append((p_vaddr, p_offset, p_filesz))
            elif p_type == 2:
                dynamic = (p_offset, p_filesz)
        if dynamic is None:
            continue
        strtab, paths = None, []
        for off in range(dynamic[0], dynamic[0] + dynamic[1], 16):
            tag, val = struct.unpack_from("<qQ", elf, off)
            if tag == 0:
                break
            if tag == 5:
                strtab = next(o + val - v for v, o, n in loads if v <= val < v + n)
            elif tag in (15, 29):  # DT_RPATH, DT_RUNPATH
                paths.append(val)
        for index in paths:
            start = strtab + index
            old = elf[start:elf.index(b"\0", start)]
            if b"$ORIGIN" in old:
                continue
            if len(new) > len(old):
                sys.exit(f"{path}: its run path '{old.decode()}' is shorter than '{new}': cannot rewrite it in place")
            f.seek(start)
            f.write(new.encode() + b"\0" * (len(old) - len(new) + 1))
PY
}
runpaths=()
for f in "$out.tmp"/lib/*.so*; do runpaths+=("$f=\$ORIGIN"); done
for f in "$out.tmp"/lib/openmpi/components/*.so; do [ -e "$f" ] && runpaths+=("$f=\$ORIGIN/../.."); done
set_runpaths "${runpaths[@]}" || die "could not rewrite the run paths of the bundled libraries"

# The CPU's iteration-1 losses of input/tiny.yaml from the host build, fp32 and bf16, for
# gpu_check.sh to hold the GPU's to: the same deck, kernels and data, another backend.
mkdir -p "$top/build"
bash -c 'source "$1/scripts/common.sh" && kformer_configure default && kformer_build default kformer' _ "$top" ||
  die "the host build (preset default) failed: it gives the CPU loss the GPU run is compared with"
cpu_loss() {  # PRECISION: prints the iteration-1 loss
  (cd "$top" && OMP_NUM_THREADS=2 OMP_PROC_BIND=false KFORMER_COMM_STRICT=false build/default/bin/kformer input/tiny.yaml \
     comm.backend=self train.steps=1 train.precision="$1" output.json="$out.tmp/cpu_tiny.json" >"$out.tmp/cpu_tiny.log" 2>&1) ||
    die "the host run of input/tiny.yaml in $1 failed (see $out.tmp/cpu_tiny.log)"
  /usr/bin/python3 -c 'import json,sys; print(repr(json.load(open(sys.argv[1]))["iterations"][0]["loss"]))' "$out.tmp/cpu_tiny.json"
  rm -f "$out.tmp/cpu_tiny.json" "$out.tmp/cpu_tiny.log"
}
cpu_loss_fp32=$(cpu_loss fp32)
cpu_loss_bf16=$(cpu_loss bf16)

glibc_needed=$(objdump -T "$out.tmp"/bin/* "$out.tmp"/lib/*.so* "$out.tmp"/lib/openmpi/components/*.so 2>/dev/null |
  grep -o 'GLIBC_[0-9][0-9.]*' | sort -u -V | tail -n 1 || true)
{
  echo "arch $arch"
  echo "git $(git -C "$top" describe --always --dirty 2>/dev/null || echo unknown)"
  echo "built $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(sed -n 's/^PRETTY_NAME=//p' /etc/os-release | tr -d '"'), $("$cuda"/bin/nvcc --version | sed -n 's/.*release \([0-9.]*\).*/CUDA \1/p')"
  echo "kokkos $kokkos"
  echo "glibc ${glibc_needed#GLIBC_}"
  echo "cuda_libs ${cuda_libs[*]}"
  echo "binaries ${targets[*]}"
  echo "cpu_tiny_loss1 $cpu_loss_fp32"
  echo "cpu_tiny_bf16_loss1 $cpu_loss_bf16"
} >"$out.tmp/MANIFEST"
rm -rf "$out" && mv "$out.tmp" "$out"

# --- check: with a clean environment everything resolves into the bundle, glibc or CUDA -------
# The binaries as they are; a component as kformer loads it, with the bundle's libraries that its
# RPATH found already (LD_LIBRARY_PATH stands in for them).
bad=0
for f in "$out"/bin/* "$out"/lib/openmpi/components/*.so; do
  [ -e "$f" ] || continue
  lib_path=""
  case "$f" in "$out"/lib/*) lib_path=$out/lib ;; esac
  while read -r name arrow path _; do
    [ "$arrow" = "=>" ] || continue
    is_glibc "$name" && continue
    case "$(readlink -f "$path" 2>/dev/null)" in
      "$out"/lib/*|"$(readlink -f "$cuda")"/*) ;;
      *) echo "gpu_bundle: $f: $name resolves to '$path', outside the bundle" >&2; bad=1 ;;
    esac
  done < <(env -i PATH=/usr/bin:/bin ${lib_path:+LD_LIBRARY_PATH=$lib_path} ldd "$f")
done
[ $bad -eq 0 ] || die "the bundle is not self-contained (above)"
size=$(du -sm "$out" | cut -f1)
log "$out: ${#targets[@]} binaries, $(find "$out/lib" -maxdepth 1 -name '*.so*' | wc -l) libraries, ${size} MiB; needs glibc >= ${glibc_needed#GLIBC_}, CUDA's ${cuda_libs[*]}"
# The device tool carries at most 64 MiB in all, and the bundle (cuDNN's attention in every binary
# that runs attention) is about that unpacked: it also travels as one .tar.xz, about a sixth of it,
# unpacked there by the command itself.
archive=$out.tar.xz
rm -f "$archive"
tar -C "$(dirname "$out")" -cf - "$(basename "$out")" | xz -T0 -6 >"$archive" || die "could not write $archive"
packed=$(du -sm "$archive" | cut -f1)
log "$archive: ${packed} MiB; with the device tool carry [\"${archive#"$top"/}\"] and start the command with" \
    "'tar -C $(dirname "${out#"$top"/}") -xJf ${archive#"$top"/} && ...'"
[ "$packed" -lt 60 ] || die "$archive is ${packed} MiB: the device tool carries at most 64 MiB in all"
[ "$size" -lt 64 ] || log "$out itself is ${size} MiB, over the 64 MiB a carry takes: carry $archive"
echo "$out"
