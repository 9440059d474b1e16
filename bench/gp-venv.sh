#!/usr/bin/env bash
# Creates (once) the Python venv of the Gaussian-process reference (Optuna 5.0's
# GPSampler) and prints its python path. Used by:
#   bench/gp_fixture.py          -> hpo-core/tests/data/gp_optuna_fit.json
#   bench/optuna_gp_overhead.py  (Optuna's cost per trial, spawned by the Rust bench)
#   bench/optuna_suite.py --samplers gp  (sample-efficiency reference)
# It lives outside the repository, like CI's Optuna venv (.ci/python-venv.sh) and
# the torch venv (bench/torch-venv.sh), and is never installed by CI: no CI test
# needs it (the fixture it makes is committed as JSON).
#
# Downloads from PyPI: optuna, scipy and torch (Optuna's GPSampler needs both),
# greenlet (Optuna's optional extra: without it GPSampler warns and runs the
# L-BFGS-B searches of the acquisition function one after another instead of
# batched, which is slower), plus coco-experiment (BBOB functions) and cmaes,
# which bench/optuna_suite.py imports. download.pytorch.org's CPU-only index
# was not reachable when this was written, so torch comes from PyPI, whose
# Linux wheel depends on the nvidia-* CUDA wheels: the first run downloads
# several GB (5.6 GB installed) even though only the CPU is used.
#
#   bench/gp-venv.sh                    # create if missing, print the interpreter path
#   HPO_GP_VENV=/some/dir bench/gp-venv.sh
set -euo pipefail
OPTUNA_VERSION="5.0.0"
SCIPY_VERSION="1.17.1"
TORCH_VERSION="2.15.0"
COCO_VERSION="2.8.2"
CMAES_VERSION="0.13.1"
GREENLET_VERSION="3.5.6"
VENV="${HPO_GP_VENV:-$HOME/.cache/hpo-gp-venv}"
check="import optuna, scipy, torch, cocoex, cmaes, greenlet, sys; sys.exit(not (optuna.__version__ == '$OPTUNA_VERSION' and scipy.__version__ == '$SCIPY_VERSION' and torch.__version__.split('+')[0] == '$TORCH_VERSION' and cmaes.__version__ == '$CMAES_VERSION' and greenlet.__version__ == '$GREENLET_VERSION'))"
if ! "$VENV/bin/python" -c "$check" 2>/dev/null; then
    python3 -m venv "$VENV" >&2
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check \
        "optuna==$OPTUNA_VERSION" "scipy==$SCIPY_VERSION" "torch==$TORCH_VERSION" \
        "coco-experiment==$COCO_VERSION" "cmaes==$CMAES_VERSION" "greenlet==$GREENLET_VERSION" >&2
fi
echo "$VENV/bin/python"
