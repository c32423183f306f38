#!/usr/bin/python3
"""scripts/sweep.py grid expansion and scripts/collect.py / plot_study.py on reports with and
without the optional fields, no kformer run needed."""
import contextlib
import io
import json
import os
import sys
import tempfile
import unittest

SCRIPTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts")
sys.path.insert(0, SCRIPTS)
import collect  # noqa: E402
import sweep  # noqa: E402


class Expand(unittest.TestCase):
    def test_product_and_layouts(self):
        spec = {"deck": "input/tiny.yaml", "set": {"train.steps": 2},
                "vary": {"layout": ["1x1x4", "2x1", "3x1x1", "1x3"], "parallel.schedule": ["gpipe", "1f1b"]}}
        pts = sweep.expand(spec, 4)
        self.assertEqual(len(pts), 8)
        runnable = [p for p in pts if not p["skip"]]
        self.assertEqual(len(runnable), 4)
        self.assertIn(["parallel.dp", "2"], runnable[2]["overrides"])  # 2x1: dp derived = 4 / 2
        self.assertIn("needs 3 ranks", pts[4]["skip"])
        self.assertIn("does not divide 4 ranks", pts[6]["skip"])

    def test_grids_bundles_and_extra_set(self):
        spec = {"deck": "d.yaml", "set": {"a": 1},
                "grids": [{"name": "net", "vary": {"network": [{"name": "slow", "comm.emulate.latency_us": 5}]}},
                          {"name": "s", "set": {"straggler.rank": 1}, "vary": {"straggler.slowdown": [1.5, True]}}]}
        pts = sweep.expand(spec, 2, [("comm.backend", "nccl")])
        self.assertEqual([p["grid"] for p in pts], ["net", "s", "s"])
        self.assertEqual(pts[0]["varied"], {"network": "slow"})
        self.assertEqual(pts[0]["overrides"], [["a", "1"], ["comm.emulate.latency_us", "5"], ["comm.backend", "nccl"]])
        self.assertEqual(pts[2]["overrides"][-2], ["straggler.slowdown", "true"])

    def test_bad_specs_name_the_cause(self):
        for spec, words in (({"vary": {"x": [1]}}, "names no 'deck'"),
                            ({"deck": "d", "vary": {"x": 1}}, "non-empty list"),
                            ({"deck": "d", "vary": {"layout": ["2y2"]}}, "TPxPPxDP"),
                            ({"deck": "d", "vray": {}}, "unknown key 'vray'")):
            with self.assertRaises(SystemExit) as e:
                sweep.expand(spec, 4)
            self.assertIn(words, str(e.exception.code))


def write_json(path, obj):
    with open(path, "w") as f:
        json.dump(obj, f)


class Collect(unittest.TestCase):
    def test_missing_fields_are_empty_and_plots_skip(self):
        with tempfile.TemporaryDirectory() as d:
            full = {"config": {"train": {"global_batch": 8, "micro_batch": 2}, "parallel": {"microbatches": 0}},
                    "mesh": {"world": 4, "tp": 2, "pp": 1, "dp": 2},
                    "summary": {"step_ms_median": 10.0, "model_tflops_per_rank": 0.1, "new_field": 3,
                                "time_split_ms": {"forward": 1, "backward": 2, "optimizer": 1,
                                                  "comm_exposed": 1, "comm_total": 3}}}
            write_json(f"{d}/p000.json", full)
            write_json(f"{d}/points.json", {"points": [
                {"id": "p000", "grid": "g", "status": "ok", "varied": {"layout": "2x1"}, "json": "p000.json"},
                {"id": "p001", "grid": "g", "status": "failed", "rc": 2, "varied": {"layout": "4x1"}},
                {"id": "p002", "grid": "g", "status": "skipped", "varied": {"layout": "3x1"}}]})
            rows, cols, axes = collect.collect([d])
            self.assertEqual(axes, ["layout"])
            self.assertEqual([r["status"] for r in rows], ["ok", "failed", "skipped"])
            self.assertEqual(rows[0]["mesh.layout"], "2x1x2")
            self.assertEqual(rows[0]["microbatches"], 2)  # 8 / (2 * dp 2)
            for c in ("summary.mfu", "summary.pipeline.bubble_measured", "summary.new_field", "varied"):
                self.assertIn(c, cols)
            self.assertNotIn("summary.mfu", rows[0])  # an empty cell in the CSV
            try:
                import plot_study
            except ImportError:
                self.skipTest("matplotlib is not installed for this interpreter")
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                plot_study.plot_all([{k: str(v) for k, v in r.items()} for r in rows], axes, f"{d}/plots")
            self.assertIn("skip bubble.png", out.getvalue())
            self.assertIn("skip straggler.png", out.getvalue())
            self.assertTrue(os.path.exists(f"{d}/plots/layout.png"))
            self.assertTrue(os.path.exists(f"{d}/plots/comm.png"))


class Plots(unittest.TestCase):
    def test_bubble_and_network_from_pipeline_rows(self):
        try:
            import plot_study
        except ImportError:
            self.skipTest("matplotlib is not installed for this interpreter")
        rows = []
        for net in ("native", "1ms-5Gbps"):
            for sched in ("gpipe", "1f1b"):
                for m in (1, 2, 4, 8):
                    rows.append({"status": "ok", "point": f"p{len(rows):03d}", "mesh.layout": "1x4x2",
                                 "mesh.pp": "4", "parallel.schedule": sched, "microbatches": str(m),
                                 "network": net, "varied": f"network={net} schedule={sched}",
                                 "summary.step_ms_median": str(10 + m), "summary.pipeline.bubble_analytic":
                                 str(3 / (m + 3)), "summary.pipeline.bubble_measured": str(3.3 / (m + 3))})
        with tempfile.TemporaryDirectory() as d:
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                plot_study.plot_bubble(rows, ["network", "schedule"], d)
                plot_study.plot_network(rows, ["network", "schedule"], d)
            self.assertTrue(os.path.exists(f"{d}/bubble.png"), out.getvalue())
            self.assertTrue(os.path.exists(f"{d}/network.png"), out.getvalue())


if __name__ == "__main__":
    unittest.main()
