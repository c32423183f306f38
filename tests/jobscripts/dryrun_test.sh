#!/usr/bin/env bash
# Each batch script in DRY_RUN=1 mode with a fake 2-node allocation: the launch lines start 8 ranks,
# 4 per node, put gpu_affinity.sh in front and run the study's deck; gpu_affinity.sh orders the
# node's GPUs; missing allocation variables stop with a message.
#   dryrun_test.sh SOURCE_DIR
set -euo pipefail
src=$(cd "$1" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }
# Every launch line ('  $ ...') of a dry run must start with $2; there must be $3 of them.
check_lines() {  # $1 output file, $2 expected prefix, $3 expected count, $4 name
  local n bad
  n=$(grep -c '^  \$ ' "$1" || true)
  [ "$n" -eq "$3" ] || fail "$4: $n launch lines, expected $3"
  bad=$(grep '^  \$ ' "$1" | grep -vF -- "  \$ $2" | head -1 || true)
  [ -z "$bad" ] || fail "$4: launch line does not start with '$2': $bad"
  grep -q "output.json=$tmp/" "$1" || fail "$4: reports are not written under RESULTS=$tmp"
}
# Keep the caller's network settings out of what the scripts print.
unset NCCL_NET NCCL_NET_GDR_LEVEL NCCL_CROSS_NIC NCCL_COLLNET_ENABLE SWEEP_SET STUDY KFORMER_BIN OUTDIR
deck=$src/input/gpt3-small.yaml

# --- Polaris: PBS_NODEFILE with two nodes ----------------------------------------------------
printf 'x3000c0s13b0n0.hsn.cm.polaris.alcf.anl.gov\nx3000c0s13b1n0.hsn.cm.polaris.alcf.anl.gov\n' > "$tmp/nodes"
DRY_RUN=1 RESULTS=$tmp PBS_NODEFILE=$tmp/nodes PBS_O_WORKDIR=$src PBS_JOBID=4242.polaris-pbs \
  bash "$src/jobscripts/polaris.pbs" > "$tmp/polaris.out" 2>&1 || { cat "$tmp/polaris.out"; fail "polaris.pbs dry run exited non-zero"; }
check_lines "$tmp/polaris.out" "mpiexec -n 8 --ppn 4 --depth 8 --cpu-bind depth --hostfile $tmp/nodes --env OMP_NUM_THREADS=8 $src/jobscripts/gpu_affinity.sh $src/build/polaris/bin/kformer $deck " 9 polaris
grep -q "comm.backend=nccl output.json=$tmp/polaris-layouts-4242.polaris-pbs/p000.json" "$tmp/polaris.out" || fail "polaris: no NCCL backend or per-job report path"
for v in NCCL_NET_GDR_LEVEL=PHB NCCL_CROSS_NIC=1 NCCL_COLLNET_ENABLE=1 "NCCL_NET=AWS Libfabric" FI_MR_CACHE_MONITOR=userfaultfd; do
  grep -qF "env: $v" "$tmp/polaris.out" || fail "polaris: dry run does not show $v"
done
for d in '^#PBS -A ' '^#PBS -q ' '^#PBS -l select=' '^#PBS -l walltime=' '^#PBS -l filesystems='; do
  grep -q "$d" "$src/jobscripts/polaris.pbs" || fail "polaris.pbs lacks the directive $d"
done
# A third node: 12 ranks, and the 1x8 layout no longer divides them.
echo x3000c0s13b2n0 >> "$tmp/nodes"
DRY_RUN=1 RESULTS=$tmp PBS_NODEFILE=$tmp/nodes PBS_O_WORKDIR=$src bash "$src/jobscripts/polaris.pbs" > "$tmp/polaris3.out" 2>&1
grep -q "^  \$ mpiexec -n 12 --ppn 4 " "$tmp/polaris3.out" || fail "polaris: 3 nodes do not give 12 ranks"
grep -q "sweep: skip p008 layout=1x8: layout 1x8: tp\*pp=8 does not divide 12 ranks" "$tmp/polaris3.out" || fail "polaris: 1x8 on 12 ranks not skipped"
if PBS_NODEFILE=$tmp/none PBS_O_WORKDIR=$src DRY_RUN=1 bash "$src/jobscripts/polaris.pbs" > "$tmp/err" 2>&1; then
  fail "polaris.pbs ran without a node file"
fi
grep -q "PBS_NODEFILE" "$tmp/err" || fail "polaris.pbs: the missing node file is not named"

