#!/bin/bash
# Creates the study once, before the job array joins it: records its search
# space and its budget, enqueues its warm start, runs no trial. Run it where
# the experiment can start (for an experiment that checks its GPU at start,
# on a GPU node: `srun --partition=gpu --gres=gpu:1 deploy/slurm/create-study.sh`).
# Running it again updates the budget; the trials stay.
#
#   deploy/slurm/create-study.sh [more flags of the experiment]
set -euo pipefail

env_file="${HPO_ENV_FILE:-$HOME/.config/hpo/study.env}"
if [[ ! -r $env_file ]]; then
    echo "create-study: no environment file $env_file (copy deploy/slurm/study.env.example)" >&2
    exit 2
fi
# shellcheck source=study.env.example
source "$env_file"
export HPO_STORAGE HPO_STUDY

budget=(--study-trials "${HPO_STUDY_TRIALS:?set HPO_STUDY_TRIALS in $env_file}")
if [[ -n ${HPO_DEADLINE:-} ]]; then
    budget+=(--deadline "$HPO_DEADLINE")
fi
exec "${HPO_EXPERIMENT[@]}" --create "${budget[@]}" "$@"
