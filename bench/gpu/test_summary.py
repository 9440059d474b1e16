"""Tests of bench/gpu/summary.py on what a GPU check left, replayed on the CPU
(standard library only; CI runs it beside the check's dry run):

    python3 bench/gpu/test_summary.py
"""
import json, os, sqlite3, sys, tempfile, unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import summary  # noqa: E402

CATEGORICAL = json.dumps({"name": "CategoricalDistribution",
                          "attributes": {"choices": [16, 32, 64]}})


BACKBONE = json.dumps({"name": "CategoricalDistribution",
                       "attributes": {"choices": ["Light", "Heavy"]}})


def study_db(path, trials, user=None, backbone=None):
    """An Optuna-schema SQLite file with the tables summary.py reads;
    `trials` is a list of (number, state, system attrs, batch_size);
    `user` and `backbone` map a trial's number to its user attributes and
    its backbone."""
    con = sqlite3.connect(path)
    con.executescript("""
        CREATE TABLE trials (trial_id INTEGER PRIMARY KEY, number INTEGER, state TEXT,
                             datetime_start TEXT, datetime_complete TEXT);
        CREATE TABLE trial_values (trial_id INTEGER, value REAL);
        CREATE TABLE trial_system_attributes (trial_id INTEGER, key TEXT, value_json TEXT);
        CREATE TABLE trial_user_attributes (trial_id INTEGER, key TEXT, value_json TEXT);
        CREATE TABLE trial_params (trial_id INTEGER, param_name TEXT, param_value REAL,
                                   distribution_json TEXT);
    """)
    for number, state, system, batch in trials:
        tid = number + 1
        con.execute("INSERT INTO trials VALUES (?, ?, ?, ?, ?)",
                    (tid, number, state, f"2026-11-26 15:00:{number:02d}", None))
        if state == "COMPLETE":
            con.execute("INSERT INTO trial_values VALUES (?, ?)", (tid, 0.5))
        for k, v in system.items():
            con.execute("INSERT INTO trial_system_attributes VALUES (?, ?, ?)",
                        (tid, k, json.dumps(v)))
        con.execute("INSERT INTO trial_params VALUES (?, ?, ?, ?)",
                    (tid, "batch_size", [16, 32, 64].index(batch), CATEGORICAL))
        con.execute("INSERT INTO trial_params VALUES (?, ?, ?, ?)",
                    (tid, "grad_accum", 1, json.dumps({"name": "IntDistribution"})))
        for k, v in (user or {}).get(number, {}).items():
            con.execute("INSERT INTO trial_user_attributes VALUES (?, ?, ?)",
                        (tid, k, json.dumps(v)))
        if backbone and number in backbone:
            con.execute("INSERT INTO trial_params VALUES (?, ?, ?, ?)",
                        (tid, "backbone", ["Light", "Heavy"].index(backbone[number]), BACKBONE))
    con.commit()
    con.close()


def oom(micro, accum, retries=None, failed=None):
    attrs = {"hpo:failure": "oom", "hpo:micro_batch": micro, "hpo:accumulation": accum}
    if retries is not None:
        attrs.update({"oom_retries": retries, "failed_trial": failed})
    return attrs


