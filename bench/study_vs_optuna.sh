#!/usr/bin/env bash
# criteria against Optuna + PyTorch, each for the same minutes (issue 20):
# builds criteria, makes sure the checkpoint is cached and the PyTorch venv
# (bench/torch-venv.sh: torch, transformers, Optuna) exists, then runs
# bench/study_vs_optuna.py, which writes bench/results/study_vs_optuna.{json,md}.
#
#   bench/study_vs_optuna.sh            # 720 s (12 minutes) per run, three runs
#   bench/study_vs_optuna.sh 120        # a quick look
#
# Run it on a quiet machine: the three runs share it in turn, and anything
# else running steals from whichever runs at the time.
set -euo pipefail
cd "$(dirname "$0")/.."
BUDGET="${1:-720}"
. bench/criteria-env.sh
exec "$PY" bench/study_vs_optuna.py --criteria "$CRITERIA" --checkpoint "$CHECKPOINT" --budget "$BUDGET" "${@:2}"
