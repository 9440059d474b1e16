"""Optuna 5.0's reference runs for hpo's sampler suite (issue 17).

The same problems as `hpo-core/benches/support/suite.rs`: BBOB f1..f24 (COCO's
own implementation, `cocoex`) as float parameters x0..x{d-1} in [-5, 5], and
the eight mixed spaces (3 to 8 are the fine-tuning spaces of
`hpo-core/benches/support/finetune.rs`), written here line for line as in Rust (same parameter
names, distributions, values and failing regions). Optuna 5.0's default
`TPESampler`, `RandomSampler` and `CmaEsSampler` (seeded 0..seeds-1; CMA-ES
samples the mixed spaces' categorical and conditional parameters
independently, as Optuna does), sequential ask/tell, failed and infeasible
trials told as FAIL. Writes, for every run, the best feasible value after 50,
100 and 200 trials (`--budgets`; those within --trials; null before the
first feasible trial) in the JSON format
`cargo bench -p hpo-core --bench sampler_suite`
reads (`bench/reference/optuna/sampler_suite.json` by default).

Setup (the venv of `.ci/python-venv.sh` has Optuna 5.0.0; COCO is needed for
BBOB only and the `cmaes` package for Optuna's CmaEsSampler; no CI test needs
either):

    PY=$(.ci/python-venv.sh)
    $PY -m pip install coco-experiment==2.8.2 cmaes==0.13.1 scipy==1.17.1

The full reference (f1..f24, instances 1-3, 5-D and 10-D, both mixed spaces,
10 seeds, 200 trials: 4,380 runs, under an hour on 2 cores; one part per
function keeps what is finished if the run is stopped):

    for f in $(seq 1 24); do
      $PY bench/optuna_suite.py --functions $f --mixed none --jobs 2 --out /tmp/part_$f.json
    done
    $PY bench/optuna_suite.py --functions= --mixed 1,2 --jobs 2 --out /tmp/part_mixed.json
    $PY bench/optuna_suite.py --merge /tmp/part_*.json --label "..." \
        --out bench/reference/optuna/sampler_suite.json

More seeds of one sampler: `--samplers tpe --first-seed 10 --seeds 20`, merged
the same way.

Optuna's `GPSampler` (`--samplers gp`; defaults, seeded; it needs scipy and
torch: use the venv of `bench/gp-venv.sh`, which also has COCO and cmaes) is
slow (a GP fit per trial), so its reference has its own budgets and file,
`bench/reference/optuna/sampler_suite_gp.json` (with TPE at the same
checkpoints, for the comparison at 25 and 50 trials), one part per function
(and the same with `--dims 10`, and `--functions= --mixed 1,2`):

    PY=$(bench/gp-venv.sh)
    for f in 2 4 6 8 10 12 14 16 18 20 22 24; do
      $PY bench/optuna_suite.py --functions $f --instances 1 --dims 5 --mixed none \
          --samplers gp,tpe --trials 100 --budgets 25,50,100 --out /tmp/gp_parts/part_f${f}_d5.json
    done
    $PY bench/optuna_suite.py --merge /tmp/gp_parts/part_*.json --label "..." \
        --out bench/reference/optuna/sampler_suite_gp.json

Torch runs on one thread in every worker (`OMP_NUM_THREADS=1`, set before
anything loads torch).
"""

import os

# Before anything imports torch (GPSampler) or numpy's BLAS: one thread per
# worker, as the --jobs count is the number of cores used.
os.environ["OMP_NUM_THREADS"] = "1"

import argparse
import json
import math
import multiprocessing
import platform
import shlex
import sys
import time

import optuna

BUDGETS = (50, 100, 200)
SAMPLERS = ("tpe", "random", "cmaes")
# Also available with --samplers: Optuna's QMCSampler with scrambling on, as
# hpo's QmcSampler by default (Optuna's own default, scramble=False, gives the
# same unscrambled Sobol points for every seed).
# Optuna's GPSampler (`gp`): defaults, seeded; needs scipy and torch.
EXTRA_SAMPLERS = ("qmc", "gp")


