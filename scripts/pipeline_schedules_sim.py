#!/usr/bin/python3
"""DeepSpeed's pipeline TrainSchedule against Megatron-LM's 1F1B, step by step (docs/predict.md).

    scripts/pipeline_schedules_sim.py

Each stage runs its command list in order: forwards (1 unit), backwards (--backward units), and
sends and receives that block both sides until the pair meets, then take c units. DeepSpeed's list
is its TrainSchedule's (deepspeed/runtime/pipe/schedule.py: on even stages a forward on even steps
and a backward on odd ones, the other way on odd stages, a step's exchanges before its computation:
SendGrad then RecvActivation before a forward, RecvGrad then SendActivation before a backward);
Megatron-LM's is 1F1B's warm-up forwards, steady forward-backward pairs with one batched exchange
each way (send_forward_recv_backward, send_backward_recv_forward), and cool-down backwards. Prints
the makespan of each and their ratio for a few (stages, micro-batches, backward, c).
"""


def deepspeed(p, m, s):
    def valid(mb):
        return 0 <= mb < m

    def step_to(step):
        even = step % 2 == 0
        if even == (s % 2 == 0):  # a forward step of this stage
            return (step if even else step - 1) // 2 - s // 2, True
        if even:
            return step // 2 - p + (s + 1) // 2, False
        return (step - 1) // 2 - p + 1 + s // 2, False

    cmds, prev = [], -1
    for step in range(2 * (m + p - 1)):
        mb, forward = step_to(step)
        if forward:
            if valid(prev) and s > 0:
                cmds.append(("send", "g", s - 1))
            if valid(mb) and s > 0:
                cmds.append(("recv", "a", s - 1))
        else:
            if valid(mb) and s < p - 1:
                cmds.append(("recv", "g", s + 1))
            if valid(prev) and s < p - 1:
                cmds.append(("send", "a", s + 1))
        if valid(mb):
            cmds.append(("F",) if forward else ("B",))
        prev = mb
    return cmds


def one_f_one_b(p, m, s):
    warm = min(p - s - 1, m)
    cmds = []
    for _ in range(warm):
        if s > 0:
            cmds.append(("recv", "a", s - 1))
        cmds.append(("F",))
        if s < p - 1:
            cmds.append(("send", "a", s + 1))
    rest = m - warm
    if rest > 0 and s > 0:
        cmds.append(("recv", "a", s - 1))
    for i in range(rest):
        cmds.append(("F",))
        if s < p - 1:
            cmds.append(("both", s + 1))  # send the activation, receive the gradient: one exchange
        cmds.append(("B",))
        if i == rest - 1:
            if s > 0:
                cmds.append(("send", "g", s - 1))
        elif s > 0:
            cmds.append(("both", s - 1))
    for _ in range(warm):
        if s < p - 1:
            cmds.append(("recv", "g", s + 1))
        cmds.append(("B",))
        if s > 0:
            cmds.append(("send", "g", s - 1))
    return cmds


def makespan(schedule, p, m, backward, c):
    lists = [schedule(p, m, s) for s in range(p)]
    at, clock = [0] * p, [0.0] * p
    moved = True
    while moved:
        moved = False
        for s in range(p):
            while at[s] < len(lists[s]):
                cmd = lists[s][at[s]]
                if cmd[0] in ("F", "B"):
                    clock[s] += 1.0 if cmd[0] == "F" else backward
                    at[s] += 1
                    moved = True
                    continue
                peer = cmd[1] if cmd[0] == "both" else cmd[2]
                match = ("both", s) if cmd[0] == "both" else ("recv" if cmd[0] == "send" else "send", cmd[1], s)
                if at[peer] < len(lists[peer]) and lists[peer][at[peer]] == match:
                    clock[s] = clock[peer] = max(clock[s], clock[peer]) + c
                    at[s] += 1
                    at[peer] += 1
                    moved = True
                else:
                    break
    assert all(at[s] == len(lists[s]) for s in range(p)), "the schedules deadlocked"
    return max(clock)


if __name__ == "__main__":
    print("stages micro-batches backward c   deepspeed  1f1b     ratio")
    for p, m, b, c in [(2, 8, 2, 0), (4, 16, 3, 0), (12, 512, 3, 0), (35, 240, 3, 0), (72, 512, 3, 0),
                       (35, 240, 3, 0.01), (12, 512, 3, 0.02), (72, 512, 3, 0.05), (12, 512, 3, 0.1)]:
        ds, mg = makespan(deepspeed, p, m, b, c), makespan(one_f_one_b, p, m, b, c)
        print(f"{p:6d} {m:13d} {b:8.0f} {c:4.2f} {ds:10.1f} {mg:8.1f} {ds / mg:8.3f}")
