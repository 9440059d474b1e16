"""Writes hpo-core/tests/data/cmaes_tell.json: CMA-ES updates computed by the
`cmaes` library (the one Optuna's CmaEsSampler uses), for hpo's CMA-ES
variants to replay.

For each variant (full, full with learning-rate adaptation, separable, with
margin) it records the initial settings and, for a few generations, the
solutions told (drawn by `cmaes` itself on a test function) and the state
after each `tell`: mean, step size, covariance (diagonal for separable) and,
with margin, the scaling A. Run with the venv of `.ci/python-venv.sh` after
`pip install cmaes==0.13.1`:

    python hpo-core/scripts/cmaes_fixture.py > hpo-core/tests/data/cmaes_tell.json
"""

import json
import sys

import cmaes
import numpy as np


def f(x):
    # A rotated-ish ellipsoid with an integer-friendly optimum at 0.3.
    n = len(x)
    return float(sum((10 ** (i / max(n - 1, 1))) * (x[i] - 0.3 + 0.1 * x[(i + 1) % n]) ** 2 for i in range(n)))


def record(name, opt, n, popsize, sigma, steps=None, lr_adapt=False, generations=6):
    gens = []
    for _ in range(generations):
        sols = []
        for _ in range(opt.population_size):
            if steps is not None:
                x_enc, raw = opt.ask()
                sols.append((raw.tolist(), f(x_enc)))
            else:
                x = opt.ask()
                sols.append((x.tolist(), f(x)))
        opt.tell([(np.array(x), v) for x, v in sols])
        cma = opt._cma if steps is not None else opt
        state = {
            "mean": cma._mean.tolist(),
            "sigma": float(cma._sigma),
            "c": np.asarray(cma._C).ravel().tolist(),
        }
        if steps is not None:
            state["a"] = opt._A.tolist()
        gens.append({"solutions": sols, "after": state})
    return {
        "variant": name,
        "n": n,
        "popsize": popsize,
        "sigma": sigma,
        "lr_adapt": lr_adapt,
        "steps": steps,
        "generations": gens,
    }


n, sigma = 4, 1 / 6
bounds = np.array([[0.0, 1.0]] * n)
mean = np.full(n, 0.5)
pop = 4 + int(np.floor(3 * np.log(n)))
out = [
    record("full", cmaes.CMA(mean=mean.copy(), sigma=sigma, bounds=bounds, seed=1), n, pop, sigma),
    record(
        "lr_adapt",
        cmaes.CMA(mean=mean.copy(), sigma=sigma, bounds=bounds, seed=2, lr_adapt=True),
        n, pop, sigma, lr_adapt=True,
    ),
    record("separable", cmaes.SepCMA(mean=mean.copy(), sigma=sigma, bounds=bounds, seed=3), n, pop, sigma),
]
steps = [0.1, 0.1, 0.25, 0.0]
out.append(
    record(
        "margin",
        cmaes.CMAwM(mean=mean.copy(), sigma=sigma, bounds=bounds, steps=np.array(steps), seed=4),
        n, pop, sigma, steps=steps, generations=10,
    )
)
json.dump({"source": f"cmaes {cmaes.__version__}", "runs": out}, sys.stdout)
