"""Writes the Optuna-made fixture of the `hpo` CLI tests (tests/cli/data/).

    $(.ci/python-venv.sh) tests/cli/make_optuna_fixture.py

Runs an Optuna 5.0 study (random search, seed 0) on a function whose
parameter importances are known in order, stores it in SQLite, and records
Optuna's own `get_param_importances` with `PedAnovaImportanceEvaluator` next
to it. The Rust tests check that `hpo`'s PED-ANOVA ranks the parameters the
same way and gives close values. The study name and attributes carry
`<script>` so that the HTML report's escaping is tested on an Optuna file.
"""

import json
import math
import os
import sys

import optuna
from optuna.importance import PedAnovaImportanceEvaluator

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "data")
DB = os.path.join(DATA, "optuna_importance.db")
NAME = "importance <script>alert(1)</script>"


def objective(trial):
    # lr (log) matters most, then layers, then the optimizer choice; noise
    # does not enter the function at all.
    lr = trial.suggest_float("lr", 1e-5, 1e-1, log=True)
    layers = trial.suggest_int("layers", 1, 8)
    opt = trial.suggest_categorical("optimizer", ["adam", "sgd", "<b>rms</b>"])
    noise = trial.suggest_float("noise", 0.0, 1.0)
    trial.set_user_attr("note", "<img src=x onerror=alert(2)>")
    del noise
    return (
        4.0 * (math.log10(lr) + 3.0) ** 2
        + 0.5 * (layers - 3) ** 2
        + {"adam": 0.0, "sgd": 1.0, "<b>rms</b>": 2.0}[opt]
    )


def main():
    os.makedirs(DATA, exist_ok=True)
    if os.path.exists(DB):
        os.remove(DB)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(
        study_name=NAME,
        storage=f"sqlite:///{DB}",
        sampler=optuna.samplers.RandomSampler(seed=0),
    )
    study.set_user_attr("owner", "<script>alert(3)</script>")
    study.optimize(objective, n_trials=200)
    ped = optuna.importance.get_param_importances(
        study, evaluator=PedAnovaImportanceEvaluator()
    )
    out = {
        "optuna_version": optuna.__version__,
        "study": NAME,
        "ped_anova": ped,
    }
    with open(os.path.join(DATA, "optuna_importance.json"), "w") as f:
        json.dump(out, f, indent=2)
        f.write("\n")
    print(json.dumps(out, indent=2), file=sys.stderr)


if __name__ == "__main__":
    main()
