#!/usr/bin/env python3
"""Sittings of bench/study_vs_optuna.sh summed up: each side's mean and spread.

Issue 37 asks for the main job against Optuna + PyTorch in three sittings per
budget, criteria in its default mode (worker processes) with its default
sampler: its mean best validation macro-F1 and mean held-out macro-F1 at least
Optuna + PyTorch's. Each sitting is one `bench/study_vs_optuna.sh BUDGET
--only optuna,workers --seed S --out-dir DIR` (its own split, sampler and
training seeds, the same on both sides); this script reads their
`study_vs_optuna.json` files and writes a table of means, sample standard
deviations and ranges, the sittings paired by seed, and each target's verdict.

    python3 bench/study_vs_optuna_sittings.py DIR1 DIR2 DIR3 --out bench/results/study_vs_optuna_6min
"""

import argparse
import json
import os
import statistics


def side(run):
    """'optuna', 'workers' or 'in-process' for a run of study_vs_optuna.json."""
    if run["tool"].startswith("optuna"):
        return "optuna"
    return "workers" if "--jobs" in run["tool"] else "in-process"


def useful(run):
    states = run.get("states", {})
    return states.get("complete", 0) + states.get("pruned", 0)


def spread(values):
    mean = statistics.fmean(values)
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    return {"mean": mean, "sd": sd, "min": min(values), "max": max(values), "values": values}


def paired(ours, theirs):
    """The sittings paired by seed: each difference (ours - theirs), their
    mean and sample standard deviation, how many sittings each side led, and
    the exact two-sided sign-flip p-value of the mean difference (every one
    of the 2^n sign patterns of the differences, equally likely when the two
    sides are alike: the paired permutation test, exact for any n)."""
    diffs = [a - b for a, b in zip(ours, theirs)]
    n = len(diffs)
    stats = spread(diffs)
    observed = abs(sum(diffs))
    as_extreme = 0
    for signs in range(1 << n):
        total = sum(d if signs >> i & 1 else -d for i, d in enumerate(diffs))
        # A small tolerance so that the observed pattern always counts itself.
        as_extreme += abs(total) >= observed - 1e-12
    return {
        "differences": diffs,
        "mean": stats["mean"],
        "sd": stats["sd"],
        "ahead": sum(d > 0 for d in diffs),
        "behind": sum(d < 0 for d in diffs),
        "sign_flip_p": as_extreme / (1 << n),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dirs", nargs="+", help="one sitting's --out-dir each")
    ap.add_argument("--out", required=True, help="prefix of the .json and .md written")
    a = ap.parse_args()
    sittings = []
    for d in a.dirs:
        with open(os.path.join(d, "study_vs_optuna.json")) as f:
            sittings.append(json.load(f))
    budgets = {s["budget_s"] for s in sittings}
    if len(budgets) != 1:
        raise SystemExit(f"the sittings have different budgets: {sorted(budgets)}")
    metrics = {
        "trials": lambda r: r["trials"],
        "useful_trials_per_hour": lambda r: useful(r) * 3600.0 / r["wall_s"],
        "best_validation_macro_f1": lambda r: r["best_validation_macro_f1"],
        "held_out_macro_f1": lambda r: r["test_macro_f1"],
    }
    per_side = {}
    for name in ("optuna", "workers"):
        runs = []
        for s in sittings:
            found = [r for r in s["runs"] if side(r) == name]
            if len(found) != 1:
                raise SystemExit(f"sitting seed {s.get('seed')} has {len(found)} {name} runs")
            runs.append(found[0])
        per_side[name] = {m: spread([f(r) for r in runs]) for m, f in metrics.items()}
    targets = {}
    for m in ("best_validation_macro_f1", "held_out_macro_f1"):
        ours, theirs = per_side["workers"][m]["mean"], per_side["optuna"][m]["mean"]
        targets[m] = {
            "criteria": ours, "optuna": theirs, "met": ours >= theirs, "gap": ours - theirs,
            "paired": paired(per_side["workers"][m]["values"], per_side["optuna"][m]["values"]),
        }
    result = {
        "budget_s": budgets.pop(),
        "seeds": [s.get("seed", 42) for s in sittings],
        "machine": sittings[0]["machine"],
        "cores": sittings[0]["cores"],
        "load": [(s["load_before"], s["load_after"]) for s in sittings],
        "commands": [s["command"] for s in sittings],
        "sides": per_side,
        "targets": targets,
    }
    with open(a.out + ".json", "w") as f:
        json.dump(result, f, indent=2)
    # No heading: the book includes this file under its own.
    lines = [
        f"{len(sittings)} sittings of {result['budget_s']} s a side (seeds {', '.join(map(str, result['seeds']))}; each its own split, sampler "
        f"and training seeds, the same on both sides), run one after another on {result['machine']} "
        f"({result['cores']} cores): `bench/study_vs_optuna.sh {result['budget_s']} --only "
        f"optuna,workers --seed S --out-dir DIR`, then `python3 bench/study_vs_optuna_sittings.py "
        f"DIR...`. criteria runs in its default mode (`--jobs {result['cores']}` worker processes) "
        "with its default sampler. Mean, sample standard deviation, and the values by seed.",
        "",
        "| run | trials | useful trials/hour | best validation macro-F1 | held-out macro-F1 |",
        "| --- | --- | --- | --- | --- |",
    ]
    label = {"optuna": "optuna + pytorch", "workers": "hpo criteria (worker processes)"}
    for name in ("optuna", "workers"):
        cells = []
        for m, digits in (("trials", 1), ("useful_trials_per_hour", 1),
                          ("best_validation_macro_f1", 4), ("held_out_macro_f1", 4)):
            v = per_side[name][m]
            vals = " / ".join(f"{x:.{digits}f}" for x in v["values"])
            cells.append(f"{v['mean']:.{digits}f} ± {v['sd']:.{digits}f} ({vals})")
        lines.append(f"| {label[name]} | " + " | ".join(cells) + " |")
    lines += ["", "| target (issue 37) | criteria mean | Optuna mean | gap | verdict |", "| --- | --- | --- | --- | --- |"]
    for m, t in targets.items():
        lines.append(
            f"| {m.replace('_', ' ')} at least Optuna's | {t['criteria']:.4f} | {t['optuna']:.4f} | "
            f"{t['gap']:+.4f} | {'met' if t['met'] else 'missed'} |"
        )
    lines += ["", "Paired by seed (criteria minus Optuna; the sign-flip test is exact, two-sided):", "",
              "| metric | differences by seed | mean ± sd | criteria ahead / behind | sign-flip p |",
              "| --- | --- | --- | --- | --- |"]
    for m, t in targets.items():
        p = t["paired"]
        diffs = " / ".join(f"{d:+.4f}" for d in p["differences"])
        lines.append(
            f"| {m.replace('_', ' ')} | {diffs} | {p['mean']:+.4f} ± {p['sd']:.4f} | "
            f"{p['ahead']} / {p['behind']} | {p['sign_flip_p']:.3f} |"
        )
    lines += ["", "Load average before and after each sitting: "
              + "; ".join(f"{b} / {e}" for b, e in result["load"]) + "."]
    with open(a.out + ".md", "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