class Failed(Exception):
    """The trial failed or is infeasible (told as FAIL)."""


def model_choice(t):
    """Mixed space 1 (`Mixed::ModelChoice` in suite.rs); minimum 0.10."""
    model = t.suggest_categorical("model", ["mlp", "gbm", "svm"])
    if model == "mlp":
        layers = t.suggest_int("mlp_layers", 1, 8)
        units = t.suggest_int("mlp_units", 16, 512, log=True)
        dropout = t.suggest_float("mlp_dropout", 0.0, 0.5)
        lr = t.suggest_float("mlp_lr", 1e-5, 1e-1, log=True)
        if layers * units > 2048:
            raise Failed("out of memory")
        l = float(layers)
        return (
            0.10
            + 0.05 * (math.log10(lr) + 2.5 + 0.15 * l) ** 2
            + 0.01 * (math.log2(units) - 8.0) ** 2
            + 0.01 * (l - 4.0) ** 2
            + 0.2 * (dropout - 0.1 - 0.02 * l) ** 2
        )
    if model == "gbm":
        depth = t.suggest_int("gbm_depth", 2, 12)
        n = t.suggest_int("gbm_n_estimators", 50, 1000, step=50)
        subsample = t.suggest_float("gbm_subsample", 0.5, 1.0)
        lr = t.suggest_float("gbm_lr", 1e-3, 1.0, log=True)
        if depth * n > 8000:
            raise Failed("timed out")
        ln = math.log10(n)
        return (
            0.12
            + 0.05 * (math.log10(lr) + ln - 1.5) ** 2
            + 0.005 * (depth - 6.0) ** 2
            + 0.3 * (subsample - 0.8) ** 2
            + 0.02 * (ln - 2.7) ** 2
        )
    c = t.suggest_float("svm_c", 1e-3, 1e3, log=True)
    gamma = t.suggest_float("svm_gamma", 1e-4, 10.0, log=True)
    lc, lg = math.log10(c), math.log10(gamma)
    if lc + lg > 2.0:
        raise Failed("did not converge")
    return 0.15 + 0.03 * (lc - 1.0) ** 2 + 0.05 * (lg + 2.0 + 0.3 * (lc - 1.0)) ** 2


def schedule(t):
    """Mixed space 2 (`Mixed::Schedule` in suite.rs); minimum 0.2 + 0.5 exp(-20)."""
    batch = t.suggest_categorical("batch_size", [16, 32, 64, 128, 256])
    lr = t.suggest_float("lr", 1e-5, 1.0, log=True)
    warmup = t.suggest_int("warmup_epochs", 0, 10)
    steps = t.suggest_int("steps", 500, 5000, step=500)
    wd = t.suggest_float("weight_decay", 1e-6, 1e-1, log=True)
    if math.log10(lr) > -1.0 + 0.08 * warmup:
        raise Failed("diverged")
    b = float(batch)
    lr_opt = -3.0 + 0.3 * math.log2(b / 16.0)
    return (
        0.2
        + 0.04 * (math.log10(lr) - lr_opt) ** 2
        + 0.5 * math.exp(-(steps / 1000.0) * (b / 64.0))
        + 0.02 * (math.log10(wd) + 4.0) ** 2
        + 0.002 * (warmup - 3.0) ** 2
    )


# The fine-tuning spaces 3 to 8 (`hpo-core/benches/support/finetune.rs`), line
# for line: a transformer classifier fine-tuned on one GPU.


def footprint(model):
    """Weights, gradients and Adam's states (GB), and activations per 4096 tokens."""
    return {
        "distilbert-base": (0.8, 0.7),
        "bert-base": (1.5, 1.3),
        "roberta-base": (1.6, 1.3),
        "deberta-base": (1.8, 1.6),
        "bert-large": (4.0, 4.0),
        "roberta-large": (4.2, 4.0),
    }.get(model, (4.5, 5.0))


def memory_gb(model, batch, length, state, act_scale):
    w, a = footprint(model)
    return w * state + a * (batch * length) / 4096.0 * act_scale


