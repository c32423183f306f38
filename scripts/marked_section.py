"""A generated section of a doc, between a begin and an end marker line: written from what a script
generates, or (--check) compared with it. Used by scripts/gpu_tables.py and scripts/portability_table.py.
Standard library only."""
import difflib
import sys


def update(doc, begin, end, generate, check, tool, what, source):
    """Replaces the text between `begin`'s line and `end` in the file `doc` with generate()'s (called
    after the markers are found; its exceptions reach the caller). check: writes nothing, prints a diff
    and returns 1 when they differ. Returns 0 when up to date or written, 2 without one pair of markers."""
    with open(doc) as f:
        text = f.read()
    parts = text.split(begin + "\n")
    if len(parts) != 2 or begin in parts[1] or parts[1].count(end) != 1:
        print(f"{tool}: {doc} needs one '{begin}' line and, after it, one '{end}'", file=sys.stderr)
        return 2
    head, (old, tail) = parts[0], parts[1].split(end)
    new = generate()
    if old == new:
        print(f"{tool}: {doc} is up to date")
        return 0
    if check:
        sys.stdout.writelines(difflib.unified_diff(old.splitlines(True), new.splitlines(True),
                                                   f"{doc} (between the markers)", f"generated from {source}"))
        print(f"{tool}: {doc}'s {what} differ from the kept runs: run scripts/{tool}.py", file=sys.stderr)
        return 1
    with open(doc, "w") as f:
        f.write(head + begin + "\n" + new + end + tail)
    print(f"{tool}: wrote {doc}")
    return 0
