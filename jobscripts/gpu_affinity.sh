#!/usr/bin/env bash
# Binds one MPI rank to one GPU: exports CUDA_VISIBLE_DEVICES from the node-local rank, then
# execs the command. The launcher puts it in front of kformer (polaris.pbs, perlmutter.slurm):
#   mpiexec ... jobscripts/gpu_affinity.sh build/polaris/bin/kformer DECK key=value ...
# kformer uses device 0 of what it sees, so without this every rank of a node would share GPU 0.
#
# KFORMER_GPUS_PER_NODE (default 4) and KFORMER_GPU_ORDER (default reverse) tune the mapping.
# Reverse (local rank r -> GPU 3-r) because on Polaris and Perlmutter GPU 3 is the one attached
# to the NUMA domain of cores 0..N, where the launcher's depth/cores binding puts local rank 0.
set -euo pipefail

# PALS (Polaris mpiexec) sets PALS_LOCAL_RANKID and PMI_LOCAL_RANK, Slurm SLURM_LOCALID,
# Open MPI OMPI_COMM_WORLD_LOCAL_RANK: take the first one present.
local_rank=${PALS_LOCAL_RANKID:-${PMI_LOCAL_RANK:-${SLURM_LOCALID:-${OMPI_COMM_WORLD_LOCAL_RANK:-}}}}
if [ -z "$local_rank" ]; then
  echo "gpu_affinity.sh: no local rank in the environment (PALS_LOCAL_RANKID, PMI_LOCAL_RANK, SLURM_LOCALID, OMPI_COMM_WORLD_LOCAL_RANK): start it under mpiexec or srun" >&2
  exit 2
fi
gpus=${KFORMER_GPUS_PER_NODE:-4}
case "${KFORMER_GPU_ORDER:-reverse}" in
  reverse) gpu=$((gpus - 1 - local_rank % gpus)) ;;
  linear)  gpu=$((local_rank % gpus)) ;;
  *) echo "gpu_affinity.sh: KFORMER_GPU_ORDER='${KFORMER_GPU_ORDER}' (valid: reverse, linear)" >&2; exit 2 ;;
esac
export CUDA_VISIBLE_DEVICES=$gpu
[ "${KFORMER_GPU_AFFINITY_VERBOSE:-0}" = 1 ] && echo "gpu_affinity: host $(hostname) local rank $local_rank -> GPU $gpu" >&2
exec "$@"
