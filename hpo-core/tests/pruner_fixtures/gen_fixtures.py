#!/usr/bin/env python3
"""Record Optuna's pruning decisions on synthetic learning curves.

Writes `optuna_decisions.json` next to this file. `tests/pruner_fixtures.rs`
replays the same curves through hpo's pruners and requires identical
decisions, trial states and successive-halving rung records.

Usage (any Optuna 5.x; the fixture records the version used):

    python3 -m venv /tmp/optuna-venv
    /tmp/optuna-venv/bin/pip install optuna==5.0.0
    /tmp/optuna-venv/bin/python hpo-core/tests/pruner_fixtures/gen_fixtures.py

Protocol, identical on both sides: trials are started in groups of
`parallel` with `ask()`; the group advances in lock step, each running trial
reporting its next (step, value) and then calling `should_prune()`; a pruned
trial is told PRUNED at once, the others are told COMPLETE with their last
value when their curve ends. Pruner settings are written in hpo's
`PrunerConfig` JSON form and translated here.
"""

import json
import math
import os
import random
import warnings

import optuna
from optuna.trial import TrialState

warnings.filterwarnings("ignore")
optuna.logging.set_verbosity(optuna.logging.ERROR)

HERE = os.path.dirname(os.path.abspath(__file__))


def make_pruner(spec):
    kind = spec["kind"]
    if kind == "nop":
        return optuna.pruners.NopPruner()
    if kind == "median":
        return optuna.pruners.MedianPruner(
            n_startup_trials=spec.get("n_startup_trials", 5),
            n_warmup_steps=spec.get("n_warmup_steps", 0),
            interval_steps=spec.get("interval_steps", 1),
            n_min_trials=spec.get("n_min_trials", 1),
        )
    if kind == "percentile":
        return optuna.pruners.PercentilePruner(
            spec.get("percentile", 50.0),
            n_startup_trials=spec.get("n_startup_trials", 5),
            n_warmup_steps=spec.get("n_warmup_steps", 0),
            interval_steps=spec.get("interval_steps", 1),
            n_min_trials=spec.get("n_min_trials", 1),
        )
    if kind == "successive_halving":
        return optuna.pruners.SuccessiveHalvingPruner(
            min_resource=spec.get("min_resource", "auto"),
            reduction_factor=spec.get("reduction_factor", 4),
            min_early_stopping_rate=spec.get("min_early_stopping_rate", 0),
            bootstrap_count=spec.get("bootstrap_count", 0),
        )
    if kind == "hyperband":
        return optuna.pruners.HyperbandPruner(
            min_resource=spec.get("min_resource", 1),
            max_resource=spec.get("max_resource", "auto"),
            reduction_factor=spec.get("reduction_factor", 3),
            bootstrap_count=spec.get("bootstrap_count", 0),
        )
    if kind == "threshold":
        return optuna.pruners.ThresholdPruner(
            lower=spec.get("lower"),
            upper=spec.get("upper"),
            n_warmup_steps=spec.get("n_warmup_steps", 0),
            interval_steps=spec.get("interval_steps", 1),
        )
    if kind == "patient":
        wrapped = spec.get("wrapped")
        return optuna.pruners.PatientPruner(
            make_pruner(wrapped) if wrapped is not None else None,
            patience=spec["patience"],
            min_delta=spec.get("min_delta", 0.0),
        )
    raise ValueError(f"unknown pruner kind {kind}")


def curve(rng, n_steps, direction, *, stride=1, first=0, nan_rate=0.0, drop_rate=0.0):
    """A noisy saturating curve: loss falls from ~1 towards a per-trial floor."""
    floor = rng.uniform(0.05, 0.6)
    rate = rng.uniform(0.02, 0.4)
    noise = rng.uniform(0.0, 0.05)
    points = []
    for k in range(n_steps):
        step = first + k * stride
        if k > 0 and rng.random() < drop_rate:
            continue  # a missing step
        loss = floor + (1.0 - floor) * math.exp(-rate * k) + rng.gauss(0.0, noise)
        value = loss if direction == "minimize" else 1.0 - loss
        value = round(value, 4)
        if rng.random() < nan_rate:
            value = float("nan")
        points.append((step, value))
    return points


def run(scenario):
    study = optuna.create_study(
        study_name=scenario["study_name"],
        direction=scenario["direction"],
        pruner=make_pruner(scenario["pruner"]),
        sampler=optuna.samplers.RandomSampler(seed=0),
    )
    curves = scenario["curves"]
    parallel = scenario["parallel"]
    decisions = [[] for _ in curves]
    states = [None] * len(curves)
    rungs = [None] * len(curves)
    for start in range(0, len(curves), parallel):
        group = list(range(start, min(start + parallel, len(curves))))
        trials = {i: study.ask() for i in group}
        for i, t in trials.items():
            assert t.number == i
        active = list(group)
        k = 0
        while active:
            still = []
            for i in active:
                points = curves[i]
                if k >= len(points):
                    value = points[-1][1]
                    study.tell(trials[i], value)
                    continue
                step, value = points[k]
                trials[i].report(value, step)
                pruned = bool(trials[i].should_prune())
                decisions[i].append(pruned)
                if pruned:
                    study.tell(trials[i], state=TrialState.PRUNED)
                else:
                    still.append(i)
            active = still
            k += 1
    for ft in study.get_trials(deepcopy=False):
        states[ft.number] = ft.state.name
        rungs[ft.number] = {
            key: value for key, value in ft.system_attrs.items() if key.startswith("completed_rung_")
        }
    return decisions, states, rungs