# --- Perlmutter: SLURM_* of a two-node job --------------------------------------------------
DRY_RUN=1 RESULTS=$tmp SLURM_JOB_NUM_NODES=2 SLURM_SUBMIT_DIR=$src SLURM_JOB_ID=777 \
  bash "$src/jobscripts/perlmutter.slurm" > "$tmp/pm.out" 2>&1 || { cat "$tmp/pm.out"; fail "perlmutter.slurm dry run exited non-zero"; }
check_lines "$tmp/pm.out" "srun -N 2 -n 8 --ntasks-per-node=4 -c 32 --cpu-bind=cores --gpus-per-node=4 --gpu-bind=none $src/jobscripts/gpu_affinity.sh $src/build/pm/bin/kformer $deck " 9 perlmutter
grep -q "output.json=$tmp/perlmutter-layouts-777/p000.json" "$tmp/pm.out" || fail "perlmutter: no per-job report path"
DRY_RUN=1 RESULTS=$tmp SLURM_JOB_NUM_NODES=2 SLURM_SUBMIT_DIR=$src GPU_BIND=slurm STUDY=jobscripts/studies/straggler.json \
  bash "$src/jobscripts/perlmutter.slurm" > "$tmp/pm2.out" 2>&1
check_lines "$tmp/pm2.out" "srun -N 2 -n 8 --ntasks-per-node=4 -c 32 --cpu-bind=cores --gpus-per-task=1 --gpu-bind=closest $src/build/pm/bin/kformer $deck " 10 perlmutter-slurm-binding
for d in '^#SBATCH -C gpu' '^#SBATCH -N ' '^#SBATCH --ntasks-per-node=4' '^#SBATCH -A ' '^#SBATCH -q ' '^#SBATCH -t '; do
  grep -q "$d" "$src/jobscripts/perlmutter.slurm" || fail "perlmutter.slurm lacks the directive $d"
done

# --- MODE=train: one run with checkpoints, resumed when a checkpoint exists, early signal -----
printf 'x3000c0s13b0n0\nx3000c0s13b1n0\n' > "$tmp/nodes2"
DRY_RUN=1 MODE=train RESULTS=$tmp WALLTIME=01:00:00 DECK=input/tiny.yaml PBS_NODEFILE=$tmp/nodes2 PBS_O_WORKDIR=$src \
  bash "$src/jobscripts/polaris.pbs" > "$tmp/ptrain.out" 2>&1 || { cat "$tmp/ptrain.out"; fail "polaris.pbs MODE=train dry run exited non-zero"; }
grep -q "signal in 3420 s" "$tmp/ptrain.out" || fail "polaris train: walltime 1 h does not give a signal at 3420 s"
grep -qF "  \$ mpiexec -n 8 --ppn 4 " "$tmp/ptrain.out" || fail "polaris train: no 8-rank launch line"
grep -qF "input/tiny.yaml checkpoint.save=$tmp/polaris-train-tiny/checkpoints checkpoint.every=100 " "$tmp/ptrain.out" ||
  fail "polaris train: no checkpoint.save"
grep -q "checkpoint.load=" "$tmp/ptrain.out" && fail "polaris train: loads a checkpoint that does not exist"
mkdir -p "$tmp/pm-train-ck" && echo iter_0000100 > "$tmp/pm-train-ck/latest"
DRY_RUN=1 MODE=train RESULTS=$tmp CHECKPOINTS=$tmp/pm-train-ck SLURM_JOB_NUM_NODES=2 SLURM_SUBMIT_DIR=$src \
  bash "$src/jobscripts/perlmutter.slurm" > "$tmp/pmtrain.out" 2>&1 || { cat "$tmp/pmtrain.out"; fail "perlmutter.slurm MODE=train dry run exited non-zero"; }
grep -qF "checkpoint.load=$tmp/pm-train-ck comm.backend=nccl" "$tmp/pmtrain.out" || fail "perlmutter train: does not resume from the checkpoint"

# --- this machine ---------------------------------------------------------------------------
DRY_RUN=1 RESULTS=$tmp NP=4 bash "$src/jobscripts/local.sh" > "$tmp/local.out" 2>&1 || { cat "$tmp/local.out"; fail "local.sh dry run exited non-zero"; }
check_lines "$tmp/local.out" "$src/jobscripts/mpirun_local.sh 4 " 5 local

