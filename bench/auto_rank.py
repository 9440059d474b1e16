"""AutoSampler's rank target (issue 37), for each AutoSampler variant in a
sampler-suite run: the mean rank of the median best value over the problems
of a half, among {the variant, tpe, gp, cmaes} (1 = best; tied medians share
their average rank, as the suite's own table does), at each budget.

    python3 bench/auto_rank.py RUN.json [RUN2.json ...] [--md OUT.md] [--json OUT.json]

RUN.json is `bench/results/.../sampler_suite.json` written by
`cargo bench -p hpo-core --bench sampler_suite` with the samplers tpe, gp,
cmaes and one or more `auto` / `auto:{json}` variants; several files are
merged (same problems, different samplers). The target: the variant's mean
rank below each of tpe's, gp's and cmaes's at every budget.
"""

import argparse
import collections
import json
import statistics
import sys

BASE = ("tpe", "gp", "cmaes")


def worst(v):
    return float("inf") if v is None else v


def ranks(values):
    """Average ranks (1 = lowest) of `values`."""
    out = []
    for v in values:
        below = sum(1 for x in values if x < v)
        equal = sum(1 for x in values if x == v)
        out.append(below + (equal + 1) / 2)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("runs", nargs="+")
    ap.add_argument("--md", help="also write the tables here")
    ap.add_argument("--json", help="also write the rows here")
    a = ap.parse_args()
    # (half, problem, sampler, budget) -> values over seeds
    values = collections.defaultdict(list)
    budgets = set()
    for path in a.runs:
        with open(path) as f:
            doc = json.load(f)
        for r in doc["runs"]:
            for b, v in r["best"].items():
                values[(r["half"], r["problem"], r["sampler"], int(b))].append(worst(v))
                budgets.add(int(b))
    samplers = sorted({k[2] for k in values})
    autos = [s for s in samplers if s == "auto" or s.startswith("auto:")]
    missing = [s for s in BASE if s not in samplers]
    if missing or not autos:
        sys.exit(f"need tpe, gp, cmaes and an auto variant; missing {missing or 'auto'}")
    lines = []
    rows = []
    for half in ("tuning", "held_out"):
        problems = sorted({k[1] for k in values if k[0] == half})
        if not problems:
            continue
        lines.append(f"## {half} half ({len(problems)} problems)\n")
        lines.append("| auto variant | budget | auto | tpe | gp | cmaes | auto best? | margin to the best other |")
        lines.append("|---|---|---|---|---|---|---|---|")
        for auto in autos:
            for b in sorted(budgets):
                group = (auto,) + BASE
                sums = [0.0] * len(group)
                n = 0
                for p in problems:
                    meds = [statistics.median(values[(half, p, s, b)]) for s in group]
                    for i, r in enumerate(ranks(meds)):
                        sums[i] += r
                    n += 1
                mean = [x / n for x in sums]
                best_other = min(mean[1:])
                ok = "yes" if mean[0] < best_other else "no"
                rows.append({
                    "half": half, "variant": auto, "budget": b, "problems": n,
                    "mean_rank": dict(zip(("auto",) + BASE, mean)),
                    "met": mean[0] < best_other, "margin": mean[0] - best_other,
                })
                lines.append(
                    f"| `{auto}` | {b} | {mean[0]:.2f} | {mean[1]:.2f} | {mean[2]:.2f} | {mean[3]:.2f} | {ok} | {mean[0] - best_other:+.2f} |"
                )
        lines.append("")
    text = "\n".join(lines)
    print(text)
    if a.md:
        with open(a.md, "w") as f:
            f.write(text + "\n")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"runs": a.runs, "rows": rows}, f, indent=1)
            f.write("\n")


if __name__ == "__main__":
    main()