MODELS = ["bert-base", "roberta-base", "deberta-base", "bert-large", "roberta-large", "deberta-large"]


def finetune(t):
    """Mixed space 3 (`finetune::finetune`); minimum 0.08."""
    model = t.suggest_categorical("model", MODELS)
    lr = t.suggest_float("lr", 1e-6, 1e-3, log=True)
    batch = t.suggest_categorical("batch_size", [8, 16, 32, 48, 64])
    length = t.suggest_int("max_length", 128, 512, step=32)
    accumulation = t.suggest_int("accumulation", 1, 8)
    dropout = t.suggest_float("dropout", 0.0, 0.3)
    warmup = t.suggest_float("warmup_ratio", 0.0, 0.2)
    wd = t.suggest_float("weight_decay", 1e-5, 1e-1, log=True)
    gb = memory_gb(model, batch, length, 1.0, 1.0)
    if gb > 24.0:
        raise Failed("out of memory")
    large = model.endswith("large")
    eff = float(batch * accumulation)
    lr_opt = (-5.0 if large else -4.7) + 0.5 * math.log10(eff / 64.0)
    if math.log10(lr) > lr_opt + 0.8 + 10.0 * warmup:
        raise Failed("diverged")
    base = {
        "bert-base": 0.15,
        "roberta-base": 0.13,
        "deberta-base": 0.12,
        "bert-large": 0.11,
        "roberta-large": 0.09,
    }.get(model, 0.08)
    return (
        base
        + 0.02 * (math.log10(lr) - lr_opt) ** 2
        + 0.06 * max((384 - length) / 384.0, 0.0)
        + 0.01 * (math.log2(eff) - 6.0) ** 2
        + 0.3 * (dropout - 0.1) ** 2
        + 0.5 * (warmup - 0.06) ** 2
        + 0.004 * (math.log10(wd) + 2.0) ** 2
    )


def family_size(t):
    """Mixed space 4 (`finetune::family_size`); minimum 0.10."""
    family = t.suggest_categorical("family", ["bert", "roberta", "deberta"])
    size = t.suggest_categorical("size", ["base", "large"])
    model = f"{family}-{size}"
    large = size == "large"
    if large:
        decay = t.suggest_float("layer_decay", 0.5, 1.0)
        size_term = 0.2 * (decay - 0.8) ** 2
    else:
        frozen = t.suggest_int("freeze_layers", 0, 6)
        size_term = 0.002 * (frozen - 2.0) ** 2
    precision = t.suggest_categorical("precision", ["fp32", "fp16", "bf16"])
    lr = t.suggest_float("lr", 1e-6, 1e-3, log=True)
    batch = t.suggest_categorical("batch_size", [8, 16, 32, 64])
    length = t.suggest_int("max_length", 64, 512, step=64)
    warmup = t.suggest_int("warmup_steps", 0, 1000, step=100)
    wd = t.suggest_float("weight_decay", 1e-5, 1e-1, log=True)
    dropout = t.suggest_float("dropout", 0.0, 0.3)
    scale = 1.0 if precision == "fp32" else 0.6
    gb = memory_gb(model, batch, length, scale, scale)
    if gb > 16.0:
        raise Failed("out of memory")
    if family == "deberta" and precision == "fp16" and math.log10(lr) > -4.7:
        raise Failed("fp16 overflow (nan loss)")
    if large and math.log10(lr) > -4.0:
        raise Failed("diverged")
    base = {
        "bert-base": 0.16,
        "roberta-base": 0.14,
        "deberta-base": 0.135,
        "bert-large": 0.13,
        "roberta-large": 0.10,
    }.get(model, 0.105)
    lr_opt = -5.2 if large else -4.5
    precision_term = 0.004 if precision == "bf16" else 0.0
    return (
        base
        + size_term
        + precision_term
        + 0.03 * (math.log10(lr) - lr_opt) ** 2
        + 0.05 * max((256 - length) / 256.0, 0.0)
        + 0.003 * (math.log2(batch) - 4.0) ** 2
        + 0.1 * ((warmup - 300) / 1000.0) ** 2
        + 0.003 * (math.log10(wd) + 3.0) ** 2
        + 0.2 * (dropout - 0.15) ** 2
    )


