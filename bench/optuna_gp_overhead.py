"""Optuna 5.0's GPSampler: the cost of one suggestion as the history grows.

One study, `GPSampler(seed=0)` with default settings, minimising a cheap
objective. The study is grown with the sampler itself (ask, suggest,
evaluate, tell) up to each size in `--sizes`; at that size `--repeats`
suggestions are timed, each one `study.ask()` plus the suggest calls of all
parameters (that is where GPSampler fits its GP and optimises the
acquisition function), and each is told afterwards (the evaluation and the
tell are not timed; the timed trials count towards the next size). Both CPU
time (`time.process_time()`) and wall time are recorded. Torch runs on one
thread (`OMP_NUM_THREADS=1`, set before torch loads, and
`torch.set_num_threads(1)`), as the Rust GpSampler is timed on one core.

Spaces (`--space`):
  float  x0..x4 floats in [-5, 5]; objective sum(x_i^2) (the sphere)
  mixed  x0, x1 floats in [-5, 5]; lr_a in [1e-5, 1] and lr_b in [1e-4, 10],
         both log; n an int in [1, 10]; kind categorical of ("a", "b", "c");
         objective x0^2 + x1^2 + (log10 lr_a + 3)^2 + (log10 lr_b + 1)^2
         + 0.1 (n - 4)^2 + {a: 0, b: 0.5, c: 1}[kind]

GP fitting is O(n^3) and the growth itself runs the sampler, so large sizes
are slow; `--max-seconds` bounds the whole run: once it is spent, the size in
progress and every larger one are recorded as skipped, with the reason.

Output (stdout, and `--out FILE`), JSON:
  {"meta": {...versions, platform, cpu model, command...},
   "sizes": [{"n_trials": 10, "repeats": 5,
              "cpu_s": {"median", "min", "max"}, "wall_s": {"median", "min", "max"},
              "cpu_s_all": [...], "wall_s_all": [...], "grow_wall_s": ...},
             {"n_trials": 1000, "skipped": "reason"}, ...]}

    PY=$(bench/gp-venv.sh)
    $PY bench/optuna_gp_overhead.py --sizes 10,25,50,100,300 --out /tmp/gp_overhead.json
"""

import os