def scenarios():
    out = []

    def add(name, pruner, direction, n_trials, n_steps, seed, parallel=1, **curve_kw):
        rng = random.Random(seed)
        curves = [curve(rng, n_steps, direction, **curve_kw) for _ in range(n_trials)]
        out.append(
            {
                "name": f"{name}-{direction}",
                "study_name": f"fixture-{name}-{direction}",
                "direction": direction,
                "pruner": pruner,
                "parallel": parallel,
                "curves": curves,
            }
        )

    seed = 0
    for direction in ("minimize", "maximize"):
        seed += 100
        add("nop", {"kind": "nop"}, direction, 6, 10, seed + 1)
        add("median-default", {"kind": "median"}, direction, 30, 20, seed + 2)
        add(
            "median-warmup-interval",
            {"kind": "median", "n_startup_trials": 3, "n_warmup_steps": 5, "interval_steps": 3},
            direction, 30, 25, seed + 3, drop_rate=0.3,
        )
        add("median-parallel-nan", {"kind": "median", "n_startup_trials": 2}, direction, 30, 15,
            seed + 4, parallel=3, nan_rate=0.05)
        add(
            "percentile-25-min-trials",
            {"kind": "percentile", "percentile": 25.0, "n_startup_trials": 2, "n_min_trials": 3},
            direction, 30, 20, seed + 5, drop_rate=0.2,
        )
        add(
            "percentile-75-interval",
            {"kind": "percentile", "percentile": 75.0, "n_startup_trials": 4, "interval_steps": 2,
             "n_warmup_steps": 1},
            direction, 25, 20, seed + 6, stride=2, first=1,
        )
        add("sha-auto", {"kind": "successive_halving"}, direction, 25, 230, seed + 7)
        add(
            "sha-rf2-rate1-bootstrap",
            {"kind": "successive_halving", "min_resource": 1, "reduction_factor": 2,
             "min_early_stopping_rate": 1, "bootstrap_count": 2},
            direction, 30, 20, seed + 8, parallel=2,
        )
        add(
            "sha-rf3-missing-nan",
            {"kind": "successive_halving", "min_resource": 2, "reduction_factor": 3},
            direction, 40, 30, seed + 9, parallel=3, drop_rate=0.4, nan_rate=0.03,
        )
        add("hyperband-auto", {"kind": "hyperband"}, direction, 40, 30, seed + 10, parallel=2)
        add(
            "hyperband-seed",
            {"kind": "hyperband", "min_resource": 3, "max_resource": 100, "reduction_factor": 3},
            direction, 60, 100, seed + 11, first=1,
        )
        add(
            "patient-hyperband-seed",
            {"kind": "patient", "patience": 4,
             "wrapped": {"kind": "hyperband", "min_resource": 3, "max_resource": 100,
                         "reduction_factor": 3}},
            direction, 80, 100, seed + 12, first=1, parallel=2,
        )
        add(
            "patient-hyperband-seed-sparse",
            {"kind": "patient", "patience": 4,
             "wrapped": {"kind": "hyperband", "min_resource": 3, "max_resource": 100,
                         "reduction_factor": 3}},
            direction, 40, 50, seed + 13, stride=2, drop_rate=0.2,
        )
        add("patient-alone", {"kind": "patient", "patience": 2, "min_delta": 0.01}, direction, 20,
            30, seed + 14, nan_rate=0.05)
        add(
            "patient-median",
            {"kind": "patient", "patience": 3, "wrapped": {"kind": "median", "n_startup_trials": 3}},
            direction, 30, 25, seed + 15,
        )
        lower, upper = (0.0, 0.9) if direction == "minimize" else (0.1, 1.0)
        add(
            "threshold",
            {"kind": "threshold", "lower": lower, "upper": upper, "n_warmup_steps": 2,
             "interval_steps": 2},
            direction, 20, 15, seed + 16, nan_rate=0.08, drop_rate=0.2,
        )
        add("threshold-upper-only", {"kind": "threshold", "upper": 0.5}, direction, 10, 10,
            seed + 17)
    return out


def encode_value(v):
    return None if isinstance(v, float) and math.isnan(v) else v


def main():
    result = {
        "generator": "hpo-core/tests/pruner_fixtures/gen_fixtures.py",
        "optuna_version": optuna.__version__,
        "scenarios": [],
    }
    for sc in scenarios():
        decisions, states, rungs = run(sc)
        sc = dict(sc)
        sc["curves"] = [[[s, encode_value(v)] for s, v in c] for c in sc["curves"]]
        sc["decisions"] = decisions
        sc["states"] = states
        sc["rungs"] = rungs
        n = sum(len(d) for d in decisions)
        p = sum(1 for s in states if s == "PRUNED")
        print(f"{sc['name']:40s} checks={n:5d} pruned={p}/{len(states)}")
        result["scenarios"].append(sc)
    with open(os.path.join(HERE, "optuna_decisions.json"), "w") as f:
        json.dump(result, f, separators=(",", ":"), allow_nan=False)
        f.write("\n")


if __name__ == "__main__":
    main()
