#!/usr/bin/env python3
"""criteria against Optuna + PyTorch: the same study, the same minutes (issue 20).

Runs, back to back on this machine, each for the same time budget:

1. `bench/optuna_study_torch.py`: Optuna's TPE and median pruning over the
   same search ranges, fine-tuning with PyTorch (the real alternative);
2. `criteria` with its CPU default, one trial at a time in its own process
   (`--jobs in-process`, op-level threads over all cores);
3. `criteria --jobs N` (N = the cores): N worker processes side by side,
   each with one core's share of the threads.

All three read the same splits (`criteria --write-splits`) and fine-tune the
same cached checkpoint. A run stops starting trials at the budget and
finishes the trials it has started, as Optuna's `timeout` does; the wall time
reported includes them. The held-out figure is the test-split macro-F1 of
the trial with the best validation macro-F1. Writes
`bench/results/study_vs_optuna.json` and `.md` (or to `--out-dir`).

Run it through `bench/study_vs_optuna.sh`, which builds `criteria` and finds
PyTorch's interpreter.
"""

import argparse
import json
import os
import platform
import re
import sqlite3
import subprocess
import sys
import tempfile
import time


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.machine()


def load_average():
    try:
        with open("/proc/loadavg") as f:
            return " ".join(f.read().split()[:3])
    except OSError:
        return "unknown"


def run(cmd, log_path, env=None):
    """Runs `cmd`, teeing its output to `log_path`; returns (wall seconds, output)."""
    start = time.perf_counter()
    with open(log_path, "w") as log:
        proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env
        )
        out = []
        for line in proc.stdout:
            out.append(line)
            log.write(line)
            log.flush()
            sys.stdout.write(line)
        code = proc.wait()
    wall = time.perf_counter() - start
    if code != 0:
        raise SystemExit(f"{cmd[0]} exited with {code}; its output is in {log_path}")
    return wall, "".join(out)


def criteria_summary(db, output, wall, budget, mode):
    """Reads the study criteria wrote (Optuna's schema) and its summary lines."""
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    states = {}
    for (state, count) in con.execute("SELECT state, COUNT(*) FROM trials GROUP BY state"):
        states[state.lower()] = count
    # Trials the executor sampled ahead but gave back at the timeout (failed
    # with that reason, a WAITING copy enqueued) never ran: not counted.
    given_back = con.execute(
        "SELECT COUNT(*) FROM trial_system_attributes WHERE key = 'fail_reason' "
        "AND value_json LIKE '\"sampled ahead but not started%'"
    ).fetchone()[0]
    if given_back:
        states["fail"] = states.get("fail", 0) - given_back
        states["not started"] = given_back
    states.pop("waiting", None)
    best = con.execute(
        "SELECT t.number, v.value FROM trials t JOIN trial_values v ON v.trial_id = t.trial_id "
        "WHERE t.state = 'COMPLETE' ORDER BY v.value DESC, t.number ASC LIMIT 1"
    ).fetchone()
    con.close()
    held_out = re.search(r"held-out test split .*?macro-F1 ([0-9.]+), accuracy ([0-9.]+)", output)
    per_trial = re.search(r"time per trial: mean ([0-9.]+)s", output)
    # The summary prints the best trial's parameters as `  name = value`.
    best_params = {}
    summary = output[output.find("best trial #"):] if "best trial #" in output else ""
    for m in re.finditer(r"^  (\w+) = (.+)$", summary, re.MULTILINE):
        value = m.group(2).strip()
        try:
            best_params[m.group(1)] = json.loads(value)
        except ValueError:
            best_params[m.group(1)] = value
    return {
        "tool": f"hpo criteria ({mode})",
        "timeout_s": budget,
        "wall_s": wall,
        "trials": sum(v for k, v in states.items() if k != "not started"),
        "states": states,
        "best_trial": best[0] if best else None,
        "best_validation_macro_f1": best[1] if best else None,
        "best_params": best_params,
        "test_macro_f1": float(held_out.group(1)) if held_out else None,
        "test_accuracy": float(held_out.group(2)) if held_out else None,
        "mean_trial_s": float(per_trial.group(1)) if per_trial else None,
    }


def fmt(v, digits=4):
    return "-" if v is None else f"{v:.{digits}f}"


