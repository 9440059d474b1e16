"""Optuna 5.0's fitted Gaussian process as a fixture for hpo's GpSampler.

Writes `hpo-core/tests/data/gp_optuna_fit.json`: a few small data sets, and for
each what Optuna's own GP code (`optuna._gp.gp`, `optuna._gp.prior`,
`optuna._gp.acqf`, called directly, not through the sampler) computes on it:

* `initial`: the loss that `GPRegressor._fit_kernel_params` minimises,
  `-(marginal_log_likelihood) - log_prior`, and its gradient (torch autograd,
  exactly as its `loss_func`) with respect to the raw parameters
  `[log isl_1 .. log isl_d, log kernel_scale, log(noise_var - minimum_noise)]`
  at inverse squared lengthscales 1, kernel scale 1, noise variance 1;
  `initial_optimizer_start` the same at the point L-BFGS-B really starts from,
  whose last raw parameter is `log(noise_var - 0.99 * minimum_noise)` (so the
  noise variance there is `1 + 0.01 * minimum_noise`);
* `fitted`: what `fit_kernel_params(X, Y, is_categorical, default_log_prior,
  DEFAULT_MINIMUM_NOISE_VAR, deterministic_objective=False)` returns (no
  cache: it starts from all ones), the loss and gradient there, and scipy's
  iteration count;
* `points`: five test points (the first one is training point 0) with the
  fitted GP's posterior mean and variance and the log expected improvement
  over max(y), `acqf.logei(mean, var + 1e-12, max(y))` as `acqf.LogEI` does.

`y` is already what the sampler passes to the GP: the objective's values
negated (Optuna's GP maximises) and standardised with the sampler's own
`_standardize_values` (mean 0, population std 1). Categorical columns hold
the choice's index 0..k-1 as a float, as Optuna's normalised parameters do.
The loss omits the constant `n/2 log(2 pi)` and the Gamma priors' normalising
constants, as Optuna does.

    PY=$(bench/gp-venv.sh)
    $PY bench/gp_fixture.py                 # writes hpo-core/tests/data/gp_optuna_fit.json
    $PY bench/gp_fixture.py --out /tmp/x.json

Deterministic: fixed numpy seeds, one torch thread. No CI test runs this
script; the JSON it wrote is committed.
"""

import argparse
import json
import os
import platform
import sys

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np
import scipy
import scipy.optimize
import torch

import optuna
from optuna._gp import acqf
from optuna._gp import gp
from optuna._gp import prior
from optuna.samplers._gp.sampler import _standardize_values

torch.set_num_threads(1)

MIN_NOISE = prior.DEFAULT_MINIMUM_NOISE_VAR


def standardized_y(objective_values):
    """As GPSampler does for a minimised objective: negate, then standardise."""
    vals = -np.asarray(objective_values, dtype=np.float64)[:, None]
    y, _, _ = _standardize_values(vals)
    return y[:, 0]


def make_gpr(X, Y, is_cat, isl, ks, noise):
    return gp.GPRegressor(
        is_categorical=torch.from_numpy(is_cat),
        X_train=torch.from_numpy(X),
        y_train=torch.from_numpy(Y),
        inverse_squared_lengthscales=torch.as_tensor(isl, dtype=torch.float64),
        kernel_scale=torch.as_tensor(ks, dtype=torch.float64),
        noise_var=torch.as_tensor(noise, dtype=torch.float64),
    )


def loss_and_grad(X, Y, is_cat, raw_params):
    """`loss_func` of `GPRegressor._fit_kernel_params` (deterministic_objective=False)."""
    d = X.shape[1]
    gpr = make_gpr(X, Y, is_cat, np.ones(d), 1.0, 1.0)
    raw = torch.from_numpy(np.asarray(raw_params, dtype=np.float64)).requires_grad_(True)
    with torch.enable_grad():
        gpr.inverse_squared_lengthscales = torch.exp(raw[:d])
        gpr.kernel_scale = torch.exp(raw[d])
        gpr.noise_var = torch.exp(raw[d + 1]) + MIN_NOISE
        mll = gpr.marginal_log_likelihood()
        lp = prior.default_log_prior(gpr)
        loss = -mll - lp
        loss.backward()
    return {
        "raw_params": [float(v) for v in raw_params],
        "loss": loss.item(),
        "grad": raw.grad.numpy().tolist(),
        "marginal_log_likelihood": mll.item(),
        "log_prior": lp.item(),
    }


