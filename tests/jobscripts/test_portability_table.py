#!/usr/bin/python3
"""scripts/portability_table.py: the user guide's table from kept runs (docs/cpu-runs, docs/gpu-runs),
on a synthetic tree: one row a kept run, PP over them, the refusals (a tampered file, two decks)."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

SCRIPTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts")
LSCPU = "Model name:            AMD EPYC 9B45 128-Core Processor\nFlags:                 fpu avx2 avx512f avx512_bf16\n"
NVSMI = "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-x)\nDriver Version: 580.1\n"


def kept_run(folder, device_file, device_text, reports, eager_over_kformer):
    """A run folder as cpu_run.sh or gpu_keep.sh leaves it: reports, bench JSONs, its manifest."""
    os.makedirs(folder)
    with open(os.path.join(folder, device_file), "w") as f:
        f.write(device_text)
    perf = os.path.join(folder, "perf") if device_file == "nvidia-smi.txt" else folder
    os.makedirs(perf, exist_ok=True)
    for precision, (mfu, micro_batch) in reports.items():
        rep = {"config": {"model": {"n_layers": 12}, "train": {"micro_batch": micro_batch, "steps": 3},
                          "parallel": {"tp": 1}},
               "summary": {"mfu": mfu, "model_tflops_per_rank": 100 * mfu, "gemm_ceiling_tflops": 100.0,
                           "step_ms_median": 50.0},
               "platform": {"backend": "Cuda" if perf != folder else "OpenMP", "host_cpu": device_file}}
        with open(os.path.join(perf, f"step_{precision}_kformer.json"), "w") as f:
            json.dump(rep, f)
        with open(os.path.join(perf, f"step_{precision}.json"), "w") as f:
            json.dump({"eager": {"torch_over_kformer": eager_over_kformer}}, f)
    subprocess.run([sys.executable, os.path.join(SCRIPTS, "gpu_manifest.py"), "write", folder, "--command", "test"],
                   check=True, capture_output=True)


class Table(unittest.TestCase):
    def setUp(self):
        self.top = tempfile.mkdtemp()
        os.makedirs(os.path.join(self.top, "docs"))
        self.doc = os.path.join(self.top, "guide.md")
        with open(self.doc, "w") as f:
            f.write("before\n<!-- portability:begin -->\nold\n<!-- portability:end -->\nafter\n")
        kept_run(os.path.join(self.top, "docs", "cpu-runs", "2026-12-01-amd-epyc-avx512-bf16"), "lscpu.txt", LSCPU,
                 {"fp32": (0.5, 8), "bf16": (0.25, 8)}, 2.0)
        kept_run(os.path.join(self.top, "docs", "gpu-runs", "2026-12-02-h100"), "nvidia-smi.txt", NVSMI,
                 {"fp32": (0.25, 8)}, 0.5)

    def tearDown(self):
        shutil.rmtree(self.top)

    def tool(self, *args):
        return subprocess.run([sys.executable, os.path.join(SCRIPTS, "portability_table.py"), "--top", self.top,
                               "--doc", self.doc, *args], capture_output=True, text=True)

    def test_one_row_a_kept_run_and_pp_over_them(self):
        self.assertEqual(self.tool("--check").returncode, 1)  # "old" is not what the runs give
        r = self.tool()
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(self.doc) as f:
            text = f.read()
        self.assertTrue(text.startswith("before\n") and text.endswith("after\n"))
        fp32, bf16 = text.split("**bf16**")
        self.assertIn("| 2026-12-01-amd-epyc-avx512-bf16 | OpenMP lscpu.txt | 0.500 |", fp32)
        # a GPU run's platform is the GPU its manifest names, not the host CPU of kformer's report
        self.assertIn("| 2026-12-02-h100 | Cuda NVIDIA H100 80GB HBM3 | 0.250 |", fp32)
        self.assertIn("PP over 2 platform(s): 0.333", fp32)  # 2 / (1/0.5 + 1/0.25)
        self.assertIn("| 2.00 |", fp32)
        self.assertIn("PP over 1 platform(s): 0.250", bf16)
        self.assertNotIn("h100", bf16)
        self.assertEqual(self.tool("--check").returncode, 0)

    def test_a_tampered_file_is_refused(self):
        path = os.path.join(self.top, "docs", "gpu-runs", "2026-12-02-h100", "perf", "step_fp32_kformer.json")
        with open(path) as f:
            rep = json.load(f)
        rep["summary"]["mfu"] = 0.9
        with open(path, "w") as f:
            json.dump(rep, f)
        r = self.tool()
        self.assertEqual(r.returncode, 2)
        self.assertIn("2026-12-02-h100", r.stderr)
        self.assertIn("sha256", r.stderr)

    def test_two_decks_in_one_precision_are_refused(self):
        kept_run(os.path.join(self.top, "docs", "cpu-runs", "2026-12-03-intel-xeon-amx"), "lscpu.txt",
                 LSCPU.replace("AMD EPYC 9B45 128-Core", "Intel(R) Xeon(R)"), {"fp32": (0.4, 4)}, 1.0)
        r = self.tool()
        self.assertEqual(r.returncode, 2)
        self.assertIn("train.micro_batch", r.stderr)


if __name__ == "__main__":
    unittest.main()
