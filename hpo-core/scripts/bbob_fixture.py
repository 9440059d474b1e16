"""Writes hpo-core/tests/data/bbob.json: reference values of the 24 noiseless
BBOB functions (Hansen et al., 2009) from COCO's own implementation.

For every function f1..f24, instance 1..3 and dimension 5 and 10: the optimum
(`x_opt`, from `cocoex`'s `_best_parameter`, and `f_opt`, the value there) and
the values at fixed points (seeded uniform draws in [-5, 5]^d, plus points near
the optimum, where the functions' fine structure is). Run with the venv of
`.ci/python-venv.sh` after `pip install coco-experiment==2.8.2`:

    python hpo-core/scripts/bbob_fixture.py > hpo-core/tests/data/bbob.json
"""

import json
import os
import sys
import tempfile

import cocoex
import numpy as np

rng = np.random.default_rng(20090101)
suite = cocoex.Suite("bbob", "instances: 1-3", "dimensions: 5,10")
problems = []
cwd = os.getcwd()
with tempfile.TemporaryDirectory() as tmp:
    os.chdir(tmp)  # _best_parameter writes a file into the working directory
    for p in suite:
        p._best_parameter("print")
        x_opt = np.atleast_1d(np.loadtxt("._bbob_problem_best_parameter.txt"))
        d = p.dimension
        points = [rng.uniform(-5, 5, d) for _ in range(4)]
        points += [x_opt + rng.normal(0, s, d) for s in (1e-3, 1e-1)]
        problems.append(
            {
                "function": p.id_function,
                "instance": p.id_instance,
                "dimension": d,
                "x_opt": x_opt.tolist(),
                "f_opt": float(p(x_opt)),
                "points": [x.tolist() for x in points],
                "values": [float(p(x)) for x in points],
            }
        )
os.chdir(cwd)
json.dump(
    {"source": f"cocoex {cocoex.__version__}, suite bbob", "problems": problems},
    sys.stdout,
    separators=(",", ":"),
)