def optimizer_space(t):
    """Mixed space 5 (`finetune::optimizer`); minimum 0.088."""
    model = t.suggest_categorical("model", MODELS)
    optimizer = t.suggest_categorical("optimizer", ["adamw", "adafactor", "sgd"])
    if optimizer == "adamw":
        beta2 = t.suggest_float("adam_beta2", 0.9, 0.999)
        lr_base = -5.1 if model.endswith("large") else -4.8
        state, optimizer_term = 3.0, 2.0 * (beta2 - 0.98) ** 2
    elif optimizer == "adafactor":
        scale = t.suggest_categorical("adafactor_scale_parameter", ["true", "false"])
        state, optimizer_term, lr_base = 1.5, (0.008 if scale == "true" else 0.012), -3.5
    else:
        momentum = t.suggest_float("sgd_momentum", 0.0, 0.99)
        state, optimizer_term, lr_base = 2.0, 0.03 + 0.1 * (momentum - 0.9) ** 2, -2.0
    lr = t.suggest_float("lr", 1e-6, 1e-1, log=True)
    batch = t.suggest_categorical("batch_size", [4, 8, 16, 32])
    length = t.suggest_int("max_length", 128, 512, step=128)
    accumulation = t.suggest_int("accumulation", 1, 16)
    dropout = t.suggest_float("dropout", 0.0, 0.3)
    wd = t.suggest_float("weight_decay", 1e-5, 1e-1, log=True)
    gb = memory_gb(model, batch, length, state, 1.0)
    if gb > 12.0:
        raise Failed("out of memory")
    eff = float(batch * accumulation)
    lr_opt = lr_base + 0.5 * math.log10(eff / 32.0)
    if math.log10(lr) > lr_opt + 1.5:
        raise Failed("diverged")
    base = {
        "bert-base": 0.15,
        "roberta-base": 0.13,
        "deberta-base": 0.12,
        "bert-large": 0.11,
        "roberta-large": 0.09,
    }.get(model, 0.08)
    return (
        base
        + optimizer_term
        + 0.02 * (math.log10(lr) - lr_opt) ** 2
        + 0.08 * max((512 - length) / 512.0, 0.0)
        + 0.01 * (math.log2(eff) - 5.0) ** 2
        + 0.3 * (dropout - 0.05) ** 2
        + 0.004 * (math.log10(wd) + 3.0) ** 2
    )


def long_docs(t):
    """Mixed space 6 (`finetune::long_docs`); minimum 0.07."""
    model = t.suggest_categorical("model", MODELS)
    lr = t.suggest_float("lr", 1e-6, 1e-3, log=True)
    batch = t.suggest_categorical("batch_size", [4, 8, 16, 32])
    length = t.suggest_int("max_length", 256, 1024, step=128)
    accumulation = t.suggest_int("accumulation", 1, 8)
    checkpointing = t.suggest_categorical("gradient_checkpointing", ["false", "true"])
    dropout = t.suggest_float("dropout", 0.0, 0.3)
    warmup = t.suggest_float("warmup_ratio", 0.0, 0.2)
    wd = t.suggest_float("weight_decay", 1e-5, 1e-1, log=True)
    if not model.startswith("deberta") and length > 512:
        raise Failed("too many positions")
    act = 0.35 if checkpointing == "true" else 1.0
    gb = memory_gb(model, batch, length, 1.0, act)
    if gb > 24.0:
        raise Failed("out of memory")
    large = model.endswith("large")
    if large and math.log10(lr) > -4.0 + 10.0 * warmup:
        raise Failed("diverged")
    base = {
        "bert-base": 0.13,
        "roberta-base": 0.11,
        "deberta-base": 0.10,
        "bert-large": 0.10,
        "roberta-large": 0.08,
    }.get(model, 0.07)
    eff = float(batch * accumulation)
    lr_opt = (-5.1 if large else -4.6) + 0.5 * math.log10(eff / 32.0)
    return (
        base
        + 0.025 * (math.log10(lr) - lr_opt) ** 2
        + 0.1 * max((768 - length) / 768.0, 0.0)
        + 0.01 * (math.log2(eff) - 5.0) ** 2
        + 0.2 * (dropout - 0.15) ** 2
        + 0.4 * (warmup - 0.1) ** 2
        + 0.004 * (math.log10(wd) + 2.0) ** 2
    )


