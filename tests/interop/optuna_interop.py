"""Optuna side of the hpo <-> Optuna interop test (hpo-core/tests/it/optuna_interop.rs).

    python optuna_interop.py dump   DB OUT.json      every study in DB as canonical JSON
    python optuna_interop.py write  DB               Optuna writes the reference studies
    python optuna_interop.py resume DB STUDY N       Optuna runs N more trials of STUDY

DB is a SQLite file path, or a `postgresql://user@host:port/db` URL (Optuna
then connects through psycopg, `postgresql+psycopg://`).

The canonical JSON is what the Rust side builds from its own reading of the file:
floats as Python `repr` strings (exact, and NaN/inf safe), params in their
external form, distributions as Optuna's distribution_json, datetimes as text.
"""

import json
import math
import sys
import warnings

import optuna
from optuna.distributions import distribution_to_json


def canon(v):
    if isinstance(v, bool) or v is None or isinstance(v, (int, str)):
        return v
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, (list, tuple)):
        return [canon(x) for x in v]
    if isinstance(v, dict):
        return {str(k): canon(x) for k, x in v.items()}
    raise TypeError(f"cannot canonicalise {v!r}")


def when(d):
    return None if d is None else d.strftime("%Y-%m-%d %H:%M:%S.%f")


def dump_study(study):
    trials = []
    for t in study.get_trials(deepcopy=False):
        trials.append(
            {
                "number": t.number,
                "state": t.state.name,
                "values": canon(t.values),
                "datetime_start": when(t.datetime_start),
                "datetime_complete": when(t.datetime_complete),
                "params": canon(t.params),
                "distributions": {k: distribution_to_json(d) for k, d in t.distributions.items()},
                "intermediate_values": {str(k): repr(v) for k, v in t.intermediate_values.items()},
                "user_attrs": t.user_attrs,
                "system_attrs": t.system_attrs,
            }
        )
    out = {
        "name": study.study_name,
        "directions": [d.name for d in study.directions],
        "user_attrs": study.user_attrs,
        # Optuna 5 no longer exposes study.system_attrs; read them from the storage.
        "system_attrs": study._storage.get_study_system_attrs(study._study_id),
        "trials": trials,
    }
    if len(study.directions) == 1 and any(t.state.name == "COMPLETE" for t in study.trials):
        best = study.best_trial
        out["best"] = {"number": best.number, "value": repr(best.value), "params": canon(study.best_params)}
    return out


def storage_url(db):
    for scheme in ("postgresql://", "postgres://"):
        if db.startswith(scheme):
            return "postgresql+psycopg://" + db[len(scheme):]
    return f"sqlite:///{db}"


def dump(db, out):
    url = storage_url(db)
    studies = []
    for summary in optuna.get_all_study_summaries(url, include_best_trial=False):
        study = optuna.load_study(study_name=summary.study_name, storage=url)
        studies.append(dump_study(study))
    with open(out, "w") as f:
        json.dump(studies, f, indent=1, sort_keys=True)


def objective(trial):
    x = trial.suggest_float("x", -10.0, 10.0)
    trial.suggest_float("x_step", 0.0, 1.0, step=0.25)
    trial.suggest_float("lr", 1e-5, 1e-1, log=True)
    n = trial.suggest_int("n_layers", 1, 8)
    trial.suggest_int("units", 16, 512, log=True)
    trial.suggest_int("k_step", 0, 10, step=2)
    trial.suggest_categorical("act", ["relu", "tanh", "gelu"])
    trial.suggest_categorical("mixed_choice", [None, True, 3, 1.5, "s"])
    trial.set_user_attr("note", f"trial {trial.number}")
    trial.set_user_attr("nested", {"a": [1, 2], "b": None})
    value = x * x + n
    for step in range(3):
        trial.report(value + 3 - step, step)
    if trial.number == 3:
        trial.report(math.inf, 3)
        trial.report(math.nan, 4)
    if trial.number == 4:
        raise optuna.TrialPruned()
    if trial.number == 5:
        raise ValueError("a failing trial")
    return value


def write(db):
    url = storage_url(db)
    study = optuna.create_study(
        study_name="optuna_single",
        storage=url,
        sampler=optuna.samplers.RandomSampler(seed=0),
    )
    study.set_user_attr("owner", "interop")
    study.set_user_attr("tags", ["ref", 1, 2.5, None])
    study.enqueue_trial({"x": 0.5, "lr": 0.001, "n_layers": 3, "act": "relu"})
    study.optimize(objective, n_trials=8, catch=(ValueError,))
    # Left WAITING for hpo to claim when it resumes the study.
    study.enqueue_trial({"x": -1.5, "n_layers": 2, "act": "gelu", "mixed_choice": None})

    multi = optuna.create_study(
        study_name="optuna_multi",
        storage=url,
        directions=["minimize", "maximize"],
        sampler=optuna.samplers.RandomSampler(seed=1),
    )
    multi.set_metric_names(["loss", "accuracy"])

    def two(trial):
        a = trial.suggest_float("a", 0.0, 1.0)
        b = trial.suggest_categorical("b", ["x", "y"])
        if trial.number == 1:
            return math.inf, -math.inf
        return a, 1.0 - a if b == "x" else 1.0 + a

    multi.optimize(two, n_trials=3)


def resume(db, name, n):
    study = optuna.load_study(study_name=name, storage=storage_url(db))
    before = len(study.trials)
    study.sampler = optuna.samplers.RandomSampler(seed=2)
    study.optimize(objective_resume, n_trials=n)
    numbers = [t.number for t in study.trials]
    assert numbers == list(range(before + n)), numbers
    assert all(t.state.name == "COMPLETE" for t in study.trials[before:]), study.trials[before:]


def objective_resume(trial):
    x = trial.suggest_float("x", -10.0, 10.0)
    n = trial.suggest_int("n_layers", 1, 8)
    trial.suggest_categorical("act", ["relu", "tanh", "gelu"])
    return x * x + n


def main(argv):
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
    cmd = argv[1]
    if cmd == "dump":
        dump(argv[2], argv[3])
    elif cmd == "write":
        write(argv[2])
    elif cmd == "resume":
        resume(argv[2], argv[3], int(argv[4]))
    else:
        raise SystemExit(f"unknown command {cmd!r}; see the module docstring")


if __name__ == "__main__":
    main(sys.argv)
