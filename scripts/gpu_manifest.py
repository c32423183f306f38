#!/usr/bin/env python3
"""The manifest of a GPU run's raw outputs: written by scripts/gpu_session.sh on the GPU machine,
checked by scripts/gpu_keep.sh (and scripts/gpu_tables.py) before they are kept in docs/gpu-runs/.

    gpu_manifest.py write RUN_DIR --command CMD [--started ISO] [--exit NAME=RC ...]
    gpu_manifest.py check RUN_DIR      prints the run's folder name (DATE-GPU), or one line and exit 2

write: logs (*.log) over LOG_TAIL are cut to their tails, other files over MAX_FILE and binaries are
removed (listed under left_out), so that what stays is small text that can be committed; then
RUN_DIR/manifest.json: date, GPU (nvidia-smi.txt; a CPU run, scripts/cpu_run.sh: the CPU of its
lscpu.txt), the bundle's git hash (bundle/MANIFEST), the command, each file with its size and sha256. Standard library only: it runs under the GPU machine's
python3.
check: every listed file there with its size and sha256, none unlisted, each text and at most
MAX_FILE, the whole at most MAX_TOTAL, and a GPU (or a CPU) named.
"""
import argparse
import datetime
import hashlib
import json
import os
import re
import sys

MAX_FILE = 512 * 1024   # a file kept in git; a kernel-bench report of some 130 cases is about 100 KiB
LOG_TAIL = 128 * 1024   # a log's end says what failed; its start repeats the verdicts' JSON
MAX_TOTAL = 4 * 1024 * 1024
MANIFEST = "manifest.json"


class Problem(Exception):
    """What is wrong with a run folder, in one line (paths relative to it)."""


def is_text(data):
    if b"\0" in data:
        return False
    try:
        data.decode("utf-8")
        return True
    except UnicodeDecodeError:
        return False


def run_files(run):
    """Relative paths of everything under run but the manifest, sorted; links and other
    non-files too (check refuses them)."""
    out = []
    for d, dirs, files in os.walk(run):
        dirs.sort()
        for f in files + [x for x in dirs if os.path.islink(os.path.join(d, x))]:
            rel = os.path.relpath(os.path.join(d, f), run)
            if rel != MANIFEST:
                out.append(rel)
    return sorted(out)


def gpu_slug(name):
    """'NVIDIA H100 80GB HBM3' -> 'h100', 'NVIDIA A100-SXM4-80GB' -> 'a100'; else the name, slugged."""
    if not name:
        return "nogpu"
    m = re.search(r"\b([A-Z]{1,2}\d{2,4}[a-z]?)\b", name.replace("NVIDIA", ""))
    if m:
        return m.group(1).lower()
    return re.sub(r"[^a-z0-9]+", "-", name.lower().replace("nvidia", "")).strip("-") or "gpu"


def gpu_of(run):
    """(name, count, driver) from the first nvidia-smi.txt under run (`nvidia-smi -L` then `nvidia-smi`)."""
    for rel in run_files(run):
        if os.path.basename(rel) == "nvidia-smi.txt":
            text = open(os.path.join(run, rel), errors="replace").read()
            names = re.findall(r"^GPU \d+: (.+?)(?: \(UUID: [^)]*\))?\s*$", text, re.M)
            driver = re.search(r"Driver Version:\s*(\S+)", text)
            if names:
                return names[0], len(names), driver.group(1) if driver else None
    return None, 0, None


def cpu_of(run):
    """(name, slug) from lscpu.txt at the run's top (a CPU run: scripts/cpu_run.sh): 'Model name', and a
    slug of its vendor, family and widest vector ISA ('intel-xeon-amx', 'amd-epyc-avx512')."""
    try:
        text = open(os.path.join(run, "lscpu.txt"), errors="replace").read()
    except OSError:
        return None, None
    m = re.search(r"^Model name:\s*(.+?)\s*$", text, re.M)
    if not m:
        return None, None
    name = m.group(1)
    flags = set((re.search(r"^Flags:\s*(.*)$", text, re.M) or re.match("()", "")).group(1).split())
    isa = next((i for f, i in (("amx_bf16", "amx"), ("avx512_bf16", "avx512-bf16"), ("avx512f", "avx512"),
                                ("avx2", "avx2")) if f in flags), "sse")
    words = [w for w in re.sub(r"\(R\)|\(TM\)|CPU|Processor|\d+-Core", " ", name).lower().split() if w.isalpha()]
    return name, "-".join(words[:2] + [isa])


def bundle_of(run):
    """The bundle's MANIFEST lines (gpu_bundle.sh: 'key value') as a dict, if gpu_session.sh copied it."""
    out = {}
    try:
        for line in open(os.path.join(run, "bundle", "MANIFEST")):
            k, _, v = line.rstrip("\n").partition(" ")
            out[k] = v
    except OSError:
        pass
    return out


