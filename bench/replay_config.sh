#!/usr/bin/env bash
# One configuration trained by hpo-burn and by PyTorch over the same seeds
# (issue 20): builds criteria, makes sure the checkpoint is cached and the
# PyTorch venv exists, then runs bench/replay_config.py, which writes
# bench/results/replay_config.{json,md}.
#
#   bench/replay_config.sh                      # Optuna's best configuration, 5 seeds
#   bench/replay_config.sh --runs 3 --params '{"backbone": "Light", ...}'
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/criteria-env.sh
exec "$PY" bench/replay_config.py --criteria "$CRITERIA" --checkpoint "$CHECKPOINT" "$@"