def markdown(result):
    rows = [
        "| run | trials in budget | complete | pruned | failed | wall s | trials/hour | best validation macro-F1 | held-out macro-F1 | trials vs Optuna |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    base = result["runs"][0]["trials"]
    for r in result["runs"]:
        s = r["states"]
        rows.append(
            f"| {r['tool']} | {r['trials']} | {s.get('complete', 0)} | {s.get('pruned', 0)} | "
            f"{s.get('fail', 0)} | {r['wall_s']:.0f} | {3600 * r['trials'] / r['wall_s']:.1f} | "
            f"{fmt(r['best_validation_macro_f1'])} | {fmt(r['test_macro_f1'])} | "
            f"{r['trials'] / max(base, 1):.2f}x |"
        )
    rows.append("")
    rows.append(
        f"Budget {result['budget_s']} s per run, back to back on one machine ({result['machine']}, "
        f"{result['cores']} cores); {result['splits']}. Load average {result['load_before']} before, "
        f"{result['load_after']} after. Command: `{result['command']}`."
    )
    return "\n".join(rows) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--criteria", required=True, help="the built criteria binary")
    ap.add_argument("--checkpoint", required=True, help="the cached all-MiniLM-L6-v2 folder")
    ap.add_argument("--budget", type=int, default=720, help="seconds per run")
    ap.add_argument("--out-dir", default="bench/results")
    ap.add_argument("--only", default="optuna,in-process,workers")
    ap.add_argument(
        "--seed", type=int, default=42,
        help="the split, the samplers and the training seeds, the same on every side "
        "(one sitting per seed gives the spread)",
    )
    a = ap.parse_args()
    cores = os.cpu_count() or 1
    work = tempfile.mkdtemp(prefix="hpo-study-vs-optuna-")
    splits = os.path.join(work, "splits")
    run([a.criteria, "--write-splits", splits, "--seed", str(a.seed)], os.path.join(work, "splits.log"))
    here = os.path.dirname(os.path.abspath(__file__))
    load_before = load_average()
    runs = []
    for which in a.only.split(","):
        log = os.path.join(work, f"{which}.log")
        if which == "optuna":
            out = os.path.join(work, "optuna.json")
            cmd = [
                sys.executable, os.path.join(here, "optuna_study_torch.py"),
                "--splits", splits, "--checkpoint", a.checkpoint,
                "--timeout", str(a.budget), "--out", out, "--seed", str(a.seed),
            ]
            run(cmd, log)
            with open(out) as f:
                runs.append(json.load(f))
            continue
        jobs = "in-process" if which == "in-process" else str(cores)
        db = os.path.join(work, f"{which}.db")
        cmd = [
            a.criteria, "--pretrained", a.checkpoint, "--jobs", jobs,
            "--timeout", str(a.budget), "--trials", "100000",
            "--storage", f"sqlite:///{db}", "--seed", str(a.seed),
        ]
        wall, output = run(cmd, log)
        mode = "in-process, op-level threads" if which == "in-process" else f"--jobs {cores}, {cores} workers x 1 thread"
        runs.append(criteria_summary(db, output, wall, a.budget, mode))
    with open(os.path.join(splits, "train.tsv")) as f:
        n_train = sum(1 for _ in f) - 1
    result = {
        "budget_s": a.budget,
        "machine": cpu_model(),
        "cores": cores,
        "splits": f"{n_train} training tweets (criteria's --train-limit), seed {a.seed}",
        "seed": a.seed,
        "load_before": load_before,
        "load_after": load_average(),
        "command": f"bench/study_vs_optuna.sh {a.budget}" + (f" --seed {a.seed}" if a.seed != 42 else ""),
        "runs": runs,
        "logs": work,
    }
    os.makedirs(a.out_dir, exist_ok=True)
    # `--only` replaces those runs in an earlier result, keeping the others.
    previous = os.path.join(a.out_dir, "study_vs_optuna.json")
    if a.only != ap.get_default("only") and os.path.exists(previous):
        with open(previous) as f:
            old = json.load(f)
        fresh = {r["tool"] for r in runs}
        runs[:0] = [r for r in old["runs"] if r["tool"] not in fresh]
        order = ["optuna", "in-process", "--jobs"]
        runs.sort(key=lambda r: next((i for i, k in enumerate(order) if k in r["tool"]), 9))
        result["runs"] = runs
        result["earlier"] = {k: old.get(k) for k in ("load_before", "load_after", "logs")}
        result["command"] += f" --only {a.only}"
    with open(os.path.join(a.out_dir, "study_vs_optuna.json"), "w") as f:
        json.dump(result, f, indent=2)
    with open(os.path.join(a.out_dir, "study_vs_optuna.md"), "w") as f:
        f.write(markdown(result))
    print(markdown(result))


if __name__ == "__main__":
    main()
