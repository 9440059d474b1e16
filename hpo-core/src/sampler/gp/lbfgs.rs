//! Limited-memory BFGS with optional box bounds: what fits the kernel's
//! hyperparameters (unbounded, in log space) and climbs the acquisition
//! function (inside the unit box).
//!
//! It stands in for SciPy's L-BFGS-B, which Optuna calls for both, with a
//! simpler treatment of the bounds: a variable at a bound whose gradient
//! points outward is held there for the step (the active set), the
//! quasi-Newton direction is computed on the others, and the line search
//! backtracks along the projected path `P(x + α d)` until the Armijo
//! condition holds. It stops, as SciPy's does, when the largest component of
//! the projected gradient is below `gtol` or a step lowers the function by
//! less than SciPy's default relative `ftol`, or when no step lowers it. A function value that is not finite
//! (a Cholesky factor that failed at a trial point) counts as "too far" and
//! shortens the step; nothing here panics.

/// Correction pairs kept (SciPy's default `maxcor`).
const MEMORY: usize = 10;
/// Sufficient-decrease constant of the Armijo condition.
const ARMIJO: f64 = 1e-4;
/// Backtracking steps per line search before giving up.
const MAX_BACKTRACK: usize = 40;
/// Relative decrease below which the minimisation stops: SciPy's L-BFGS-B
/// default (`factr = 1e7` times the machine epsilon).
const FTOL: f64 = 1e7 * f64::EPSILON;

/// How a minimisation ended.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Minimum {
    /// The best point found.
    pub(super) x: Vec<f64>,
    /// The function's value there.
    pub(super) f: f64,
    /// Iterations taken (gradient evaluations at accepted points).
    pub(super) iterations: usize,
    /// Whether the projected gradient fell below the tolerance.
    pub(super) converged: bool,
}

/// What [`minimize`] minimises: its value at a point, and its gradient at
/// the point last valued.
///
/// The two are apart because the line search rejects most of the points it
/// tries (the acquisition's local searches value about 2.4 points per
/// accepted step) and needs only the value to reject one: the gradient,
/// which costs as much again (a second triangular solve for the
/// acquisition, the inverse of the covariance for the kernel's fit), is
/// asked for only at points the search accepts.
pub(super) trait Objective {
    /// The value at `x`; may keep what [`Objective::gradient`] needs.
    fn value(&mut self, x: &[f64]) -> f64;
    /// The gradient at the point of the last [`Objective::value`] call,
    /// written to `g`; called only after a finite value.
    fn gradient(&mut self, g: &mut [f64]);
}

/// A function that returns its value and writes its gradient in one call,
/// as an [`Objective`] (the gradient is computed with every value).
#[cfg(test)]
pub(super) struct Joint<F> {
    f: F,
    g: Vec<f64>,
}

#[cfg(test)]
impl<F: FnMut(&[f64], &mut [f64]) -> f64> Joint<F> {
    pub(super) fn new(f: F) -> Joint<F> {
        Joint { f, g: Vec::new() }
    }
}

#[cfg(test)]
impl<F: FnMut(&[f64], &mut [f64]) -> f64> Objective for Joint<F> {
    fn value(&mut self, x: &[f64]) -> f64 {
        self.g.resize(x.len(), 0.0);
        (self.f)(x, &mut self.g)
    }

    fn gradient(&mut self, g: &mut [f64]) {
        g.copy_from_slice(&self.g);
    }
}