# Before torch (and numpy's BLAS) load: one thread.
os.environ["OMP_NUM_THREADS"] = "1"
os.environ.setdefault("MKL_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import json
import math
import platform
import shlex
import statistics
import sys
import time
import warnings

import numpy as np
import scipy
import torch

import optuna

torch.set_num_threads(1)

DIM = 5
CATEGORY_OFFSET = {"a": 0.0, "b": 0.5, "c": 1.0}


def suggest_float_space(trial):
    return [trial.suggest_float(f"x{i}", -5.0, 5.0) for i in range(DIM)]


def objective_float(params):
    return float(sum(x * x for x in params))


def suggest_mixed_space(trial):
    return (
        trial.suggest_float("x0", -5.0, 5.0),
        trial.suggest_float("x1", -5.0, 5.0),
        trial.suggest_float("lr_a", 1e-5, 1.0, log=True),
        trial.suggest_float("lr_b", 1e-4, 10.0, log=True),
        trial.suggest_int("n", 1, 10),
        trial.suggest_categorical("kind", ["a", "b", "c"]),
    )


def objective_mixed(params):
    x0, x1, lr_a, lr_b, n, kind = params
    return float(
        x0 * x0
        + x1 * x1
        + (math.log10(lr_a) + 3.0) ** 2
        + (math.log10(lr_b) + 1.0) ** 2
        + 0.1 * (n - 4) ** 2
        + CATEGORY_OFFSET[kind]
    )


SPACES = {
    "float": (suggest_float_space, objective_float),
    "mixed": (suggest_mixed_space, objective_mixed),
}


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def greenlet_version():
    """Without greenlet, Optuna runs its batched L-BFGS-B sequentially (slower)."""
    try:
        import greenlet

        return greenlet.__version__
    except ImportError:
        return None


def stats(xs):
    return {"median": statistics.median(xs), "min": min(xs), "max": max(xs)}


class OutOfTime(Exception):
    pass


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="10,25,50,100,300,1000", help="history sizes, comma-separated, increasing")
    ap.add_argument("--repeats", type=int, default=5, help="timed suggestions per size")
    ap.add_argument("--space", choices=sorted(SPACES), default="float")
    ap.add_argument(
        "--max-seconds",
        type=float,
        default=1800.0,
        help="wall-time budget of the whole run (growth included); larger sizes are then skipped (0: none)",
    )
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=None, help="also write the JSON here")
    a = ap.parse_args()

    sizes = sorted({int(s) for s in a.sizes.split(",") if s})
    suggest, objective = SPACES[a.space]
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    warnings.simplefilter("ignore")

    sampler = optuna.samplers.GPSampler(seed=a.seed)
    study = optuna.create_study(direction="minimize", sampler=sampler)
    started = time.perf_counter()
    deadline = started + a.max_seconds if a.max_seconds > 0 else math.inf

    def step(timed):
        """One trial: ask + suggests (timed if asked), then evaluate and tell (untimed)."""
        c0, w0 = time.process_time(), time.perf_counter()
        trial = study.ask()
        params = suggest(trial)
        c1, w1 = time.process_time(), time.perf_counter()
        study.tell(trial, objective(params))
        return c1 - c0, w1 - w0

    results = []
    out_of_time = None
    for n in sizes:
        if out_of_time is not None:
            results.append({"n_trials": n, "skipped": out_of_time})
            continue
        try:
            g0 = time.perf_counter()
            while len(study.trials) < n:
                if time.perf_counter() > deadline:
                    raise OutOfTime(f"growing the history: {len(study.trials)} of {n} trials")
                step(False)
            grow = time.perf_counter() - g0
            cpu, wall = [], []
            for _ in range(a.repeats):
                if time.perf_counter() > deadline:
                    raise OutOfTime(f"timing: {len(cpu)} of {a.repeats} repeats done")
                c, w = step(True)
                cpu.append(c)
                wall.append(w)
        except OutOfTime as e:
            out_of_time = f"--max-seconds {a.max_seconds:g} spent ({e}; {time.perf_counter() - started:.0f} s elapsed)"
            results.append({"n_trials": n, "skipped": out_of_time})
            continue
        results.append(
            {
                "n_trials": n,
                "repeats": a.repeats,
                "cpu_s": stats(cpu),
                "wall_s": stats(wall),
                "cpu_s_all": cpu,
                "wall_s_all": wall,
                "grow_wall_s": grow,
            }
        )
        print(
            f"n={n}: cpu median {statistics.median(cpu) * 1e3:.1f} ms "
            f"(min {min(cpu) * 1e3:.1f}, max {max(cpu) * 1e3:.1f}); wall median "
            f"{statistics.median(wall) * 1e3:.1f} ms; grew in {grow:.1f} s",
            file=sys.stderr,
        )

    meta = {
        "sampler": f"optuna.samplers.GPSampler(seed={a.seed}) (defaults)",
        "space": a.space,
        "dim": DIM if a.space == "float" else 6,
        "timed": "study.ask() + suggest calls; tell not timed; one study grown with the sampler itself",
        "optuna": optuna.__version__,
        "torch": torch.__version__,
        "scipy": scipy.__version__,
        "numpy": np.__version__,
        "greenlet": greenlet_version(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpu_model": cpu_model(),
        "cpus": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
        "load_at_start": os.getloadavg(),
        "max_seconds": a.max_seconds,
        "total_wall_s": time.perf_counter() - started,
        "command": "python bench/optuna_gp_overhead.py " + shlex.join(sys.argv[1:]),
    }
    doc = {"meta": meta, "sizes": results}
    text = json.dumps(doc, indent=1)
    print(text)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