def loss_at(X, Y, is_cat, isl, ks, noise):
    """The same loss straight from the parameters (no raw round trip)."""
    gpr = make_gpr(X, Y, is_cat, isl, ks, noise)
    with torch.no_grad():
        mll = gpr.marginal_log_likelihood()
        lp = prior.default_log_prior(gpr)
    return (-mll - lp).item(), mll.item(), lp.item()


class RecordMinimize:
    """Wraps scipy.optimize.minimize to record the L-BFGS-B result of the fit."""

    def __init__(self):
        self.results = []
        self._orig = scipy.optimize.minimize

    def __enter__(self):
        def wrapped(*args, **kwargs):
            res = self._orig(*args, **kwargs)
            self.results.append(res)
            return res

        scipy.optimize.minimize = wrapped
        return self

    def __exit__(self, *exc):
        scipy.optimize.minimize = self._orig


def build_case(name, description, X, objective_values, is_cat, points):
    X = np.ascontiguousarray(X, dtype=np.float64)
    Y = standardized_y(objective_values)
    is_cat = np.asarray(is_cat, dtype=bool)
    d = X.shape[1]

    initial = loss_and_grad(X, Y, is_cat, np.r_[np.zeros(d), 0.0, np.log(1.0 - MIN_NOISE)])
    start = loss_and_grad(X, Y, is_cat, np.r_[np.zeros(d), 0.0, np.log(1.0 - 0.99 * MIN_NOISE)])

    with RecordMinimize() as rec:
        fitted = gp.fit_kernel_params(
            X=X,
            Y=Y,
            is_categorical=is_cat,
            log_prior=prior.default_log_prior,
            minimum_noise=MIN_NOISE,
            deterministic_objective=False,
            gpr_cache=None,
        )
    assert len(rec.results) == 1, f"{name}: the fit took {len(rec.results)} L-BFGS-B runs"
    res = rec.results[0]
    isl = fitted.inverse_squared_lengthscales.numpy()
    ks = fitted.kernel_scale.item()
    noise = fitted.noise_var.item()
    loss, mll, lp = loss_at(X, Y, is_cat, isl, ks, noise)
    at_opt = loss_and_grad(X, Y, is_cat, res.x)

    f0 = float(Y.max())
    P = np.ascontiguousarray(points, dtype=np.float64)
    with torch.no_grad():
        mean, var = fitted.posterior(torch.from_numpy(P))
        log_ei = acqf.logei(mean=mean.clone(), var=var.clone() + 1e-12, f0=f0)

    print(
        f"{name}: n={len(X)} d={d} loss {initial['loss']:.6f} -> {loss:.6f} "
        f"(nit {res.nit}, nfev {res.nfev}); isl {np.round(isl, 4).tolist()} "
        f"ks {ks:.5f} noise {noise:.3e}",
        file=sys.stderr,
    )
    return {
        "name": name,
        "description": description,
        "x": X.tolist(),
        "y": Y.tolist(),
        "is_categorical": is_cat.tolist(),
        "initial": initial,
        "initial_optimizer_start": start,
        "fitted": {
            "inverse_squared_lengthscales": isl.tolist(),
            "kernel_scale": ks,
            "noise_var": noise,
            "loss": loss,
            "marginal_log_likelihood": mll,
            "log_prior": lp,
            "raw_params": res.x.tolist(),
            "grad": at_opt["grad"],
            "lbfgsb_nit": int(res.nit),
            "lbfgsb_nfev": int(res.nfev),
            "lbfgsb_message": str(res.message),
        },
        "points": {
            "x": P.tolist(),
            "threshold": f0,
            "mean": mean.numpy().tolist(),
            "var": var.numpy().tolist(),
            "log_ei": log_ei.numpy().tolist(),
        },
    }


def rosenbrock(z):
    return float(np.sum(100.0 * (z[1:] - z[:-1] ** 2) ** 2 + (1.0 - z[:-1]) ** 2))


