#!/usr/bin/env python3
"""One configuration, trained by both trainers over the same seeds (issue 20).

The study comparison (`bench/study_vs_optuna.py`) judges a whole search: which
configurations each sampler happened to draw, and one trial's score on the
test split. This separates the trainers from the search: it trains one
configuration of `criteria`'s fine-tuning space N times with hpo-burn
(`criteria --enqueue JSON` N times, `--jobs in-process`: trials 0..N-1, seeds
42..42+N-1) and N times with PyTorch (`bench/optuna_study_torch.py --replay`,
the same seeds), on the splits `criteria --write-splits` writes, and reports
each run's validation and test macro-F1 (`criteria --score-every-trial`
scores every run on the test split, as the PyTorch replay does). Writes
`bench/results/replay_config.json` and `.md` (or to `--out-dir`).

Run it through `bench/replay_config.sh`, which builds `criteria` and finds
PyTorch's interpreter. The default configuration is the one Optuna's TPE
found best in every sitting of the study comparison (book: performance).
"""

import argparse
import json
import os
import re
import sqlite3
import statistics
import subprocess
import sys
import tempfile

OPTUNA_BEST = {
    "backbone": "Heavy",
    "lr": 0.00015019040418574965,
    "batch_size": 8,
    # max_len 48 in the space of the run that found it, before criteria's
    # lengths came from the data: its 90th percentile now.
    "length_pct": 90,
    "grad_accum": 1,
    "head_layers": 0,
    "dropout": 0.05330537738970882,
    "warmup": 0.042090092888516034,
    "weight_decay": 0.0021495517716368217,
}

TRIAL_LINE = re.compile(r"^trial\s+(\d+)\s+complete\s+macro-F1\s+([0-9.]+)\s+([0-9.]+)s")


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--criteria", required=True, help="the built criteria example")
    ap.add_argument("--checkpoint", required=True, help="the cached checkpoint folder")
    ap.add_argument("--params", default=json.dumps(OPTUNA_BEST), help="the configuration (JSON)")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--out-dir", default=os.path.join(here, "results"))
    a = ap.parse_args()
    params = json.loads(a.params)

    work = tempfile.mkdtemp(prefix="hpo-replay-")
    splits = os.path.join(work, "splits")
    subprocess.run([a.criteria, "--write-splits", splits], check=True, stdout=subprocess.DEVNULL)

    cmd = [a.criteria, "--jobs", "in-process", "--trials", str(a.runs), "--timeout", "100000"]
    cmd += ["--storage", f"sqlite:///{work}/replay.db", "--score-every-trial"]
    for _ in range(a.runs):
        cmd += ["--enqueue", json.dumps(params)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    with open(os.path.join(work, "criteria.log"), "w") as f:
        f.write(out)
    hpo = []
    for line in out.splitlines():
        m = TRIAL_LINE.match(line)
        if m:
            n = int(m.group(1))
            hpo.append({"number": n, "seed": 42 + n, "validation_macro_f1": float(m.group(2)),
                        "seconds": float(m.group(3))})
    if len(hpo) != a.runs:
        sys.exit(f"criteria completed {len(hpo)} of {a.runs} runs; its log: {work}/criteria.log")
    with sqlite3.connect(f"file:{work}/replay.db?mode=ro", uri=True) as db:
        test = dict(db.execute(
            "SELECT t.number, a.value_json FROM trials t JOIN trial_user_attributes a "
            "ON a.trial_id = t.trial_id WHERE a.key = 'test_macro_f1'"))
    for r in hpo:
        if r["number"] not in test:
            sys.exit(f"criteria stored no test score for trial {r['number']}; its database: {work}/replay.db")
        r["test_macro_f1"] = float(json.loads(test[r["number"]]))

    torch_out = os.path.join(work, "torch.json")
    subprocess.run(
        [sys.executable, os.path.join(here, "optuna_study_torch.py"), "--splits", splits,
         "--checkpoint", a.checkpoint, "--out", torch_out, "--replay", json.dumps(params),
         "--replay-runs", str(a.runs)],
        check=True,
    )
    with open(torch_out) as f:
        torch = json.load(f)["runs"]

    def stats(runs, key):
        v = [r[key] for r in runs]
        return {"mean": statistics.mean(v), "stdev": statistics.stdev(v) if len(v) > 1 else 0.0,
                "min": min(v), "max": max(v)}

    result = {
        "params": params,
        "command": "bench/replay_config.sh " + " ".join(sys.argv[1:]),
        "hpo_burn": {"runs": hpo, "validation": stats(hpo, "validation_macro_f1"),
                     "test": stats(hpo, "test_macro_f1")},
        "pytorch": {"runs": torch, "validation": stats(torch, "validation_macro_f1"),
                    "test": stats(torch, "test_macro_f1")},
        "logs": work,
    }
    os.makedirs(a.out_dir, exist_ok=True)
    with open(os.path.join(a.out_dir, "replay_config.json"), "w") as f:
        json.dump(result, f, indent=2)
    rows = ["| seed | hpo-burn validation macro-F1 | PyTorch validation macro-F1 "
            "| hpo-burn test macro-F1 | PyTorch test macro-F1 |",
            "| ---: | ---: | ---: | ---: | ---: |"]
    for h, t in zip(hpo, torch):
        rows.append(f"| {h['seed']} | {h['validation_macro_f1']:.3f} | {t['validation_macro_f1']:.3f} | "
                    f"{h['test_macro_f1']:.3f} | {t['test_macro_f1']:.3f} |")
    cells = [result[side][split] for split in ("validation", "test") for side in ("hpo_burn", "pytorch")]
    rows.append("| mean (sd) | " + " | ".join(f"{c['mean']:.3f} ({c['stdev']:.3f})" for c in cells) + " |")
    table = "\n".join(rows) + "\n\nConfiguration: `" + json.dumps(params) + "`.\n"
    with open(os.path.join(a.out_dir, "replay_config.md"), "w") as f:
        f.write(table)
    print(table)


if __name__ == "__main__":
    sys.exit(main())