class ForcedOom(unittest.TestCase):
    def test_another_trials_relaunches_are_not_the_enqueued_ones(self):
        # What the H100's call 3 left: the enqueued trial 0 (batch 64) and the
        # study's trial 1 (batch 16) both met the ballast; each completed
        # after relaunches of its own.
        with tempfile.TemporaryDirectory() as work:
            study_db(os.path.join(work, "oom.db"), [
                (0, "FAIL", oom(32, 2), 64),
                (1, "FAIL", oom(16, 1), 16),
                (2, "FAIL", oom(16, 4, 1, 0), 64),
                (3, "FAIL", oom(8, 8, 2, 0), 64),
                (4, "FAIL", oom(8, 2, 1, 1), 16),
                (5, "COMPLETE", {"hpo:micro_batch": 4, "hpo:accumulation": 16,
                                 "oom_retries": 3, "failed_trial": 0}, 64),
                (6, "COMPLETE", {"hpo:micro_batch": 4, "hpo:accumulation": 4,
                                 "oom_retries": 2, "failed_trial": 1}, 16),
            ])
            got = summary.oom_step(work)
        self.assertTrue(got["forced_oom_recovered"], got)
        self.assertEqual([c["number"] for c in got["lineage"]], [0, 2, 3, 5])
        self.assertEqual(got["effective_batch"], 64)
        self.assertTrue(got["study_went_on"])
        self.assertEqual(got["complete_with_meaningless_score"], [])

    def test_a_relaunch_at_another_effective_batch_is_not_a_recovery(self):
        with tempfile.TemporaryDirectory() as work:
            study_db(os.path.join(work, "oom.db"), [
                (0, "FAIL", oom(64, 1), 64),
                (1, "COMPLETE", {"hpo:micro_batch": 16, "hpo:accumulation": 2,
                                 "oom_retries": 1, "failed_trial": 0}, 64),
            ])
            got = summary.oom_step(work)
        self.assertFalse(got["forced_oom_recovered"], got)
        self.assertFalse(got["study_went_on"])


GIB = 1 << 30


