#!/usr/bin/env bash
# Lists the node's GPUs nearest-first for kformer, then execs the command. kformer itself gives
# each rank its own GPU (device = node-local rank among the GPUs it sees, see the user guide,
# "GPUs"); this wrapper only changes the order in which the ranks meet the GPUs, so that local
# rank r lands on the GPU of its own NUMA domain:
#   mpiexec ... jobscripts/gpu_affinity.sh build/polaris/bin/kformer DECK key=value ...
#
# KFORMER_GPU_ORDER=reverse (default): CUDA_VISIBLE_DEVICES becomes the node's GPUs in reverse
# (4 GPUs: 3,2,1,0), because on Polaris and Perlmutter the last GPU is the one attached to the
# NUMA domain of cores 0..N, where the launcher's depth/cores binding puts local rank 0.
# KFORMER_GPU_ORDER=linear: the order is left as it is.
# The GPUs are those of CUDA_VISIBLE_DEVICES when the launcher set it (any count, ids or UUIDs),
# else the ones `nvidia-smi -L` lists. Every rank keeps seeing every GPU of the node, which CUDA
# IPC (NCCL over NVLink between the ranks of a node) needs.
set -euo pipefail

order=${KFORMER_GPU_ORDER:-reverse}
case "$order" in
  reverse|linear) ;;
  *) echo "gpu_affinity.sh: KFORMER_GPU_ORDER='$order' is not an order (valid: reverse, linear)" >&2; exit 2 ;;
esac

if [ "$order" = reverse ]; then
  gpus=()
  if [ -n "${CUDA_VISIBLE_DEVICES:-}" ]; then
    IFS=, read -ra gpus <<< "$CUDA_VISIBLE_DEVICES"
  elif command -v nvidia-smi >/dev/null 2>&1; then
    n=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)
    for ((i = 0; i < n; i++)); do gpus+=("$i"); done
  fi
  if [ ${#gpus[@]} -eq 0 ]; then
    # kformer still gives each rank its own GPU, in the CUDA runtime's order: say so and go on.
    echo "gpu_affinity.sh: on $(hostname) neither CUDA_VISIBLE_DEVICES nor nvidia-smi -L names a GPU: the GPUs keep their order" >&2
  else
    reversed=""
    for ((i = ${#gpus[@]} - 1; i >= 0; i--)); do reversed+="${reversed:+,}${gpus[i]}"; done
    export CUDA_VISIBLE_DEVICES=$reversed
  fi
fi
if [ "${KFORMER_GPU_AFFINITY_VERBOSE:-0}" = 1 ]; then
  echo "gpu_affinity: host $(hostname) order $order: CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-(unset)}" >&2
fi
exec "$@"