/// Minimises `f` from `x0`, inside `bounds` when given (one `(low, high)`
/// per variable).
pub(super) fn minimize(
    f: &mut impl Objective,
    x0: &[f64],
    bounds: Option<&[(f64, f64)]>,
    gtol: f64,
    max_iter: usize,
) -> Minimum {
    let n = x0.len();
    let project = |x: &mut [f64]| {
        if let Some(b) = bounds {
            for (v, (lo, hi)) in x.iter_mut().zip(b) {
                *v = v.clamp(*lo, *hi);
            }
        }
    };
    let mut x = x0.to_vec();
    project(&mut x);
    let mut g = vec![0.0; n];
    let mut fx = f.value(&x);
    if fx.is_finite() {
        f.gradient(&mut g);
    }
    if !fx.is_finite() || g.iter().any(|v| !v.is_finite()) {
        return Minimum {
            x,
            f: fx,
            iterations: 0,
            converged: false,
        };
    }
    let mut s_hist: Vec<Vec<f64>> = Vec::new();
    let mut y_hist: Vec<Vec<f64>> = Vec::new();
    let mut iterations = 0;
    let mut xn = vec![0.0; n];
    let mut gn = vec![0.0; n];
    while iterations < max_iter {
        // Variables held at a bound by a gradient pointing outward.
        let held: Vec<bool> = (0..n)
            .map(|i| match bounds {
                Some(b) => (x[i] <= b[i].0 && g[i] > 0.0) || (x[i] >= b[i].1 && g[i] < 0.0),
                None => false,
            })
            .collect();
        let pg = (0..n)
            .filter(|&i| !held[i])
            .map(|i| g[i].abs())
            .fold(0.0, f64::max);
        if pg < gtol {
            return Minimum {
                x,
                f: fx,
                iterations,
                converged: true,
            };
        }
        let mut d = two_loop(&g, &held, &s_hist, &y_hist);
        let mut slope: f64 = d.iter().zip(&g).map(|(a, b)| a * b).sum();
        if slope >= 0.0 || !slope.is_finite() {
            // Not a descent direction: forget the curvature, go downhill.
            s_hist.clear();
            y_hist.clear();
            d = (0..n).map(|i| if held[i] { 0.0 } else { -g[i] }).collect();
            slope = d.iter().zip(&g).map(|(a, b)| a * b).sum();
        }
        // The first step of a fresh direction is scaled to unit length.
        let mut alpha = if s_hist.is_empty() {
            let norm = d.iter().map(|v| v * v).sum::<f64>().sqrt();
            if norm > 0.0 {
                (1.0 / norm).min(1.0)
            } else {
                1.0
            }
        } else {
            1.0
        };
        let mut accepted = false;
        let mut fnew = fx;
        for _ in 0..MAX_BACKTRACK {
            for i in 0..n {
                xn[i] = x[i] + alpha * d[i];
            }
            project(&mut xn);
            let decrease: f64 = xn
                .iter()
                .zip(&x)
                .zip(&g)
                .map(|((a, b), gi)| (a - b) * gi)
                .sum();
            fnew = f.value(&xn);
            if fnew.is_finite() && fnew <= fx + ARMIJO * decrease.min(alpha * slope).min(0.0) {
                f.gradient(&mut gn);
                if gn.iter().all(|v| v.is_finite()) {
                    accepted = true;
                    break;
                }
            }
            alpha *= 0.5;
        }
        iterations += 1;
        if !accepted || fnew >= fx {
            // No step lowers the function: as close as this method gets.
            return Minimum {
                x,
                f: fx,
                iterations,
                converged: false,
            };
        }
        let small = (fx - fnew) <= FTOL * fx.abs().max(fnew.abs()).max(1.0);
        let s: Vec<f64> = xn.iter().zip(&x).map(|(a, b)| a - b).collect();
        let y: Vec<f64> = gn.iter().zip(&g).map(|(a, b)| a - b).collect();
        let sy: f64 = s.iter().zip(&y).map(|(a, b)| a * b).sum();
        if sy > 1e-10 * y.iter().map(|v| v * v).sum::<f64>().max(f64::MIN_POSITIVE) {
            if s_hist.len() == MEMORY {
                s_hist.remove(0);
                y_hist.remove(0);
            }
            s_hist.push(s);
            y_hist.push(y);
        }
        x.copy_from_slice(&xn);
        g.copy_from_slice(&gn);
        fx = fnew;
        if small {
            // As SciPy: the function no longer moves.
            return Minimum {
                x,
                f: fx,
                iterations,
                converged: true,
            };
        }
    }
    Minimum {
        x,
        f: fx,
        iterations,
        converged: false,
    }
}

