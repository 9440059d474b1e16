"""Tests of bench/study_vs_optuna_sittings.py on made-up sittings
(standard library only; CI runs it beside the GPU summary's tests):

    python3 bench/test_sittings.py
"""
import json, os, subprocess, sys, tempfile, unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import study_vs_optuna_sittings as sittings  # noqa: E402


def run_of(tool, val, test, trials=10, wall=720.0):
    return {"tool": tool, "trials": trials, "wall_s": wall,
            "states": {"complete": trials, "pruned": 0},
            "best_validation_macro_f1": val, "test_macro_f1": test}


def sitting(root, seed, ours, theirs, budget=720):
    """A sitting's folder: criteria's (val, test) and Optuna's."""
    d = os.path.join(root, f"seed{seed}")
    os.makedirs(d)
    with open(os.path.join(d, "study_vs_optuna.json"), "w") as f:
        json.dump({"budget_s": budget, "seed": seed, "machine": "test", "cores": 2,
                   "load_before": [0, 0, 0], "load_after": [1, 1, 1],
                   "command": f"bench/study_vs_optuna.sh {budget} --seed {seed}",
                   "runs": [run_of("optuna + pytorch", *theirs),
                            run_of("hpo criteria (--jobs 2, 2 workers x 1 thread)", *ours)]}, f)
    return d


class Paired(unittest.TestCase):
    def test_all_ahead_of_three_is_a_quarter(self):
        p = sittings.paired([0.91, 0.92, 0.93], [0.90, 0.90, 0.90])
        self.assertEqual((p["ahead"], p["behind"]), (3, 0))
        # Of the 8 sign patterns only all-plus and all-minus reach |0.06|.
        self.assertAlmostEqual(p["sign_flip_p"], 0.25)
        self.assertAlmostEqual(p["mean"], 0.02)

    def test_mixed_signs_give_a_large_p(self):
        p = sittings.paired([0.91, 0.89, 0.905, 0.895], [0.90, 0.90, 0.90, 0.90])
        self.assertEqual((p["ahead"], p["behind"]), (2, 2))
        self.assertEqual(p["sign_flip_p"], 1.0)

    def test_a_tie_counts_on_neither_side(self):
        p = sittings.paired([0.9, 0.95], [0.9, 0.9])
        self.assertEqual((p["ahead"], p["behind"]), (1, 0))
        self.assertAlmostEqual(p["sign_flip_p"], 1.0)


class Script(unittest.TestCase):
    def run_script(self, dirs, out):
        return subprocess.run([sys.executable, os.path.join(HERE, "study_vs_optuna_sittings.py"),
                               *dirs, "--out", out], capture_output=True, text=True)

    def test_means_verdicts_and_the_paired_table(self):
        with tempfile.TemporaryDirectory() as root:
            dirs = [sitting(root, 45, (0.93, 0.90), (0.91, 0.91)),
                    sitting(root, 46, (0.92, 0.92), (0.90, 0.90))]
            out = os.path.join(root, "sum")
            r = self.run_script(dirs, out)
            self.assertEqual(r.returncode, 0, r.stderr)
            with open(out + ".json") as f:
                result = json.load(f)
            self.assertEqual(result["seeds"], [45, 46])
            val, test = result["targets"]["best_validation_macro_f1"], result["targets"]["held_out_macro_f1"]
            self.assertTrue(val["met"])
            self.assertAlmostEqual(val["gap"], 0.02)
            self.assertTrue(test["met"])  # 0.91 against 0.905
            self.assertEqual((test["paired"]["ahead"], test["paired"]["behind"]), (1, 1))
            with open(out + ".md") as f:
                md = f.read()
            self.assertIn("| held out macro f1 | -0.0100 / +0.0200 |", md)

    def test_sittings_of_different_budgets_are_refused(self):
        with tempfile.TemporaryDirectory() as root:
            dirs = [sitting(root, 45, (0.9, 0.9), (0.9, 0.9), budget=360),
                    sitting(root, 46, (0.9, 0.9), (0.9, 0.9), budget=720)]
            r = self.run_script(dirs, os.path.join(root, "sum"))
            self.assertNotEqual(r.returncode, 0)
            self.assertIn("different budgets", r.stderr)
            self.assertFalse(os.path.exists(os.path.join(root, "sum.json")))


if __name__ == "__main__":
    unittest.main()
