//! What CMA-ES remembers between trials, and where it is kept: system
//! attributes of the study's trials, as Optuna keeps it.
//!
//! Every trial CMA-ES samples records its generation (`cma:generation`); the
//! trial whose start completed a generation (and so updated the
//! distribution) also records the whole state (`cma:optimizer`, JSON). The
//! next trial finds the newest state among the finished trials, the finished
//! trials of that state's generation, and updates when there are `popsize`
//! of them. Nothing lives only in the sampler, so a study resumed by a new
//! process continues the same search. The prefix is `sepcma:` for separable
//! CMA-ES and `cmawm:` with margin (Optuna's keys), so switching variants
//! starts afresh; with margin, each trial also keeps its raw sample
//! (`x_for_tell`).

use super::cma::Cma;
use super::margin::CmaWm;
use super::sep::SepCma;
use rand::Rng;
use serde::{Deserialize, Serialize};

/// One of the three CMA-ES variants' state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(super) enum Optimizer {
    /// Full covariance (with or without learning-rate adaptation).
    Full(Cma),
    /// Diagonal covariance.
    Separable(SepCma),
    /// Full covariance with integer margins.
    Margin(CmaWm),
}

impl Optimizer {
    pub(super) fn dim(&self) -> usize {
        match self {
            Optimizer::Full(o) => o.dim(),
            Optimizer::Separable(o) => o.dim(),
            Optimizer::Margin(o) => o.dim(),
        }
    }

    pub(super) fn popsize(&self) -> usize {
        match self {
            Optimizer::Full(o) => o.popsize(),
            Optimizer::Separable(o) => o.popsize(),
            Optimizer::Margin(o) => o.popsize(),
        }
    }

    /// `(value to evaluate, raw sample to tell)`; the same but for CMAwM.
    pub(super) fn ask<R: Rng>(&mut self, rng: &mut R) -> (Vec<f64>, Vec<f64>) {
        match self {
            Optimizer::Full(o) => {
                let x = o.ask(rng);
                (x.clone(), x)
            }
            Optimizer::Separable(o) => {
                let x = o.ask(rng);
                (x.clone(), x)
            }
            Optimizer::Margin(o) => o.ask(rng),
        }
    }

    pub(super) fn tell(&mut self, solutions: Vec<(Vec<f64>, f64)>) {
        match self {
            Optimizer::Full(o) => o.tell(solutions),
            Optimizer::Separable(o) => o.tell(solutions),
            Optimizer::Margin(o) => o.tell(solutions),
        }
    }

    pub(super) fn should_stop(&mut self) -> bool {
        match self {
            Optimizer::Full(o) => o.should_stop(),
            Optimizer::Separable(o) => o.should_stop(),
            Optimizer::Margin(o) => o.should_stop(),
        }
    }
}

/// The state stored on trials.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(super) struct State {
    /// The parameters, in coordinate order.
    pub(super) params: Vec<String>,
    /// Distribution updates since the study's first, across restarts: the
    /// generation whose trials the next update reads.
    pub(super) generation: u64,
    /// IPOP restarts so far.
    pub(super) restarts: u32,
    /// The current run.
    pub(super) optimizer: Optimizer,
}

/// The attribute keys of one variant.
#[derive(Debug, Clone)]
pub(super) struct Keys {
    pub(super) generation: String,
    pub(super) optimizer: String,
}

impl Keys {
    pub(super) fn new(prefix: &str) -> Keys {
        Keys {
            generation: format!("{prefix}generation"),
            optimizer: format!("{prefix}optimizer"),
        }
    }
}

/// The raw sample CMA-ES with margin tells (Optuna's key; the floats' bit
/// patterns, see `exact`).
pub(super) const X_FOR_TELL: &str = "x_for_tell";

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    fn floats(v: &Value) -> Vec<f64> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_f64().unwrap())
            .collect()
    }

    fn close(what: &str, got: &[f64], want: &[f64]) {
        assert_eq!(got.len(), want.len(), "{what}");
        for (g, w) in got.iter().zip(want) {
            assert!(
                (g - w).abs() <= 1e-9 * w.abs().max(1e-3),
                "{what}: {got:?} vs {want:?}"
            );
        }
    }

    /// The same solutions give the same updates as the `cmaes` library
    /// (`tests/data/cmaes_tell.json`, written by `scripts/cmaes_fixture.py`).
    #[test]
    fn every_variant_updates_as_the_cmaes_library() {
        let fixture: Value =
            serde_json::from_str(include_str!("../../../tests/data/cmaes_tell.json")).unwrap();
        for run in fixture["runs"].as_array().unwrap() {
            let variant = run["variant"].as_str().unwrap();
            let n = run["n"].as_u64().unwrap() as usize;
            let popsize = run["popsize"].as_u64().unwrap() as usize;
            let sigma = run["sigma"].as_f64().unwrap();
            let bounds = vec![(0.0, 1.0); n];
            let cma = Cma::new(
                vec![0.5; n],
                sigma,
                None,
                bounds.clone(),
                popsize,
                run["lr_adapt"] == true,
            );
            let mut opt = match variant {
                "separable" => {
                    Optimizer::Separable(SepCma::new(vec![0.5; n], sigma, bounds, popsize))
                }
                "margin" => Optimizer::Margin(CmaWm::new(cma, bounds, &floats(&run["steps"]))),
                _ => Optimizer::Full(cma),
            };
            for (g, gen) in run["generations"].as_array().unwrap().iter().enumerate() {
                let sols = gen["solutions"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|s| (floats(&s[0]), s[1].as_f64().unwrap()))
                    .collect();
                opt.tell(sols);
                let after = &gen["after"];
                let what = |x: &str| format!("{variant}, generation {g}: {x}");
                let (mean, sig, c, a) = match &opt {
                    Optimizer::Full(o) => (o.mean().to_vec(), o.sigma(), o.c().to_vec(), None),
                    Optimizer::Separable(o) => {
                        let (m, s, c) = o.parts();
                        (m.to_vec(), s, c.to_vec(), None)
                    }
                    Optimizer::Margin(o) => {
                        let (cma, a) = o.parts();
                        (
                            cma.mean().to_vec(),
                            cma.sigma(),
                            cma.c().to_vec(),
                            Some(a.to_vec()),
                        )
                    }
                };
                close(&what("mean"), &mean, &floats(&after["mean"]));
                close(&what("sigma"), &[sig], &[after["sigma"].as_f64().unwrap()]);
                close(&what("C"), &c, &floats(&after["c"]));
                if let Some(a) = a {
                    close(&what("A"), &a, &floats(&after["a"]));
                }
            }
        }
    }
}