def small_data(t):
    """Mixed space 7 (`finetune::small_data`); minimum 0.105."""
    family = t.suggest_categorical("family", ["bert", "roberta", "deberta"])
    size = t.suggest_categorical("size", ["base", "large"])
    model = f"{family}-{size}"
    large = size == "large"
    if large:
        decay = t.suggest_float("layer_decay", 0.5, 1.0)
        reinit = t.suggest_int("reinit_layers", 0, 4)
        large_term = 0.15 * (decay - 0.7) ** 2 + 0.005 * (reinit - 1.0) ** 2
    else:
        large_term = 0.0
    lr = t.suggest_float("lr", 1e-6, 1e-3, log=True)
    batch = t.suggest_categorical("batch_size", [8, 16, 32])
    epochs = t.suggest_int("epochs", 1, 10)
    length = t.suggest_int("max_length", 64, 256, step=32)
    dropout = t.suggest_float("dropout", 0.0, 0.5)
    wd = t.suggest_float("weight_decay", 1e-5, 1e-1, log=True)
    warmup = t.suggest_float("warmup_ratio", 0.0, 0.3)
    gb = memory_gb(model, batch, length, 1.0, 1.0)
    if gb > 8.0:
        raise Failed("out of memory")
    if large and warmup < 0.05 and math.log10(lr) > -4.5:
        raise Failed("training collapsed")
    base = {
        "bert-base": 0.14,
        "roberta-base": 0.12,
        "deberta-base": 0.115,
        "bert-large": 0.13,
        "roberta-large": 0.11,
    }.get(model, 0.105)
    epochs_opt, lr_base, dropout_opt = (3.0, -5.0, 0.25) if large else (6.0, -4.4, 0.1)
    lr_opt = lr_base - 0.3 * math.log2(epochs / epochs_opt)
    return (
        base
        + large_term
        + 0.02 * (math.log10(lr) - lr_opt) ** 2
        + 0.003 * (epochs - epochs_opt) ** 2
        + 0.04 * max((128 - length) / 128.0, 0.0)
        + 0.2 * (dropout - dropout_opt) ** 2
        + 0.003 * (math.log10(wd) + 1.5) ** 2
        + 0.2 * (warmup - 0.1) ** 2
        + 0.004 * (math.log2(batch) - 3.0) ** 2
    )


