#!/usr/bin/env python3
"""Adds a GPU check's --jobs runs to hpo-core's replay fixture.

    python3 bench/gpu/replay_fixture.py LOGS NAME SOURCE [FIXTURE]

LOGS is a check's logs folder (logs.tar.xz unpacked: jobs_auto.log,
jobs_2.log and the two studies' databases), NAME the prefix of the runs'
names (`h200_nov27d_call1` gives `h200_nov27d_call1_jobs_auto` and
`..._jobs_2`), SOURCE what the runs' "source" says (the committed summary
they came from). FIXTURE defaults to hpo-core/tests/data/gpu_launches.json.

Each run is the order in which the coordinator launched trials ("worker
started ... trial=N") and saw them end ("trial N complete|pruned|failed"),
each launch with the trial's family (its backbone), micro-batch,
accumulation, the estimate it was admitted with (`hpo:estimate_bytes`) and
the prediction the executor recorded (`hpo:predicted_bytes`), each end with
the measured peak (`hpo:peak_bytes`); and the per-worker context the
executor charged (the first launch's prediction over its estimate). The test
`the_gpu_checks_recorded_predictions_replay_exactly` (hpo-core
tests/it/executor.rs) replays them through the Scheduler.
"""
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import summary  # noqa: E402

ANSI = re.compile(r"\x1b\[[0-9;]*m")
LAUNCH = re.compile(r"worker started .*?trial=(\d+)")
END = re.compile(r"^trial +(\d+) (complete|pruned|failed)")


def by_number(db):
    """number -> {family, micro, accumulation, estimate, predicted, measured},
    from the study's trials as summary.py reads them."""
    return {t["number"]: {
        "family": t["params"].get("backbone"),
        "micro": t["system"].get("hpo:micro_batch"),
        "accumulation": t["system"].get("hpo:accumulation"),
        "estimate": t["system"].get("hpo:estimate_bytes"),
        "predicted": t["system"].get("hpo:predicted_bytes"),
        "measured": t["system"].get("hpo:peak_bytes"),
    } for t in summary.trials(db)}


def events(log, by_number):
    out, launched = [], set()
    with open(log, encoding="utf-8", errors="replace") as f:
        for line in f:
            line = ANSI.sub("", line).rstrip("\n")
            m = LAUNCH.search(line)
            if m:
                n = int(m.group(1))
                t = by_number[n]
                missing = [k for k in ("family", "micro", "accumulation", "estimate", "predicted") if t[k] is None]
                if missing:
                    raise SystemExit(f"{log}: trial {n} launched without {missing}")
                out.append({"launch": n, "family": t["family"], "micro": t["micro"],
                            "accumulation": t["accumulation"], "estimate": t["estimate"],
                            "predicted": t["predicted"]})
                launched.add(n)
                continue
            m = END.match(line)
            if m and int(m.group(1)) in launched:
                n = int(m.group(1))
                if by_number[n]["measured"] is not None:
                    out.append({"end": n, "measured": by_number[n]["measured"]})
    return out


def main():
    if len(sys.argv) < 4:
        raise SystemExit(__doc__)
    logs, name, source = sys.argv[1:4]
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    fixture = sys.argv[4] if len(sys.argv) > 4 else os.path.join(root, "hpo-core/tests/data/gpu_launches.json")
    with open(fixture) as f:
        data = json.load(f)
    card = summary.card(logs)
    for jobs in ("auto", "2"):
        log, db = os.path.join(logs, f"jobs_{jobs}.log"), os.path.join(logs, f"jobs_{jobs}.db")
        if not (os.path.exists(log) and os.path.exists(db)):
            continue
        evs = events(log, by_number(db))
        first = next(e for e in evs if "launch" in e)
        # The first launch has nothing learned yet: its prediction is the
        # estimate plus the per-worker context the executor charged.
        run = {"card": card,
               "source": f"{source} (the jobs_{jobs} study's trials and its log's order of launches and ends)",
               "context": first["predicted"] - first["estimate"],
               "events": evs}
        data["runs"][f"{name}_jobs_{jobs}"] = run
        launches = sum("launch" in e for e in run["events"])
        print(f"{name}_jobs_{jobs}: {launches} launches, {len(run['events']) - launches} ends")
    with open(fixture, "w") as f:
        json.dump(data, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
