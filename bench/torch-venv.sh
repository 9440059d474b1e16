#!/usr/bin/env bash
# Creates (once) the Python venv of the CPU training benchmark's PyTorch
# reference (bench/cpu_training_torch.py) and of the Optuna + PyTorch study
# (bench/optuna_study_torch.py), and prints its python path. It lives
# outside the repository, like CI's Optuna venv (.ci/python-venv.sh), and is
# never installed by CI: no test needs torch.
#
# PyPI's Linux torch wheel depends on the nvidia-* CUDA wheels: the first run
# downloads several GB even though the benchmark only uses the CPU.
#
#   bench/torch-venv.sh                 # create if missing, print the interpreter path
#   HPO_TORCH_VENV=/some/dir bench/torch-venv.sh
set -euo pipefail
TORCH_VERSION="2.15.0"
TRANSFORMERS_VERSION="5.23.0"
OPTUNA_VERSION="5.0.0"
VENV="${HPO_TORCH_VENV:-$HOME/.cache/hpo-torch-venv}"
check="import torch, transformers, optuna, sys; sys.exit(not (torch.__version__.split('+')[0] == '$TORCH_VERSION' and transformers.__version__ == '$TRANSFORMERS_VERSION' and optuna.__version__ == '$OPTUNA_VERSION'))"
if ! "$VENV/bin/python" -c "$check" 2>/dev/null; then
    python3 -m venv "$VENV" >&2
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check \
        "torch==$TORCH_VERSION" "transformers==$TRANSFORMERS_VERSION" "optuna==$OPTUNA_VERSION" >&2
fi
echo "$VENV/bin/python"