def cases():
    out = []

    # (a) 3-D continuous, 15 points: shifted sphere plus a sine.
    rng = np.random.RandomState(1)
    X = rng.uniform(size=(15, 3))
    f = lambda x: float(np.sum((x - np.array([0.3, 0.6, 0.45])) ** 2) + 0.3 * np.sin(6.0 * x[0]))
    P = np.vstack([X[:1], rng.uniform(size=(4, 3))])
    out.append(
        build_case(
            "a_continuous_3d",
            "3-D continuous, 15 uniform points; objective sum((x - [0.3, 0.6, 0.45])^2) + 0.3 sin(6 x0), minimised",
            X, [f(x) for x in X], [False] * 3, P,
        )
    )

    # (b) 4-D, column 2 categorical with 3 choices, 20 points.
    rng = np.random.RandomState(2)
    X = rng.uniform(size=(20, 4))
    X[:, 2] = rng.randint(0, 3, size=20).astype(np.float64)
    offset = np.array([0.0, 0.7, -0.4])
    f = lambda x: float((x[0] - 0.4) ** 2 + 2.0 * (x[1] - 0.2) ** 2 + (x[3] - 0.8) ** 2 + offset[int(x[2])])
    P = rng.uniform(size=(5, 4))
    P[:, 2] = [0.0, 1.0, 2.0, 0.0, 2.0]
    P[0] = X[0]
    out.append(
        build_case(
            "b_categorical_4d",
            "4-D, column 2 categorical (3 choices, index as float), 20 points; objective "
            "(x0-0.4)^2 + 2(x1-0.2)^2 + (x3-0.8)^2 + [0, 0.7, -0.4][x2], minimised",
            X, [f(x) for x in X], [False, False, True, False], P,
        )
    )

    # (c) 2-D, 6 points, nearly flat objective: after standardisation y is noise
    # without structure, which the fit explains with noise (prior/noise side).
    rng = np.random.RandomState(3)
    X = rng.uniform(size=(6, 2))
    vals = 5.0 + 1e-9 * rng.standard_normal(6)
    P = np.vstack([X[:1], rng.uniform(size=(4, 2))])
    out.append(
        build_case(
            "c_flat_2d",
            "2-D, 6 points, objective 5 + 1e-9 N(0,1) (nearly flat; standardised it is unstructured noise)",
            X, vals, [False] * 2, P,
        )
    )

    # (d) 5-D continuous, 40 points of Rosenbrock on [-5, 5] (x = 10 u - 5).
    rng = np.random.RandomState(4)
    X = rng.uniform(size=(40, 5))
    P = np.vstack([X[:1], rng.uniform(size=(4, 5))])
    out.append(
        build_case(
            "d_rosenbrock_5d",
            "5-D continuous, 40 uniform points; objective Rosenbrock of 10 u - 5 (BBOB-like range), minimised",
            X, [rosenbrock(10.0 * x - 5.0) for x in X], [False] * 5, P,
        )
    )

    # (e) exactly constant objective: the sampler's standardisation gives y = 0.
    rng = np.random.RandomState(5)
    X = rng.uniform(size=(8, 2))
    P = np.vstack([X[:1], rng.uniform(size=(4, 2))])
    out.append(
        build_case(
            "e_constant_2d",
            "2-D, 8 points, constant objective 1.0: standardised y is all 0 (std clamped at 1e-10); only the prior and "
            "log det act. The fit runs to the edge (kernel scale ~3e-6, noise ~1e-6 + 1e-10): L-BFGS-B stops where "
            "the gradient is under gtol, so an exact match of the fitted parameters is not expected; compare the loss",
            X, np.ones(8), [False] * 2, P,
        )
    )
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="hpo-core/tests/data/gp_optuna_fit.json")
    a = ap.parse_args()
    meta = {
        "optuna": optuna.__version__,
        "torch": torch.__version__,
        "scipy": scipy.__version__,
        "numpy": np.__version__,
        "python": platform.python_version(),
        "script": "bench/gp_fixture.py",
        "minimum_noise": MIN_NOISE,
        "loss": "-(marginal_log_likelihood) - log_prior; mll = -sum(log diag L) - 0.5 |L^-1 y|^2 "
        "(no n/2 log 2pi); log_prior = -sum(0.1/isl + 0.1 isl) + (2-1) log ks - ks + (1.1-1) log noise - 30 noise",
        "raw_params": "[log isl_1..log isl_d, log kernel_scale, log(noise_var - minimum_noise)]",
        "kernel": "kernel_scale * matern52(sum_i isl_i * sqd_i), sqd_i = (x_i - x'_i)^2, or [x_i != x'_i] for categorical i; "
        "matern52(s) = exp(-sqrt(5 s)) * (5/3 s + sqrt(5 s) + 1)",
        "fit": "scipy L-BFGS-B, jac=True, options={'gtol': 1e-2}, from raw [0..0, 0, log(1 - 0.99 minimum_noise)]",
        "log_ei": "acqf.logei(mean, var + 1e-12, f0=max(y))",
    }
    print(f"optuna {meta['optuna']}, torch {meta['torch']}, scipy {meta['scipy']}, numpy {meta['numpy']}", file=sys.stderr)
    doc = {"meta": meta, "cases": cases()}
    os.makedirs(os.path.dirname(a.out) or ".", exist_ok=True)
    with open(a.out, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