/// The L-BFGS direction `-H g` on the free variables (held ones get 0).
fn two_loop(g: &[f64], held: &[bool], s_hist: &[Vec<f64>], y_hist: &[Vec<f64>]) -> Vec<f64> {
    let free = |v: &[f64]| -> Vec<f64> {
        v.iter()
            .zip(held)
            .map(|(x, h)| if *h { 0.0 } else { *x })
            .collect()
    };
    let dot = |a: &[f64], b: &[f64]| -> f64 { a.iter().zip(b).map(|(x, y)| x * y).sum() };
    let mut q = free(g);
    let k = s_hist.len();
    let mut alphas = vec![0.0; k];
    let pairs: Vec<(Vec<f64>, Vec<f64>, f64)> = s_hist
        .iter()
        .zip(y_hist)
        .map(|(s, y)| {
            let (s, y) = (free(s), free(y));
            let sy = dot(&s, &y);
            (s, y, sy)
        })
        .collect();
    for i in (0..k).rev() {
        let (s, y, sy) = &pairs[i];
        if *sy <= 0.0 {
            continue;
        }
        alphas[i] = dot(s, &q) / sy;
        for (qj, yj) in q.iter_mut().zip(y) {
            *qj -= alphas[i] * yj;
        }
    }
    let gamma = pairs
        .last()
        .filter(|(_, y, sy)| *sy > 0.0 && dot(y, y) > 0.0)
        .map_or(1.0, |(_, y, sy)| sy / dot(y, y));
    for v in q.iter_mut() {
        *v *= gamma;
    }
    for (i, (s, y, sy)) in pairs.iter().enumerate() {
        if *sy <= 0.0 {
            continue;
        }
        let beta = dot(y, &q) / sy;
        for (qj, sj) in q.iter_mut().zip(s) {
            *qj += (alphas[i] - beta) * sj;
        }
    }
    q.iter()
        .zip(held)
        .map(|(v, h)| if *h { 0.0 } else { -v })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rosenbrock(x: &[f64], g: &mut [f64]) -> f64 {
        let (a, b) = (x[0], x[1]);
        g[0] = -2.0 * (1.0 - a) - 400.0 * a * (b - a * a);
        g[1] = 200.0 * (b - a * a);
        (1.0 - a).powi(2) + 100.0 * (b - a * a).powi(2)
    }

    #[test]
    fn finds_the_minimum_of_rosenbrock() {
        let m = minimize(&mut Joint::new(rosenbrock), &[-1.2, 1.0], None, 1e-8, 500);
        assert!(m.converged, "{m:?}");
        assert!(
            (m.x[0] - 1.0).abs() < 1e-5 && (m.x[1] - 1.0).abs() < 1e-5,
            "{m:?}"
        );
    }

    /// Rosenbrock, counting what the minimiser asks for.
    struct Counted {
        values: usize,
        gradients: usize,
        at: Vec<f64>,
    }

    impl Objective for Counted {
        fn value(&mut self, x: &[f64]) -> f64 {
            self.values += 1;
            self.at = x.to_vec();
            rosenbrock(x, &mut [0.0; 2])
        }

        fn gradient(&mut self, g: &mut [f64]) {
            self.gradients += 1;
            rosenbrock(&self.at, g);
        }
    }

    #[test]
    fn the_gradient_is_asked_for_only_at_accepted_points_and_changes_nothing() {
        let mut f = Counted {
            values: 0,
            gradients: 0,
            at: Vec::new(),
        };
        let m = minimize(&mut f, &[-1.2, 1.0], None, 1e-8, 500);
        // The start, then one per accepted step.
        assert_eq!(f.gradients, m.iterations + 1, "{m:?}");
        assert!(f.values > f.gradients, "{} values", f.values);
        // The same path as with the gradient computed at every point.
        let joint = minimize(&mut Joint::new(rosenbrock), &[-1.2, 1.0], None, 1e-8, 500);
        assert_eq!(m, joint);
    }

    #[test]
    fn stops_on_a_bound_the_gradient_pushes_against() {
        // min (x - 2)² + (y + 1)² in [0, 1]²: the corner (1, 0).
        let f = |x: &[f64], g: &mut [f64]| {
            g[0] = 2.0 * (x[0] - 2.0);
            g[1] = 2.0 * (x[1] + 1.0);
            (x[0] - 2.0).powi(2) + (x[1] + 1.0).powi(2)
        };
        let bounds = [(0.0, 1.0), (0.0, 1.0)];
        let m = minimize(&mut Joint::new(f), &[0.3, 0.6], Some(&bounds), 1e-9, 100);
        assert!(m.converged, "{m:?}");
        assert_eq!(m.x, vec![1.0, 0.0]);
        // One coordinate free inside the box: (x - 0.25)² + (y + 1)².
        let f = |x: &[f64], g: &mut [f64]| {
            g[0] = 2.0 * (x[0] - 0.25);
            g[1] = 2.0 * (x[1] + 1.0);
            (x[0] - 0.25).powi(2) + (x[1] + 1.0).powi(2)
        };
        let m = minimize(&mut Joint::new(f), &[0.9, 0.6], Some(&bounds), 1e-9, 100);
        assert!((m.x[0] - 0.25).abs() < 1e-8 && m.x[1] == 0.0, "{m:?}");
    }

    #[test]
    fn a_function_that_is_not_finite_everywhere_is_survived() {
        // log(x) - x/2 ... minimised at x = 2, infinite for x <= 0.
        let f = |x: &[f64], g: &mut [f64]| {
            if x[0] <= 0.0 {
                g[0] = f64::NAN;
                return f64::INFINITY;
            }
            g[0] = 1.0 / 2.0 - 1.0 / x[0];
            x[0] / 2.0 - x[0].ln()
        };
        let m = minimize(&mut Joint::new(f), &[0.05], None, 1e-10, 200);
        assert!((m.x[0] - 2.0).abs() < 1e-6, "{m:?}");
        // Not finite at the start: returned as is.
        let m = minimize(&mut Joint::new(f), &[-1.0], None, 1e-10, 200);
        assert_eq!(m.iterations, 0);
        assert!(!m.converged);
    }
}
