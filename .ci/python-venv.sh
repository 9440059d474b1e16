#!/usr/bin/env bash
# Creates (once) the Python venv used by the Optuna interop test and prints its
# python path. The venv lives outside the repository so CI runs reuse it.
#
#   .ci/python-venv.sh            # create if missing, print the interpreter path
#   HPO_VENV=/some/dir .ci/python-venv.sh
set -euo pipefail
OPTUNA_VERSION="5.0.0"
# The tracking server and the dashboard that the MLflow and optuna-dashboard
# tests start against hpo studies (tests/it/tracking.rs, tests/it/dashboard.rs).
MLFLOW_VERSION="3.17.2"
DASHBOARD_VERSION="0.21.0"
VENV="${HPO_VENV:-$HOME/.cache/hpo-venv}"
# psycopg: Optuna's PostgreSQL driver, for the interop tests on PostgreSQL.
if ! "$VENV/bin/python" -c "import optuna, psycopg, sys; sys.exit(optuna.__version__ != '$OPTUNA_VERSION')" 2>/dev/null; then
    python3 -m venv "$VENV" >&2
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "optuna==$OPTUNA_VERSION" "psycopg[binary]" >&2
fi
# An existing venv gets the servers too (checked by version, so a pin moved
# here reinstalls them).
if ! "$VENV/bin/python" -c "import sys, importlib.metadata as m; sys.exit(m.version('mlflow') != '$MLFLOW_VERSION' or m.version('optuna-dashboard') != '$DASHBOARD_VERSION')" 2>/dev/null; then
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "mlflow==$MLFLOW_VERSION" "optuna-dashboard==$DASHBOARD_VERSION" "optuna==$OPTUNA_VERSION" >&2
fi
echo "$VENV/bin/python"
