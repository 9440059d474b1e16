#!/usr/bin/env bash
# Creates (once) the Python venv used by the Optuna interop test and prints its
# python path. The venv lives outside the repository so CI runs reuse it.
#
#   .ci/python-venv.sh            # create if missing, print the interpreter path
#   HPO_VENV=/some/dir .ci/python-venv.sh
set -euo pipefail
OPTUNA_VERSION="5.0.0"
VENV="${HPO_VENV:-$HOME/.cache/hpo-venv}"
# psycopg: Optuna's PostgreSQL driver, for the interop tests on PostgreSQL.
if ! "$VENV/bin/python" -c "import optuna, psycopg, sys; sys.exit(optuna.__version__ != '$OPTUNA_VERSION')" 2>/dev/null; then
    python3 -m venv "$VENV" >&2
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "optuna==$OPTUNA_VERSION" "psycopg[binary]" >&2
fi
echo "$VENV/bin/python"