class Peaks(unittest.TestCase):
    def run_peaks(self, system, with_prediction, in_use=None):
        user = {n: {"peak_device_bytes": m, "nvml_process_peak_bytes": m + GIB // 2}
                for n, m in ((0, 4 * GIB), (1, 3 * GIB), (2, 6 * GIB))}
        for n, b in (in_use or {}).items():
            user[n]["peak_in_use_bytes"] = b
        sys_attrs = []
        for n, (micro, estimate, predicted) in enumerate(system):
            attrs = {"hpo:micro_batch": micro, "hpo:estimate_bytes": estimate}
            if with_prediction:
                attrs["hpo:predicted_bytes"] = predicted
            sys_attrs.append((n, "COMPLETE", attrs, 16))
        with tempfile.TemporaryDirectory() as work:
            study_db(os.path.join(work, "jobs_2.db"), sys_attrs, user=user,
                     backbone={0: "Light", 1: "Light", 2: "Light"})
            return summary.peaks(work)

    def test_the_executors_recorded_prediction_is_the_figure(self):
        got = self.run_peaks([(16, 4 * GIB, 4.5 * GIB), (32, 3 * GIB, 2 * GIB),
                              (16, 6 * GIB, 6.5 * GIB)], with_prediction=True)
        self.assertEqual(got["prediction_source"], "executor")
        # No trial recorded its live allocations: no ratio, not zero.
        self.assertIsNone(got["in_use_over_reserved_median"])
        self.assertEqual(got["corrected_within_15pct_of_nvml"], (2, 3))
        self.assertAlmostEqual(got["trials"][1]["corrected_vs_nvml"], 2 / 3.5 - 1)

    def test_live_allocations_are_set_against_the_reserved_peak(self):
        got = self.run_peaks([(16, 4 * GIB, 4.5 * GIB), (32, 3 * GIB, 2 * GIB),
                              (16, 6 * GIB, 6.5 * GIB)], with_prediction=True,
                             in_use={0: 2 * GIB, 2: 3 * GIB})
        self.assertEqual([r["in_use"] for r in got["trials"]], [2 * GIB, None, 3 * GIB])
        self.assertAlmostEqual(got["in_use_over_reserved_median"], 0.5)

    def test_without_it_the_executors_rule_is_replayed(self):
        # Trial 0 (micro 16) measures 2x its estimate; trial 1 (micro 32, a
        # micro-batch not yet measured) is predicted with the family's 2x;
        # trial 2 (micro 16 again) with micro 16's own 2x, not trial 1's 3x.
        got = self.run_peaks([(16, 2 * GIB, None), (32, 1 * GIB, None),
                              (16, 3 * GIB, None)], with_prediction=False)
        self.assertEqual(got["prediction_source"], "replay")
        ctx = summary.CUDA_CONTEXT_BYTES
        predicted = [r["predicted"] for r in got["trials"]]
        self.assertEqual(predicted, [2 * GIB + ctx, 2 * GIB + ctx, 6 * GIB + ctx])


class Profile(unittest.TestCase):
    def test_kernel_lines_are_summed_by_kernel_and_kind(self):
        log = "\n".join([
            "| 1.5ms      | MatmulEntry | TensorArgs | CudaRuntime",
            "| 2.0ms      | ReduceKernel | TensorArgs | CudaRuntime",
            "| 500µs      | ReduceKernel | TensorArgs | CudaRuntime",
            "| 20µs       | KernelBinop | MulOp | CudaRuntime",
            "| Name | Duration | Num Computed | Ratio |",
            "| 30µs       | KernelScalarBinop | MulOp | CudaRuntime",
        ])
        with tempfile.TemporaryDirectory() as out:
            with open(os.path.join(out, "cubecl_profile.log"), "w") as f:
                f.write(log + "\n")
            got = summary.profile(out)
        self.assertEqual(got["launches"], 5)
        self.assertAlmostEqual(got["kernel_seconds"], 4.05e-3)
        self.assertEqual(got["top"][0]["name"], "ReduceKernel | TensorArgs | CudaRuntime")
        self.assertEqual(got["top"][0]["launches"], 2)
        kinds = {k: v["launches"] for k, v in got["classes"].items()}
        self.assertEqual(kinds, {"reduce": 2, "matmul": 1, "elementwise": 2})

    def test_no_log_is_no_profile(self):
        with tempfile.TemporaryDirectory() as out:
            self.assertEqual(summary.profile(out), {"ran": False})


class Kernels(unittest.TestCase):
    def test_trials_are_paired_by_number_across_the_two_runs(self):
        logs = {
            # criteria's own lines, as the fourth H200 check logged them.
            "table": ["trial   0 complete   macro-F1 0.2719   10.0s  backbone=\"Heavy\"  [run at 16 x 2]",
                      "trial   1 pruned     macro-F1 0.1573    8.0s  backbone=\"Light\"",
                      "trial   2 oom        macro-F1 -         3.0s  backbone=\"Light\"",
                      "trial   3 complete   macro-F1 0.2719    5.0s  backbone=\"Light\""],
            "cublas": ["\x1b[2m2026-11-27T21:11:51Z\x1b[0m INFO worker started trial=0",
                       "trial   1 pruned     macro-F1 0.1573   12.0s  backbone=\"Light\"",
                       "trial   0 complete   macro-F1 0.2719   11.0s  backbone=\"Heavy\"",
                       "trial   2 complete   macro-F1 0.2719    9.0s  backbone=\"Light\""],
        }
        with tempfile.TemporaryDirectory() as out:
            for m, lines in logs.items():
                with open(os.path.join(out, f"kernels_{m}.log"), "w") as f:
                    f.write("\n".join(lines) + "\n")
            got = summary.kernels_step(out)
        # Trial 2 ran out of memory with the table and trial 3 never ran
        # with cuBLAS: only 0 and 1 pair.
        self.assertEqual(got["paired"], 2)
        self.assertAlmostEqual(got["cublas_over_table_median"], (1.1 + 1.5) / 2)
        self.assertEqual(got["cublas_over_table_range"], [1.1, 1.5])
        self.assertEqual(got["table_seconds"], {0: 10.0, 1: 8.0, 3: 5.0})

    def test_no_logs_is_no_step(self):
        with tempfile.TemporaryDirectory() as out:
            self.assertEqual(summary.kernels_step(out), {})


class Variants(unittest.TestCase):
    def test_rows_say_whose_product_kernels_ran(self):
        # The table is the default ("plain"); cuBLAS and burn's kernel are named.
        self.assertEqual(summary.variant({"matmul": "table"}), "plain")
        self.assertEqual(summary.variant({"matmul": "cublas"}), "cublas")
        self.assertEqual(summary.variant({"matmul": "burn"}), "burn matmul")
        # Rows from before the table had no "matmul": burn's kernel, "plain" then.
        self.assertEqual(summary.variant({}), "plain")
        self.assertEqual(summary.variant({"autotune": True, "matmul": "table"}), "autotune")
        self.assertEqual(summary.variant({"fusion": True, "autotune": True}), "fused")

    def test_the_burn_step_is_read_beside_the_bench(self):
        row = {"preset": "base", "batch": 32, "len": 512, "precision": "f32"}
        with tempfile.TemporaryDirectory() as out:
            # The fourth H200 check ran cuBLAS in the bench step and the table
            # in a step of its own; later checks the other way round.
            for d, m, tps in (("bench", "cublas", 120000.0), ("table", "table", 48000.0), ("burn", "burn", 35000.0)):
                os.makedirs(os.path.join(out, d))
                with open(os.path.join(out, d, "gpu_training.json"), "w") as f:
                    json.dump({"card": "NVIDIA H200", "matmul_f32_relative_error": 3e-4,
                               "rows": [dict(row, matmul=m, tokens_per_s=tps)]}, f)
            with open(os.path.join(out, "torch_bench.json"), "w") as f:
                json.dump({"rows": [dict(row, mode="tf32", tokens_per_s=180000.0),
                                    dict(row, mode="fp32", tokens_per_s=72000.0)]}, f)
            got = summary.bench_ratios(out)["rows"]
        self.assertEqual([r["variant"] for r in got], ["cublas", "plain", "burn matmul"])
        self.assertEqual([r["matched_torch_mode"] for r in got], ["tf32"] * 3)
        self.assertAlmostEqual(got[0]["ratio_vs_torch_matched"], 120000 / 180000)
        self.assertAlmostEqual(got[1]["ratio_vs_torch_matched"], 48000 / 180000)
        self.assertAlmostEqual(got[2]["ratio_vs_torch_matched"], 35000 / 180000)


class Share(unittest.TestCase):
    def test_each_count_of_processes_is_summed_and_set_against_one(self):
        with tempfile.TemporaryDirectory() as out:
            for k, tps in ((1, [1000.0]), (2, [700.0, 650.0]), (4, [400.0, None, 380.0, 390.0])):
                for i, t in enumerate(tps, 1):
                    os.makedirs(os.path.join(out, "share", f"k{k}", str(i)))
                    if t is not None:
                        with open(os.path.join(out, "share", f"k{k}", str(i), "gpu_training.json"), "w") as f:
                            json.dump({"rows": [{"tokens_per_s": t}]}, f)
                with open(os.path.join(out, "share", f"k{k}", "seconds"), "w") as f:
                    f.write(f"{10 * k}\n")
            got = summary.share_step(out)
        self.assertEqual(list(got), [1, 2, 4])
        self.assertAlmostEqual(got[2]["over_one_process"], 1.35)
        self.assertEqual(got[2]["wall_seconds"], 20.0)
        # A process that left no figure leaves the sum unknown, not smaller.
        self.assertIsNone(got[4]["tokens_per_s"])
        self.assertIsNone(got[4]["over_one_process"])

    def test_no_step_is_no_rows(self):
        with tempfile.TemporaryDirectory() as out:
            self.assertEqual(summary.share_step(out), {})


class Pages(unittest.TestCase):
    def test_each_shape_is_set_budget_against_card(self):
        with tempfile.TemporaryDirectory() as out:
            runs = {"card": [("large", 16, 48, 900.0, 14 * GIB_, 5 * GIB_, 15 * GIB_),
                             ("large", 64, 48, 2000.0, 20 * GIB_, 9 * GIB_, 21 * GIB_)],
                    "budget": [("large", 16, 48, 990.0, 7 * GIB_, 5 * GIB_, 8 * GIB_)]}
            for way, rows in runs.items():
                os.makedirs(os.path.join(out, f"pages_{way}"))
                with open(os.path.join(out, f"pages_{way}", "gpu_training.json"), "w") as f:
                    json.dump({"rows": [{"preset": p, "batch": b, "len": n, "tokens_per_s": t,
                                         "peak_device_bytes": r, "peak_in_use_bytes": u,
                                         "nvml_process_peak_bytes": v} for p, b, n, t, r, u, v in rows]}, f)
            got = summary.pages_step(out)
        r = got["budget_over_card"]
        # Only shapes both ways ran are set against each other.
        self.assertEqual(list(r), ["large 16x48"])
        self.assertAlmostEqual(r["large 16x48"]["tokens_per_s"], 1.1)
        self.assertAlmostEqual(r["large 16x48"]["peak_device_bytes"], 0.5)
        self.assertAlmostEqual(r["large 16x48"]["nvml_process_peak_bytes"], 8 / 15)
        self.assertEqual(got["card"]["large 64x48"]["peak_in_use_bytes"], 9 * GIB_)

    def test_no_step_is_nothing(self):
        with tempfile.TemporaryDirectory() as out:
            self.assertEqual(summary.pages_step(out), {})


GIB_ = 1 << 30


class Timeline(unittest.TestCase):
    def test_spans_and_the_mean_number_running(self):
        with tempfile.TemporaryDirectory() as work:
            db = os.path.join(work, "jobs_auto.db")
            study_db(db, [(0, "COMPLETE", {"hpo:micro_batch": 16}, 16),
                          (1, "COMPLETE", {"hpo:micro_batch": 32}, 32),
                          (2, "WAITING", {}, 16)], backbone={0: "Heavy", 1: "Light"})
            con = sqlite3.connect(db)
            # Trial 0 runs 0-20 s, trial 1 10-20 s (microseconds as storage writes them).
            for tid, start, end in ((1, "2026-11-26 15:00:00", "2026-11-26 15:00:20.000000"),
                                    (2, "2026-11-26 15:00:10.500000", "2026-11-26 15:00:20"),
                                    (3, None, None)):
                con.execute("UPDATE trials SET datetime_start = ?, datetime_complete = ? WHERE trial_id = ?",
                            (start, end, tid))
            con.commit()
            con.close()
            got = summary.timeline(summary.trials(db))
        self.assertEqual([(t["number"], t["backbone"], t["micro_batch"], t["start_s"], t["end_s"])
                          for t in got["trials"]],
                         [(0, "Heavy", 16, 0.0, 20.0), (1, "Light", 32, 10.5, 20.0)])
        self.assertAlmostEqual(got["mean_running"], 29.5 / 20)


class Compile(unittest.TestCase):
    def test_trial_and_first_step_seconds_are_read_through_colour_codes(self):
        # As criteria's log has them: tracing's ANSI colours around each field.
        step = ("\x1b[2m2026-11-27T06:43:36Z\x1b[0m \x1b[34mDEBUG\x1b[0m optimizer step done "
                "\x1b[3mepoch\x1b[0m\x1b[2m=\x1b[0m1 \x1b[3mstep\x1b[0m\x1b[2m=\x1b[0m{s} "
                "\x1b[3mof\x1b[0m\x1b[2m=\x1b[0m9 \x1b[3mseconds\x1b[0m\x1b[2m=\x1b[0m{t}")
        log = "\n".join([step.format(s=0, t="31.566956868"), step.format(s=1, t="31.68"),
                         "time per trial: mean 91.3s, max 91.3s"])
        with tempfile.TemporaryDirectory() as out:
            with open(os.path.join(out, "compile_table_cold.log"), "w") as f:
                f.write(log + "\n")
            got = summary.compile_step(out)
        self.assertEqual(got, [{"matmul": "table", "kernel_cache": "cold",
                                "trial_seconds": 91.3, "first_step_seconds": 31.566956868}])


if __name__ == "__main__":
    unittest.main()
