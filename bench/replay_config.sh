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
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/hpo-target}"
cargo build --release --example criteria >&2
CRITERIA="$CARGO_TARGET_DIR/release/examples/criteria"
PY="$(bench/torch-venv.sh)"
CHECKPOINT="${HPO_CACHE:-$HOME/.cache/hpo}/all-MiniLM-L6-v2-0.1.0"
if [ ! -f "$CHECKPOINT/model.safetensors" ]; then
    "$CRITERIA" --trials 0 --storage "sqlite:///$(mktemp -d)/fetch.db" >&2
fi
exec "$PY" bench/replay_config.py --criteria "$CRITERIA" --checkpoint "$CHECKPOINT" "$@"