def small_card(t):
    """Mixed space 8 (`finetune::small_card`); minimum 0.09."""
    model = t.suggest_categorical(
        "model",
        ["distilbert-base", "bert-base", "roberta-base", "deberta-base", "roberta-large", "deberta-large"],
    )
    scheduler = t.suggest_categorical("scheduler", ["linear", "cosine", "constant"])
    warmup = None if scheduler == "constant" else t.suggest_float("warmup_ratio", 0.0, 0.2)
    if scheduler == "linear":
        schedule_term = 0.002
    elif scheduler == "cosine":
        cycles = t.suggest_float("num_cycles", 0.5, 3.0)
        schedule_term = 0.15 * (cycles - 0.5) ** 2
    else:
        schedule_term = 0.01
    fp16 = t.suggest_categorical("fp16", ["false", "true"])
    lr = t.suggest_float("lr", 1e-6, 1e-2, log=True)
    batch = t.suggest_categorical("batch_size", [4, 8, 16, 32, 64])
    accumulation = t.suggest_int("accumulation", 1, 16)
    length = t.suggest_int("max_length", 64, 512, step=64)
    dropout = t.suggest_float("dropout", 0.0, 0.3)
    wd = t.suggest_float("weight_decay", 1e-5, 1e-1, log=True)
    scale = 0.6 if fp16 == "true" else 1.0
    gb = memory_gb(model, batch, length, scale, scale)
    if gb > 11.0:
        raise Failed("out of memory")
    large = model.endswith("large")
    eff = float(batch * accumulation)
    lr_opt = (-5.0 if large else -4.5) + math.log10(eff / 32.0)
    if warmup is None:
        diverges = math.log10(lr) > -4.0
    else:
        diverges = math.log10(lr) > lr_opt + 1.0 + 10.0 * warmup
    if diverges:
        raise Failed("diverged")
    warmup_term = 0.0 if warmup is None else 0.3 * (warmup - 0.08) ** 2
    base = {
        "distilbert-base": 0.16,
        "bert-base": 0.14,
        "roberta-base": 0.125,
        "deberta-base": 0.12,
        "roberta-large": 0.095,
    }.get(model, 0.09)
    return (
        base
        + schedule_term
        + warmup_term
        + 0.02 * (math.log10(lr) - lr_opt) ** 2
        + 0.06 * max((320 - length) / 320.0, 0.0)
        + 0.008 * (math.log2(eff) - 7.0) ** 2
        + 0.25 * (dropout - 0.1) ** 2
        + 0.004 * (math.log10(wd) + 2.5) ** 2
    )


MIXED = {
    1: ("mixed1_model_choice", model_choice),
    2: ("mixed2_schedule", schedule),
    3: ("mixed3_finetune", finetune),
    4: ("mixed4_family_size", family_size),
    5: ("mixed5_optimizer", optimizer_space),
    6: ("mixed6_long_docs", long_docs),
    7: ("mixed7_small_data", small_data),
    8: ("mixed8_small_card", small_card),
}


def bbob_objective(function, instance, dim):
    import cocoex  # only BBOB needs COCO

    suite = cocoex.Suite("bbob", f"instances: {instance}", f"dimensions: {dim}")
    problem = suite.get_problem_by_function_dimension_instance(function, dim, instance)

    def objective(t):
        x = [t.suggest_float(f"x{i}", -5.0, 5.0) for i in range(dim)]
        return float(problem(x))

    return objective


def make_sampler(name, seed):
    if name == "tpe":
        return optuna.samplers.TPESampler(seed=seed)
    if name == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    if name == "cmaes":
        return optuna.samplers.CmaEsSampler(seed=seed)
    if name == "qmc":
        return optuna.samplers.QMCSampler(scramble=True, seed=seed)
    if name == "gp":
        # Categorical parameters are handled by GPSampler itself; the mixed
        # spaces' conditional parameters (outside the intersection search
        # space) are sampled independently (random), as Optuna does.
        import torch

        torch.set_num_threads(1)
        return optuna.samplers.GPSampler(seed=seed)
    raise ValueError(name)


def run(job):
    problem, spec, sampler, seed, n_trials, budgets = job
    if spec[0] == "bbob":
        objective = bbob_objective(*spec[1:])
    else:
        objective = MIXED[spec[1]][1]
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    import warnings

    warnings.simplefilter("ignore")
    study = optuna.create_study(direction="minimize", sampler=make_sampler(sampler, seed))
    best, out = None, {}
    started = time.time()
    for k in range(1, n_trials + 1):
        trial = study.ask()
        try:
            value = objective(trial)
        except Failed:
            study.tell(trial, state=optuna.trial.TrialState.FAIL)
        else:
            study.tell(trial, value)
            best = value if best is None else min(best, value)
        if k in budgets:
            out[str(k)] = best
    return {
        "problem": problem,
        "sampler": sampler,
        "seed": seed,
        "best": out,
        "wall_s": time.time() - started,
    }