# --- GPU affinity: the node's GPUs nearest-first (reverse, default) or as they are (linear) ---
# kformer gives node-local rank r the r-th GPU it sees; the wrapper only orders them, for any count.
got=$(CUDA_VISIBLE_DEVICES=0,1,2,3 "$src/jobscripts/gpu_affinity.sh" printenv CUDA_VISIBLE_DEVICES)
[ "$got" = 3,2,1,0 ] || fail "gpu_affinity: CUDA_VISIBLE_DEVICES=0,1,2,3 -> $got, expected 3,2,1,0"
got=$(CUDA_VISIBLE_DEVICES=GPU-aa,GPU-bb "$src/jobscripts/gpu_affinity.sh" printenv CUDA_VISIBLE_DEVICES)
[ "$got" = GPU-bb,GPU-aa ] || fail "gpu_affinity: two UUIDs -> $got, expected GPU-bb,GPU-aa"
got=$(CUDA_VISIBLE_DEVICES=0,1 KFORMER_GPU_ORDER=linear "$src/jobscripts/gpu_affinity.sh" printenv CUDA_VISIBLE_DEVICES)
[ "$got" = 0,1 ] || fail "gpu_affinity: linear changed CUDA_VISIBLE_DEVICES=0,1 to $got"
mkdir -p "$tmp/smi"   # a node whose nvidia-smi -L lists 2 GPUs (one split into MIG devices)
cat > "$tmp/smi/nvidia-smi" <<'SMI'
#!/bin/sh
echo "GPU 0: NVIDIA A100-SXM4-40GB (UUID: GPU-1111)"
echo "  MIG 3g.20gb     Device  0: (UUID: MIG-aaaa)"
echo "GPU 1: NVIDIA A100-SXM4-40GB (UUID: GPU-2222)"
SMI
chmod +x "$tmp/smi/nvidia-smi"
got=$(env -u CUDA_VISIBLE_DEVICES PATH="$tmp/smi:$PATH" "$src/jobscripts/gpu_affinity.sh" printenv CUDA_VISIBLE_DEVICES)
[ "$got" = 1,0 ] || fail "gpu_affinity: nvidia-smi -L with 2 GPUs -> $got, expected 1,0"
# No GPU named anywhere: a warning, and the command still runs with the order untouched.
nosmi=$(mktemp -d "$tmp/nosmi.XXXX")
for t in bash env hostname; do ln -s "$(command -v $t)" "$nosmi/$t"; done
env -u CUDA_VISIBLE_DEVICES PATH="$nosmi" "$src/jobscripts/gpu_affinity.sh" env > "$tmp/nogpu.out" 2> "$tmp/nogpu.err" ||
  fail "gpu_affinity: did not run the command when no GPU is named ($(cat "$tmp/nogpu.err"))"
grep -q CUDA_VISIBLE_DEVICES "$tmp/nogpu.out" && fail "gpu_affinity: set CUDA_VISIBLE_DEVICES without any GPU named"
grep -q "neither CUDA_VISIBLE_DEVICES nor nvidia-smi -L names a GPU" "$tmp/nogpu.err" || fail "gpu_affinity: no warning without GPUs"
if KFORMER_GPU_ORDER=sideways "$src/jobscripts/gpu_affinity.sh" true 2>/dev/null; then
  fail "gpu_affinity: ran with KFORMER_GPU_ORDER=sideways"
fi

# --- gpu_check.sh stops with exit 2 and one line when it cannot start (no GPU, no bundle) ------
mkdir -p "$tmp/nogpu" "$tmp/onegpu"
printf '#!/bin/sh\nexit 0\n' > "$tmp/nogpu/nvidia-smi"
printf '#!/bin/sh\necho "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-1111)"\n' > "$tmp/onegpu/nvidia-smi"
chmod +x "$tmp/nogpu/nvidia-smi" "$tmp/onegpu/nvidia-smi"
check_cannot_start() {  # NAME PATH_DIR PATTERN (of the last line)
  local rc=0
  PATH="$2:$PATH" KFORMER_BUNDLE_DIR=$tmp/no-bundle "$src/scripts/gpu_check.sh" "$tmp/$1" > "$tmp/$1.out" 2>&1 || rc=$?
  [ $rc -eq 2 ] || fail "gpu_check ($1): exit $rc, expected 2: $(cat "$tmp/$1.out")"
  tail -n 1 "$tmp/$1.out" | grep -qF "$3" || fail "gpu_check ($1): output lacks '$3': $(cat "$tmp/$1.out")"
  grep -q '"ok": false' "$tmp/$1/gpu_check.json" || fail "gpu_check ($1): gpu_check.json does not say ok false"
}
check_cannot_start nogpu "$tmp/nogpu" "no GPU on $(hostname) (nvidia-smi -L lists none): run this on the GPU machine"
check_cannot_start nobundle "$tmp/onegpu" "no bundle at $tmp/no-bundle: build it on the build machine with scripts/gpu_bundle.sh"

[ "$fails" -eq 0 ] || { echo "dryrun_test: $fails failure(s)" >&2; exit 1; }
echo "dryrun_test: polaris, perlmutter, local, gpu_affinity and gpu_check OK"
