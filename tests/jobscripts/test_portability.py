#!/usr/bin/python3
"""scripts/portability.py: Pennycook's metric and the efficiencies, on hand-computed cases."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

SCRIPTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts")
sys.path.insert(0, SCRIPTS)
import portability  # noqa: E402


def report(path, summary, platform=None, **config):
    cfg = {"model": {"family": "gpt", "n_layers": 2}, "train": {"seq_len": 32}, "parallel": {"tp": 1}}
    for k, v in config.items():
        sec, key = k.split("__")
        cfg[sec][key] = v
    rep = {"config": cfg, "summary": summary}
    if platform:
        rep["platform"] = platform
    with open(path, "w") as f:
        json.dump(rep, f)
    return path


class Pennycook(unittest.TestCase):
    def test_harmonic_mean_by_hand(self):
        self.assertAlmostEqual(portability.pennycook([0.5, 0.25]), 2 / (2 + 4))            # 1/3
        self.assertAlmostEqual(portability.pennycook([0.6, 0.3, 0.2]), 3 / (5 / 3 + 10 / 3 + 5))  # 0.3
        self.assertAlmostEqual(portability.pennycook([0.5] * 4), 0.5)
        self.assertAlmostEqual(portability.pennycook([0.8]), 0.8)

    def test_zero_when_a_platform_has_no_result(self):
        self.assertEqual(portability.pennycook([0.5, None]), 0.0)
        self.assertEqual(portability.pennycook([0.5, 0.0]), 0.0)
        self.assertEqual(portability.pennycook([0.9, float("nan")]), 0.0)

    def test_empty_set_is_an_error(self):
        with self.assertRaises(ValueError):
            portability.pennycook([])

    def test_below_every_efficiency_but_the_lowest(self):
        effs = [0.9, 0.5, 0.1]
        self.assertLess(portability.pennycook(effs), sum(effs) / 3)  # harmonic <= arithmetic
        self.assertGreater(portability.pennycook(effs), min(effs))


class Efficiency(unittest.TestCase):
    def test_mfu_first(self):
        self.assertEqual(portability.efficiency({"mfu": 0.4, "model_tflops_per_rank": 1,
                                                 "gemm_ceiling_tflops": 10}), (0.4, "mfu"))

    def test_achieved_over_ceiling(self):
        e, how = portability.efficiency({"model_tflops_per_rank": 0.05, "gemm_ceiling_tflops": 0.2})
        self.assertAlmostEqual(e, 0.25)
        self.assertEqual(how, "tflops/ceiling")

    def test_no_ceiling(self):
        e, how = portability.efficiency({"model_tflops_per_rank": 0.05})
        self.assertIsNone(e)
        self.assertIn("gemm_ceiling_tflops", how)


class CommandLine(unittest.TestCase):
    def run_tool(self, *args):
        return subprocess.run([sys.executable, os.path.join(SCRIPTS, "portability.py"), *args],
                              capture_output=True, text=True)

    def test_two_platforms(self):
        with tempfile.TemporaryDirectory() as d:
            a = report(f"{d}/a.json", {"model_tflops_per_rank": 0.05, "gemm_ceiling_tflops": 0.1},
                       {"backend": "OpenMP", "device": "EPYC"})
            b = report(f"{d}/b.json", {"mfu": 0.25})
            r = self.run_tool(a, f"a100={b}", "--csv", f"{d}/t.csv")
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("OpenMP EPYC", r.stdout)
            self.assertIn("a100", r.stdout)
            self.assertIn("PP over 2 platforms: 0.3333", r.stdout)  # 2 / (1/0.5 + 1/0.25)
            with open(f"{d}/t.csv") as f:
                self.assertIn("PP,,0.333", f.read())

    def test_missing_report_gives_zero(self):
        with tempfile.TemporaryDirectory() as d:
            a = report(f"{d}/a.json", {"mfu": 0.5})
            r = self.run_tool(a, f"gone={d}/nothing.json")
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("PP over 2 platforms: 0.0000", r.stdout)
            self.assertIn("no result", r.stdout)

    def test_different_decks_refused(self):
        with tempfile.TemporaryDirectory() as d:
            a = report(f"{d}/a.json", {"mfu": 0.5})
            b = report(f"{d}/b.json", {"mfu": 0.5}, train__seq_len=64)
            r = self.run_tool(a, b)
            self.assertNotEqual(r.returncode, 0)
            self.assertIn("train.seq_len", r.stderr)
            self.assertEqual(self.run_tool(a, b, "--allow-mismatch").returncode, 0)

    def test_how_long_a_run_went_is_not_the_deck(self):
        # a CPU keeps 3 steps of the portability deck where a GPU session runs 10: the same step
        with tempfile.TemporaryDirectory() as d:
            a = report(f"{d}/a.json", {"mfu": 0.5}, train__steps=3)
            b = report(f"{d}/b.json", {"mfu": 0.5}, train__steps=10)
            c = report(f"{d}/c.json", {"mfu": 0.5}, train__steps=10, train__micro_batch=4)
            self.assertEqual(self.run_tool(a, b).returncode, 0)
            r = self.run_tool(a, c)
            self.assertNotEqual(r.returncode, 0)
            self.assertIn("train.micro_batch", r.stderr)


if __name__ == "__main__":
    unittest.main()
