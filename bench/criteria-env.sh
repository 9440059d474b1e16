# Sourced by the scripts that run criteria beside PyTorch
# (bench/study_vs_optuna.sh, bench/replay_config.sh): builds criteria,
# finds PyTorch's interpreter (bench/torch-venv.sh creates its venv) and
# makes sure the checkpoint is cached; sets CRITERIA, PY and CHECKPOINT.
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/hpo-target}"
cargo build --release --example criteria >&2
CRITERIA="$CARGO_TARGET_DIR/release/examples/criteria"
PY="$(bench/torch-venv.sh)"
CHECKPOINT="${HPO_CACHE:-$HOME/.cache/hpo}/all-MiniLM-L6-v2-0.1.0"
if [ ! -f "$CHECKPOINT/model.safetensors" ]; then
    # criteria fetches the checkpoint into the cache on first use.
    "$CRITERIA" --trials 0 --storage "sqlite:///$(mktemp -d)/fetch.db" >&2
fi