def merge(parts, label, out):
    """Combines partial outputs (same Optuna and budgets; e.g. one per function, or more seeds of one sampler) into one file."""
    metas, runs = [], []
    for path in parts:
        with open(path) as f:
            doc = json.load(f)
        metas.append(doc["meta"])
        runs += doc["runs"]
    first = metas[0]
    for m in metas[1:]:
        for key in ("optuna", "budgets"):
            if m[key] != first[key]:
                sys.exit(f"cannot merge: {key} differs ({m[key]} against {first[key]})")
    union = lambda key: sorted({v for m in metas for v in m[key]})
    meta = dict(first)
    meta.update(
        label=label,
        command=" ; ".join(m["command"] for m in metas),
        functions=union("functions"),
        instances=union("instances"),
        dims=union("dims"),
        mixed=union("mixed"),
        samplers=union("samplers"),
        seeds=union("seeds"),
        seeds_by_sampler={
            s: sorted({r["seed"] for r in runs if r["sampler"] == s}) for s in union("samplers")
        },
        wall_s=sum(m["wall_s"] for m in metas),
        load_at_start=[m["load_at_start"] for m in metas],
        parts=len(metas),
    )
    seen = set()
    for r in runs:
        key = (r["problem"], r["sampler"], r["seed"])
        if key in seen:
            sys.exit(f"cannot merge: {key} appears twice")
        seen.add(key)
    with open(out, "w") as f:
        json.dump({"meta": meta, "runs": runs}, f, indent=1)
        f.write("\n")


def ints(s):
    return [int(x) for x in s.split(",") if x]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--functions", type=ints, default=list(range(1, 25)))
    ap.add_argument("--instances", type=ints, default=[1, 2, 3])
    ap.add_argument("--dims", type=ints, default=[5, 10])
    ap.add_argument("--mixed", default="1,2", help="mixed spaces, or 'none'")
    ap.add_argument("--samplers", default=",".join(SAMPLERS))
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--first-seed", type=int, default=0, help="seeds are first-seed .. first-seed+seeds-1")
    ap.add_argument("--trials", type=int, default=200)
    ap.add_argument(
        "--budgets",
        type=ints,
        default=list(BUDGETS),
        help="checkpoints (trials) at which the best value is recorded; those above --trials are dropped",
    )
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--label", default="")
    ap.add_argument("--out", default="bench/reference/optuna/sampler_suite.json")
    ap.add_argument(
        "--merge",
        nargs="+",
        metavar="PART",
        help="combine the outputs of several runs (e.g. one per function) into --out, running nothing",
    )
    a = ap.parse_args()
    if a.merge:
        merge(a.merge, a.label, a.out)
        return
    budgets = sorted(b for b in a.budgets if b <= a.trials) or [a.trials]
    problems = [
        (f"bbob_f{f:02}_i{i}_d{d}", ("bbob", f, i, d))
        for f in a.functions
        for i in a.instances
        for d in a.dims
    ]
    mixed = [] if a.mixed == "none" else ints(a.mixed)
    problems += [(MIXED[m][0], ("mixed", m)) for m in mixed]
    jobs = [
        (name, spec, s, seed, a.trials, budgets)
        for name, spec in problems
        for s in a.samplers.split(",")
        for seed in range(a.first_seed, a.first_seed + a.seeds)
    ]
    load = os.getloadavg()
    started = time.time()
    runs = []
    with multiprocessing.Pool(a.jobs) as pool:
        for r in pool.imap(run, jobs):
            runs.append(r)
            print(f"{r['problem']} {r['sampler']} seed {r['seed']}: {r['best']} ({r['wall_s']:.1f}s)", file=sys.stderr)
    meta = {
        "label": a.label,
        "optuna": optuna.__version__,
        "command": "python bench/optuna_suite.py " + shlex.join(sys.argv[1:]),
        "functions": a.functions,
        "instances": a.instances,
        "dims": a.dims,
        "mixed": [MIXED[m][0] for m in mixed],
        "samplers": a.samplers.split(","),
        "seeds": list(range(a.first_seed, a.first_seed + a.seeds)),
        "budgets": budgets,
        "wall_s": time.time() - started,
        "load_at_start": load,
        "machine": f"{platform.machine()}, {multiprocessing.cpu_count()} CPUs, Python {platform.python_version()}",
    }
    with open(a.out, "w") as f:
        json.dump({"meta": meta, "runs": runs}, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