def write(run, command, started, exits):
    files, left_out = [], []
    for rel in run_files(run):
        path = os.path.join(run, rel)
        if os.path.islink(path) or not os.path.isfile(path):
            left_out.append({"path": rel, "why": "not a plain file"})
            if os.path.islink(path):
                os.remove(path)
            continue
        data = open(path, "rb").read()
        entry = {"path": rel}
        if not is_text(data):
            left_out.append({"path": rel, "size": len(data), "sha256": hashlib.sha256(data).hexdigest(), "why": "not text"})
            os.remove(path)
            continue
        if rel.endswith(".log") and len(data) > LOG_TAIL:
            tail = data[-LOG_TAIL:]
            tail = tail[tail.find(b"\n") + 1:]  # from a line's start: valid UTF-8 again
            entry["trimmed_from"] = {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
            data = f"[gpu_session: the last {len(tail)} of {len(data)} bytes]\n".encode() + tail
            with open(path, "wb") as f:
                f.write(data)
        if len(data) > MAX_FILE:
            left_out.append({"path": rel, "size": len(data), "sha256": hashlib.sha256(data).hexdigest(),
                             "why": f"over {MAX_FILE // 1024} KiB"})
            os.remove(path)
            continue
        entry.update(size=len(data), sha256=hashlib.sha256(data).hexdigest())
        files.append(entry)
    gpu, count, driver = gpu_of(run)
    cpu, cpu_slug = (None, None) if gpu else cpu_of(run)
    bundle = bundle_of(run)
    now = datetime.datetime.now(datetime.timezone.utc)
    manifest = {
        "date": (started or now.strftime("%Y-%m-%d"))[:10], "started": started, "finished": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "gpu": gpu, "gpu_count": count, "gpu_slug": gpu_slug(gpu) if gpu or not cpu else None, "driver": driver,
        **({"cpu": cpu, "cpu_slug": cpu_slug} if cpu else {}),
        "bundle_git": bundle.get("git"), "bundle_arch": bundle.get("arch"), "command": command,
        "exit": exits, "files": files, "left_out": left_out}
    with open(os.path.join(run, MANIFEST), "w") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")
    kib = sum(e["size"] for e in files) / 1024
    print(f"gpu_manifest: {len(files)} file(s), {kib:.0f} KiB, in {os.path.join(run, MANIFEST)}"
          + (f"; left out: {', '.join(e['path'] + ' (' + e['why'] + ')' for e in left_out)}" if left_out else ""))


def check(run):
    """The manifest of a run folder whose files match it (raises Problem otherwise)."""
    try:
        with open(os.path.join(run, MANIFEST)) as f:
            m = json.load(f)
    except (OSError, ValueError) as e:
        raise Problem(f"no readable {MANIFEST} ({e})")
    listed = {}
    for e in m.get("files", []):
        rel = e.get("path", "")
        if os.path.isabs(rel) or ".." in rel.split("/") or not rel:
            raise Problem(f"{MANIFEST} lists a path outside the run: '{rel}'")
        listed[rel] = e
    for rel in run_files(run):
        if rel not in listed:
            raise Problem(f"{rel}: not in {MANIFEST}")
    total = 0
    for rel, e in listed.items():
        path = os.path.join(run, rel)
        if os.path.islink(path) or not os.path.isfile(path):
            raise Problem(f"{rel}: listed in {MANIFEST} but {'a link' if os.path.islink(path) else 'missing'}")
        data = open(path, "rb").read()
        if len(data) > MAX_FILE:
            raise Problem(f"{rel}: {len(data)} bytes, over the {MAX_FILE // 1024} KiB a kept file may have")
        if not is_text(data):
            raise Problem(f"{rel}: not text (a binary is not kept)")
        if len(data) != e.get("size") or hashlib.sha256(data).hexdigest() != e.get("sha256"):
            raise Problem(f"{rel}: its size or sha256 differs from {MANIFEST}'s (changed after the run?)")
        total += len(data)
    if total > MAX_TOTAL:
        raise Problem(f"{total} bytes in all, over {MAX_TOTAL // 1024} KiB")
    if not m.get("gpu") and not m.get("cpu"):
        raise Problem(f"{MANIFEST} names no GPU (nvidia-smi found none) and no CPU (no lscpu.txt): nothing measured to keep")
    if not re.fullmatch(r"\d{4}-\d{2}-\d{2}", str(m.get("date"))) or not re.fullmatch(r"[a-z0-9.-]+", str(slug_of(m))):
        raise Problem(f"{MANIFEST}'s date '{m.get('date')}' or device slug '{slug_of(m)}' is malformed")
    return m


def slug_of(m):
    """The device part of a kept run's folder name: the GPU's slug, else the CPU's."""
    return m.get("gpu_slug") if m.get("gpu") else m.get("cpu_slug")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="verb", required=True)
    w = sub.add_parser("write")
    w.add_argument("run")
    w.add_argument("--command", required=True)
    w.add_argument("--started")
    w.add_argument("--exit", action="append", default=[], metavar="NAME=RC")
    c = sub.add_parser("check")
    c.add_argument("run")
    a = ap.parse_args()
    if a.verb == "write":
        write(a.run, a.command, a.started, {k: int(v) for k, _, v in (x.partition("=") for x in a.exit)})
        return 0
    try:
        m = check(a.run)
    except Problem as e:
        print(f"gpu_manifest: {a.run}: {e}", file=sys.stderr)
        return 2
    print(f"{m['date']}-{slug_of(m)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
