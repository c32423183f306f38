#!/usr/bin/env python3
"""How long a causal attention pass's tiles take on a GPU in two league orders, list-scheduled.

A GPU starts a kernel's blocks in index order, each as soon as a slot (an SM's room for one more
block) frees. A causal pass's tile t of n does t + 1 tiles of work (forward, dQ; the dK/dV pass the
mirror). kformer's fused kernels order the league by kernels/attention/attention_common.hpp:
tile_of (each (batch, head)'s tiles in turn, longest first) on the host, gpu_tile_of (the tile
index slowest: every head's longest tile before any second-longest) on a device. This prints each
order's makespan over the ideal (the work over the slots), for the 124M step's shapes and others.

  /usr/bin/python3 bench/causal_tile_order.py [--slots N]
"""
import argparse
import heapq


def makespan(costs, slots):
    free = [0.0] * slots
    end = 0.0
    for c in costs:
        t = heapq.heappop(free) + c
        end = max(end, t)
        heapq.heappush(free, t)
    return end


def orders(ntiles, groups):
    league = ntiles * groups
    per_head = [ntiles - r % ntiles for r in range(league)]   # tile_of: work t + 1, t = ntiles-1-r%ntiles
    across = [ntiles - r // groups for r in range(league)]    # gpu_tile_of
    return per_head, across


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--slots", type=int, nargs="*", default=[924, 792, 528],
                    help="blocks in flight: SMs x blocks per SM (H100: 132 x 7 at 129 registers, 6 at 147, 4 at 249)")
    args = ap.parse_args()
    cases = [("GPT-2 124M, B 8, T 1024, 12 heads, 32-row tiles", 32, 96),
             ("B 4, T 2048, 12 heads", 64, 48),
             ("B 1, T 4096, 32 heads", 128, 32)]
    print("| case | slots | tile_of / ideal | gpu_tile_of / ideal |")
    print("|---|---|---|---|")
    for name, ntiles, groups in cases:
        per_head, across = orders(ntiles, groups)
        for slots in args.slots:
            ideal = sum(per_head) / slots
            print(f"| {name} | {slots} | {makespan(per_head, slots) / ideal:.3f} | {makespan(across, slots) / ideal:.3f} |")


if __name__ == "__main__":
    main()
