//! The 24 noiseless BBOB functions (f1..f24), benchmark support outside the
//! library.
//!
//! The definitions are those of Hansen, Finck, Ros and Auger (2009),
//! "Real-Parameter Black-Box Optimization Benchmarking 2009: Noiseless
//! Functions Definitions", as COCO implements them (numbbo/coco,
//! BSD-3-Clause). This port follows COCO's `code-experiments/src/`:
//! `suite_bbob_legacy_code.c` (the legacy uniform and Gaussian generators,
//! `bbob2009_compute_xopt`, `bbob2009_compute_fopt`,
//! `bbob2009_compute_rotation`), `suite_bbob.c` (the instance seeds),
//! the `transform_vars_*.c` and `transform_obj_*.c` transformations (T_osz,
//! T_asy, Lambda^alpha, the boundary penalty f_pen) and each function's
//! `f_*.c`. It is written from those definitions, not copied; where COCO
//! departs from the 2009 document (f4's optimum, f5's boundary handling, f20's
//! optimum) it follows COCO, because its values are the reference.
//!
//! `hpo-core/tests/it/bbob.rs` checks every function against COCO's own values
//! (`hpo-core/tests/data/bbob.json`, written with `cocoex` by
//! `hpo-core/scripts/bbob_fixture.py`): instances 1-3, dimensions 5 and 10.
//!
//! The file is included with `#[path]` by the programs that need it (the
//! integration tests, benchmarks), so it is compiled in one place and stays
//! out of hpo-core's public API.

use std::f64::consts::PI;

/// The lower bound of the search domain in every coordinate: BBOB searches
/// `[LOWER, UPPER]^d`.
pub const LOWER: f64 = -5.0;

/// The upper bound of the search domain in every coordinate.
pub const UPPER: f64 = 5.0;

/// The largest dimension the legacy BBOB code supports
/// (`SUITE_BBOB2009_MAX_DIM` in COCO).
pub const MAX_DIM: usize = 40;

/// A square matrix, by rows (`m[row][column]`).
type Matrix = Vec<Vec<f64>>;

/// One BBOB problem: a function, an instance and a dimension, with its
/// instance data (optimum, offset, rotations) drawn once by COCO's legacy
/// generators.
#[derive(Debug, Clone)]
pub struct Bbob {
    function: u8,
    instance: u32,
    dim: usize,
    /// The optimum, as COCO reports it (`best_parameter`).
    x_opt: Vec<f64>,
    /// The value at the optimum (COCO's `fopt`).
    f_opt: f64,
    /// The shift the variable transformations subtract (COCO's `xopt`);
    /// equal to `x_opt` except where the function's own transformations
    /// move the optimum (f4, f5, f8, f9, f19, f20, f24).
    shift: Vec<f64>,
    /// The first rotation (R in the definitions).
    r: Matrix,
    /// The linear map applied after the nonlinear transformations (Q, or
    /// R Lambda Q), by function.
    m: Matrix,
    /// f21 and f22's peaks.
    peaks: Option<Peaks>,
}

/// The local optima of Gallagher's functions (f21, f22).
#[derive(Debug, Clone)]
struct Peaks {
    /// The rotation of the search space.
    rotation: Matrix,
    /// `local[coordinate][peak]`: the peaks' locations, in rotated coordinates.
    local: Matrix,
    /// `scales[peak][coordinate]`: the diagonal of each peak's conditioning.
    scales: Matrix,
    /// Each peak's height.
    heights: Vec<f64>,
}

impl Bbob {
    /// The problem of `function` (1..=24), `instance` (1 and above, COCO's
    /// instance number) in `dim` dimensions (2..=[`MAX_DIM`]).
    ///
    /// # Errors
    ///
    /// A message naming the bad argument when one is out of range.
    pub fn new(function: u8, instance: u32, dim: usize) -> Result<Bbob, String> {
        if !(1..=24).contains(&function) {
            return Err(format!(
                "BBOB function {function} does not exist: give 1 to 24"
            ));
        }
        if instance == 0 {
            return Err("BBOB instance 0 does not exist: instances start at 1".to_string());
        }
        if !(2..=MAX_DIM).contains(&dim) {
            return Err(format!(
                "BBOB dimension {dim} is out of range: give 2 to {MAX_DIM}"
            ));
        }
        let inst = i64::from(instance);
        // suite_bbob.c: the seed of function f, instance i is f + 10000 i,
        // except f4 (which uses f3's) and f18 (f17's).
        let seed_function = match function {
            4 => 3,
            18 => 17,
            f => i64::from(f),
        };
        let rseed = seed_function + 10_000 * inst;
        let f_opt = compute_fopt(function, inst);
        let d = dim;
        let empty = Matrix::new();
        let mut problem = Bbob {
            function,
            instance,
            dim,
            x_opt: Vec::new(),
            f_opt,
            shift: compute_xopt(rseed, d),
            r: empty.clone(),
            m: empty,
            peaks: None,
        };
        match function {
            4 => {
                // In the legacy code (not the 2009 document): the odd
                // coordinates (1-based) of the optimum are positive.
                for v in problem.shift.iter_mut().step_by(2) {
                    *v = v.abs();
                }
            }
            5 => {
                problem.x_opt = problem
                    .shift
                    .iter()
                    .map(|&v| if v < 0.0 { LOWER } else { UPPER })
                    .collect();
            }
            6 | 13 => {
                problem.m = r_lambda_q(rseed, d, 10.0);
            }
            7 | 17 | 18 => {
                problem.r = compute_rotation(rseed + 1_000_000, d);
                let q = compute_rotation(rseed, d);
                // Lambda Q, Lambda = diag(sqrt(cond)^(i / (d - 1))), written
                // as each f_*.c writes it.
                problem.m = q
                    .iter()
                    .enumerate()
                    .map(|(i, row)| {
                        let c = match function {
                            7 => 10.0_f64.powf(ratio(i, d)).sqrt(),
                            17 => 10.0_f64.sqrt().powf(ratio(i, d)),
                            _ => 1000.0_f64.sqrt().powf(ratio(i, d)),
                        };
                        row.iter().map(|&v| c * v).collect()
                    })
                    .collect();
            }
            8 => {
                for v in &mut problem.shift {
                    *v *= 0.75;
                }
            }
            9 | 19 => {
                let rot = compute_rotation(rseed, d);
                let factor = rosenbrock_factor(d);
                problem.x_opt = (0..d)
                    .map(|column| {
                        let sum: f64 = rot.iter().map(|row| row[column]).sum();
                        sum / (2.0 * factor)
                    })
                    .collect();
                problem.m = rot
                    .into_iter()
                    .map(|row| row.into_iter().map(|v| factor * v).collect())
                    .collect();
            }
            10 | 11 | 14 => {
                problem.r = compute_rotation(rseed + 1_000_000, d);
            }
            12 => {
                problem.shift = compute_xopt(rseed + 1_000_000, d);
                problem.r = compute_rotation(rseed + 1_000_000, d);
            }
            15 => {
                problem.r = compute_rotation(rseed + 1_000_000, d);
                problem.m = r_lambda_q(rseed, d, 10.0);
            }
            16 => {
                problem.r = compute_rotation(rseed + 1_000_000, d);
                problem.m = r_lambda_q(rseed, d, 0.01);
            }
            20 => {
                let u = unif(d, rseed);
                // ±half by the sign of u - 0.5.
                let signed = |half: f64| -> Vec<f64> {
                    u.iter()
                        .map(|&v| if v - 0.5 < 0.0 { -half } else { half })
                        .collect()
                };
                problem.shift = signed(0.5 * 4.2096874637);
                // COCO's best_parameter for f20 (transform_vars_x_hat.c)
                // carries slightly different digits than the shift.
                problem.x_opt = signed(0.5 * 4.2096874633);
            }
            21 | 22 => {
                let (peaks, x_opt) = gallagher(rseed, d, if function == 21 { 101 } else { 21 });
                problem.peaks = Some(peaks);
                problem.x_opt = x_opt;
            }
            23 => {
                problem.m = r_lambda_q(rseed, d, 100.0);
            }
            24 => {
                problem.r = compute_rotation(rseed + 1_000_000, d);
                let q = compute_rotation(rseed, d);
                // Lambda^100 Q.
                problem.m = q
                    .iter()
                    .enumerate()
                    .map(|(i, row)| {
                        let c = 100.0_f64.sqrt().powf(ratio(i, d));
                        row.iter().map(|&v| c * v).collect()
                    })
                    .collect();
                let g = gauss(d, rseed);
                problem.shift = g
                    .iter()
                    .map(|&v| if v < 0.0 { -1.25 } else { 1.25 })
                    .collect();
            }
            _ => {}
        }
        if problem.x_opt.is_empty() {
            problem.x_opt = problem.shift.clone();
        }
        Ok(problem)
    }

    /// The function number (1..=24).
    pub fn function(&self) -> u8 {
        self.function
    }

    /// The instance number.
    pub fn instance(&self) -> u32 {
        self.instance
    }

    /// The dimension.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// The global optimum (inside the search domain).
    pub fn x_opt(&self) -> &[f64] {
        &self.x_opt
    }

    /// The value at the global optimum.
    pub fn f_opt(&self) -> f64 {
        self.f_opt
    }

    /// The search domain: `(LOWER, UPPER)` in every coordinate.
    pub fn domain(&self) -> (f64, f64) {
        (LOWER, UPPER)
    }

    /// The function's value at `x`; NaN when `x` has the wrong length or
    /// holds a NaN.
    pub fn eval(&self, x: &[f64]) -> f64 {
        if x.len() != self.dim || x.iter().any(|v| v.is_nan()) {
            return f64::NAN;
        }
        let d = self.dim;
        let f_opt = self.f_opt;
        let shifted = || -> Vec<f64> { x.iter().zip(&self.shift).map(|(a, b)| a - b).collect() };
        match self.function {
            1 => sphere(&shifted()) + f_opt,
            2 => ellipsoid(&t_osz(&shifted())) + f_opt,
            3 => {
                let z = conditioning(&t_asy(&t_osz(&shifted()), 0.2), 10.0);
                rastrigin(&z) + f_opt
            }
            4 => {
                let z = bueche_rastrigin_scaling(&t_osz(&shifted()));
                rastrigin(&z) + f_opt + 100.0 * penalty(x)
            }
            5 => linear_slope(x, &self.x_opt) + f_opt,
            6 => {
                let z = mat_vec(&self.m, &shifted());
                let raw: f64 = z
                    .iter()
                    .zip(&self.shift)
                    .map(|(&zi, &oi)| {
                        if oi * zi > 0.0 {
                            100.0 * 100.0 * zi * zi
                        } else {
                            zi * zi
                        }
                    })
                    .sum();
                t_osz_scalar(raw).powf(0.9) + f_opt
            }
            7 => self.step_ellipsoid(x),
            8 => {
                let factor = rosenbrock_factor(d);
                let z: Vec<f64> = shifted().iter().map(|&v| factor * v + 1.0).collect();
                rosenbrock(&z) + f_opt
            }
            9 => {
                let z: Vec<f64> = mat_vec(&self.m, x).iter().map(|&v| v + 0.5).collect();
                rosenbrock(&z) + f_opt
            }
            10 => ellipsoid(&t_osz(&mat_vec(&self.r, &shifted()))) + f_opt,
            11 => {
                let z = t_osz(&mat_vec(&self.r, &shifted()));
                let rest: f64 = z.iter().skip(1).map(|v| v * v).sum();
                1.0e6 * z[0] * z[0] + rest + f_opt
            }
            12 => {
                let z = mat_vec(&self.r, &t_asy(&mat_vec(&self.r, &shifted()), 0.5));
                let rest: f64 = z.iter().skip(1).map(|v| 1.0e6 * v * v).sum();
                z[0] * z[0] + rest + f_opt
            }
            13 => {
                let z = mat_vec(&self.m, &shifted());
                let rest: f64 = z.iter().skip(1).map(|v| v * v).sum();
                100.0 * rest.sqrt() + z[0] * z[0] + f_opt
            }
            14 => {
                let z = mat_vec(&self.r, &shifted());
                let sum: f64 = z
                    .iter()
                    .enumerate()
                    .map(|(i, v)| v.abs().powf(2.0 + 4.0 * ratio(i, d)))
                    .sum();
                sum.sqrt() + f_opt
            }
            15 => {
                let y = t_asy(&t_osz(&mat_vec(&self.r, &shifted())), 0.2);
                rastrigin(&mat_vec(&self.m, &y)) + f_opt
            }
            16 => {
                let z = mat_vec(&self.m, &t_osz(&mat_vec(&self.r, &shifted())));
                weierstrass(&z) + f_opt + 10.0 / d as f64 * penalty(x)
            }
            17 | 18 => {
                let z = mat_vec(&self.m, &t_asy(&mat_vec(&self.r, &shifted()), 0.5));
                schaffers(&z) + f_opt + 10.0 * penalty(x)
            }
            19 => {
                let z: Vec<f64> = mat_vec(&self.m, x).iter().map(|&v| v + 0.5).collect();
                griewank_rosenbrock(&z) + f_opt
            }
            20 => self.schwefel(x),
            21 | 22 => match &self.peaks {
                Some(peaks) => peaks.eval(x) + f_opt,
                None => f64::NAN,
            },
            23 => {
                let z = mat_vec(&self.m, &shifted());
                katsuura(&z) + f_opt + penalty(x)
            }
            24 => self.lunacek(x),
            _ => f64::NAN,
        }
    }

    /// f7, the step ellipsoid (`f_step_ellipsoid.c`: not a composition of
    /// generic transformations).
    fn step_ellipsoid(&self, x: &[f64]) -> f64 {
        let d = self.dim;
        let z_hat = mat_vec(&self.m, &sub(x, &self.shift));
        let first = z_hat[0];
        let z_tilde: Vec<f64> = z_hat
            .iter()
            .map(|&v| {
                if v.abs() > 0.5 {
                    round(v)
                } else {
                    round(10.0 * v) / 10.0
                }
            })
            .collect();
        let z = mat_vec(&self.r, &z_tilde);
        let sum: f64 = z
            .iter()
            .enumerate()
            .map(|(i, v)| 100.0_f64.powf(ratio(i, d)) * v * v)
            .sum();
        0.1 * (first.abs() * 1.0e-4).max(sum) + penalty(x) + self.f_opt
    }

    /// f20, Schwefel's x sin(sqrt(|x|)) (`f_schwefel.c` and its
    /// `transform_vars_x_hat.c`, `transform_vars_z_hat.c`).
    fn schwefel(&self, x: &[f64]) -> f64 {
        let d = self.dim;
        // x_hat = 2 sign(x_opt) x
        let x_hat: Vec<f64> = x
            .iter()
            .zip(&self.shift)
            .map(|(&v, &o)| 2.0 * if o < 0.0 { -v } else { v })
            .collect();
        let two_abs: Vec<f64> = self.shift.iter().map(|o| 2.0 * o.abs()).collect();
        let mut z_hat = x_hat.clone();
        for i in 1..d {
            z_hat[i] = x_hat[i] + 0.25 * (x_hat[i - 1] - two_abs[i - 1]);
        }
        let z: Vec<f64> = (0..d)
            .map(|i| {
                let lambda = 10.0_f64.sqrt().powf(ratio(i, d));
                100.0 * (lambda * (z_hat[i] - two_abs[i]) + two_abs[i])
            })
            .collect();
        let pen: f64 = z
            .iter()
            .map(|v| {
                let t = v.abs() - 500.0;
                if t > 0.0 {
                    t * t
                } else {
                    0.0
                }
            })
            .sum();
        let sum: f64 = z.iter().map(|v| v * v.abs().sqrt().sin()).sum();
        0.01 * (pen + 418.982_887_272_433_9 - sum / d as f64) + self.f_opt
    }

    /// f24, Lunacek's bi-Rastrigin (`f_lunacek_bi_rastrigin.c`).
    fn lunacek(&self, x: &[f64]) -> f64 {
        let d = self.dim;
        let n = d as f64;
        let mu0 = 2.5;
        let s = 1.0 - 0.5 / ((n + 20.0).sqrt() - 4.1);
        let mu1 = -((mu0 * mu0 - 1.0) / s).sqrt();
        let x_hat: Vec<f64> = x
            .iter()
            .zip(&self.shift)
            .map(|(&v, &o)| if o < 0.0 { -2.0 * v } else { 2.0 * v })
            .collect();
        let centred: Vec<f64> = x_hat.iter().map(|v| v - mu0).collect();
        let z = mat_vec(&self.r, &mat_vec(&self.m, &centred));
        let sum1: f64 = x_hat.iter().map(|v| (v - mu0) * (v - mu0)).sum();
        let sum2: f64 = x_hat.iter().map(|v| (v - mu1) * (v - mu1)).sum();
        let sum3: f64 = z.iter().map(|v| (2.0 * PI * v).cos()).sum();
        sum1.min(n + s * sum2) + 10.0 * (n - sum3) + 1.0e4 * penalty(x) + self.f_opt
    }
}

impl Peaks {
    /// Gallagher's function before the offset (`f_gallagher_raw`).
    fn eval(&self, x: &[f64]) -> f64 {
        let n = x.len() as f64;
        let fac = -0.5 / n;
        let rotated = mat_vec(&self.rotation, x);
        let mut best = 0.0_f64;
        for (peak, (scales, height)) in self.scales.iter().zip(&self.heights).enumerate() {
            let dist: f64 = rotated
                .iter()
                .zip(scales)
                .zip(&self.local)
                .map(|((&v, &s), local)| {
                    let t = v - local[peak];
                    s * t * t
                })
                .sum();
            best = best.max(height * (fac * dist).exp());
        }
        let f = t_osz_scalar(10.0 - best);
        f * f + penalty(x)
    }
}

/// The peaks of Gallagher's function with `count` peaks (101 for f21, 21 for
/// f22), and the global optimum.
fn gallagher(rseed: i64, d: usize, count: usize) -> (Peaks, Vec<f64>) {
    let max_condition = 1000.0_f64;
    let (first_condition, b, c) = if count == 101 {
        (max_condition.sqrt(), 10.0, 5.0)
    } else {
        (max_condition, 9.8, 4.9)
    };
    let rotation = compute_rotation(rseed, d);
    // The conditions of peaks 1.. are a random permutation of
    // 1000^(k / (count - 2)).
    let order = argsort(&unif(count - 1, rseed));
    let mut conditions = vec![first_condition];
    let mut heights = vec![10.0];
    for i in 1..count {
        let k = order[i - 1] as f64;
        conditions.push(max_condition.powf(k / (count as f64 - 2.0)));
        heights.push((i as f64 - 1.0) / (count as f64 - 2.0) * (9.1 - 1.1) + 1.1);
    }
    let scales: Matrix = conditions
        .iter()
        .enumerate()
        .map(|(i, &cond)| {
            let order = argsort(&unif(d, rseed + 1000 * i as i64));
            order
                .iter()
                .map(|&k| cond.powf(k as f64 / (d as f64 - 1.0) - 0.5))
                .collect()
        })
        .collect();
    let u = unif(d * count, rseed);
    let x_opt: Vec<f64> = (0..d).map(|i| 0.8 * (b * u[i] - c)).collect();
    let local: Matrix = rotation
        .iter()
        .map(|row| {
            (0..count)
                .map(|j| {
                    let v: f64 = row
                        .iter()
                        .enumerate()
                        .map(|(k, &r)| r * (b * u[j * d + k] - c))
                        .sum();
                    if j == 0 {
                        v * 0.8
                    } else {
                        v
                    }
                })
                .collect()
        })
        .collect();
    (
        Peaks {
            rotation,
            local,
            scales,
            heights,
        },
        x_opt,
    )
}

/// The indices that sort `values` ascending.
fn argsort(values: &[f64]) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..values.len()).collect();
    idx.sort_by(|&a, &b| values[a].total_cmp(&values[b]));
    idx
}

// ---- COCO's legacy generators (suite_bbob_legacy_code.c) ----

/// One step of the legacy Park-Miller generator (Schrage's method).
fn park_miller(seed: i64) -> i64 {
    let tmp = (seed as f64 / 127_773.0).floor() as i64;
    let next = 16_807 * (seed - tmp * 127_773) - 2_836 * tmp;
    if next < 0 {
        next + 2_147_483_647
    } else {
        next
    }
}

/// `n` uniform numbers in (0, 1) from `seed` (`bbob2009_unif`): Park-Miller
/// with a 32-entry shuffle table.
fn unif(n: usize, seed: i64) -> Vec<f64> {
    let mut seed = seed.abs().max(1);
    let mut table = [0_i64; 32];
    for i in (0..40).rev() {
        seed = park_miller(seed);
        if i < 32 {
            table[i] = seed;
        }
    }
    let mut current = table[0];
    (0..n)
        .map(|_| {
            seed = park_miller(seed);
            let slot = ((current as f64 / 67_108_865.0).floor() as usize).min(31);
            current = table[slot];
            table[slot] = seed;
            let r = current as f64 / 2.147_483_647e9;
            if r == 0.0 {
                1e-99
            } else {
                r
            }
        })
        .collect()
}

/// `n` standard Gaussian numbers from `seed` (`bbob2009_gauss`): Box-Muller
/// over `2n` uniform numbers.
fn gauss(n: usize, seed: i64) -> Vec<f64> {
    let u = unif(2 * n, seed);
    (0..n)
        .map(|i| {
            let g = (-2.0 * u[i].ln()).sqrt() * (2.0 * PI * u[n + i]).cos();
            if g == 0.0 {
                1e-99
            } else {
                g
            }
        })
        .collect()
}

/// A random rotation (`bbob2009_compute_rotation`): Gram-Schmidt over the
/// columns of a matrix of Gaussian numbers, filled column by column.
fn compute_rotation(seed: i64, d: usize) -> Matrix {
    let g = gauss(d * d, seed);
    let mut b: Matrix = (0..d)
        .map(|i| (0..d).map(|j| g[j * d + i]).collect())
        .collect();
    for i in 0..d {
        for j in 0..i {
            let prod: f64 = (0..d).map(|k| b[k][i] * b[k][j]).sum();
            for row in b.iter_mut() {
                row[i] -= prod * row[j];
            }
        }
        let norm: f64 = (0..d).map(|k| b[k][i] * b[k][i]).sum::<f64>().sqrt();
        for row in b.iter_mut() {
            row[i] /= norm;
        }
    }
    b
}

/// The optimum of most functions (`bbob2009_compute_xopt`): uniform in
/// [-4, 4) on a 8e-4 grid, never exactly 0.
fn compute_xopt(seed: i64, d: usize) -> Vec<f64> {
    unif(d, seed)
        .into_iter()
        .map(|u| {
            let v = 8.0 * (1e4 * u).floor() / 1e4 - 4.0;
            if v == 0.0 {
                -1e-5
            } else {
                v
            }
        })
        .collect()
}

/// The offset f_opt (`bbob2009_compute_fopt`): a Cauchy-like draw rounded to
/// two decimals, clipped to [-1000, 1000]. f4 and f18 use f3's and f17's.
fn compute_fopt(function: u8, instance: i64) -> f64 {
    let rseed = match function {
        4 => 3,
        18 => 17,
        f => i64::from(f),
    };
    let rrseed = rseed + 10_000 * instance;
    let g1 = gauss(1, rrseed)[0];
    let g2 = gauss(1, rrseed + 1)[0];
    (round(100.0 * 100.0 * g1 / g2) / 100.0).clamp(-1000.0, 1000.0)
}

/// Rounding half up, as the legacy code (`floor(x + 0.5)`).
fn round(x: f64) -> f64 {
    (x + 0.5).floor()
}

// ---- transformations ----

/// `i / (d - 1)`, the exponent of the Lambda and conditioning diagonals.
fn ratio(i: usize, d: usize) -> f64 {
    i as f64 / (d as f64 - 1.0)
}

/// `a - b`, elementwise.
fn sub(a: &[f64], b: &[f64]) -> Vec<f64> {
    a.iter().zip(b).map(|(x, y)| x - y).collect()
}

/// `m x`.
fn mat_vec(m: &Matrix, x: &[f64]) -> Vec<f64> {
    m.iter()
        .map(|row| row.iter().zip(x).map(|(a, b)| a * b).sum())
        .collect()
}

/// `R Lambda^cond Q`, R the rotation seeded `rseed + 1000000` and Q the one
/// seeded `rseed`, Lambda = diag(sqrt(cond)^(k / (d - 1))).
fn r_lambda_q(rseed: i64, d: usize, cond: f64) -> Matrix {
    let r = compute_rotation(rseed + 1_000_000, d);
    let q = compute_rotation(rseed, d);
    let lambda: Vec<f64> = (0..d).map(|k| cond.sqrt().powf(ratio(k, d))).collect();
    (0..d)
        .map(|i| {
            (0..d)
                .map(|j| (0..d).map(|k| r[i][k] * lambda[k] * q[k][j]).sum())
                .collect()
        })
        .collect()
}

/// T_osz on one value: the oscillation of Hansen et al. (2009).
fn t_osz_scalar(v: f64) -> f64 {
    if v > 0.0 {
        let t = v.ln() / 0.1;
        (t + 0.49 * (t.sin() + (0.79 * t).sin())).exp().powf(0.1)
    } else if v < 0.0 {
        let t = (-v).ln() / 0.1;
        -(t + 0.49 * ((0.55 * t).sin() + (0.31 * t).sin()))
            .exp()
            .powf(0.1)
    } else {
        v
    }
}

/// T_osz on every coordinate.
fn t_osz(x: &[f64]) -> Vec<f64> {
    x.iter().map(|&v| t_osz_scalar(v)).collect()
}

/// T_asy^beta: positive coordinates raised to `1 + beta i / (d - 1) sqrt(x_i)`.
fn t_asy(x: &[f64], beta: f64) -> Vec<f64> {
    let d = x.len();
    x.iter()
        .enumerate()
        .map(|(i, &v)| {
            if v > 0.0 {
                v.powf(1.0 + beta * i as f64 / (d as f64 - 1.0) * v.sqrt())
            } else {
                v
            }
        })
        .collect()
}

/// Lambda^alpha: coordinate i times `alpha^(i / (2 (d - 1)))`.
fn conditioning(x: &[f64], alpha: f64) -> Vec<f64> {
    let d = x.len();
    x.iter()
        .enumerate()
        .map(|(i, &v)| alpha.powf(0.5 * ratio(i, d)) * v)
        .collect()
}

/// f4's s_i scaling: `sqrt(10)^(i / (d - 1))`, times 10 for positive
/// coordinates at even (0-based) indices.
fn bueche_rastrigin_scaling(x: &[f64]) -> Vec<f64> {
    let d = x.len();
    x.iter()
        .enumerate()
        .map(|(i, &v)| {
            let mut factor = 10.0_f64.sqrt().powf(ratio(i, d));
            if v > 0.0 && i % 2 == 0 {
                factor *= 10.0;
            }
            factor * v
        })
        .collect()
}

/// f_pen: the squared distance outside [-5, 5]^d.
fn penalty(x: &[f64]) -> f64 {
    x.iter()
        .map(|&v| {
            let over = v - UPPER;
            let under = LOWER - v;
            if over > 0.0 {
                over * over
            } else if under > 0.0 {
                under * under
            } else {
                0.0
            }
        })
        .sum()
}

/// `max(1, sqrt(d) / 8)`, the scaling of the Rosenbrock functions.
fn rosenbrock_factor(d: usize) -> f64 {
    1.0_f64.max((d as f64).sqrt() / 8.0)
}

// ---- the raw functions ----

/// f1's core: the sum of squares.
fn sphere(z: &[f64]) -> f64 {
    z.iter().map(|v| v * v).sum()
}

/// f2 and f10's core: `sum 10^(6 i / (d - 1)) z_i^2`.
fn ellipsoid(z: &[f64]) -> f64 {
    let d = z.len();
    z.iter()
        .enumerate()
        .map(|(i, v)| {
            if i == 0 {
                v * v
            } else {
                1.0e6_f64.powf(ratio(i, d)) * v * v
            }
        })
        .sum()
}

/// f3, f4 and f15's core: `10 (d - sum cos(2 pi z_i)) + sum z_i^2`.
fn rastrigin(z: &[f64]) -> f64 {
    let cos: f64 = z.iter().map(|v| (2.0 * PI * v).cos()).sum();
    let sq: f64 = z.iter().map(|v| v * v).sum();
    10.0 * (z.len() as f64 - cos) + sq
}

/// f5 with COCO's boundary handling: beyond the optimum's face of the
/// domain the slope is flat.
fn linear_slope(x: &[f64], x_opt: &[f64]) -> f64 {
    let d = x.len();
    x.iter()
        .zip(x_opt)
        .enumerate()
        .map(|(i, (&v, &o))| {
            let magnitude = 100.0_f64.sqrt().powf(ratio(i, d));
            let s = if o > 0.0 { magnitude } else { -magnitude };
            if v * o < 25.0 {
                5.0 * s.abs() - s * v
            } else {
                5.0 * s.abs() - s * o
            }
        })
        .sum()
}

/// f8 and f9's core: Rosenbrock's banana, optimum at all ones.
fn rosenbrock(z: &[f64]) -> f64 {
    let (mut s1, mut s2) = (0.0, 0.0);
    for w in z.windows(2) {
        let a = w[0] * w[0] - w[1];
        s1 += a * a;
        let b = w[0] - 1.0;
        s2 += b * b;
    }
    100.0 * s1 + s2
}

/// f16's core: Weierstrass' sum of 12 cosines per coordinate, cubed.
fn weierstrass(z: &[f64]) -> f64 {
    let ak: Vec<f64> = (0..12).map(|k| 0.5_f64.powf(k as f64)).collect();
    let bk: Vec<f64> = (0..12).map(|k| 3.0_f64.powf(k as f64)).collect();
    let f0: f64 = ak
        .iter()
        .zip(&bk)
        .map(|(a, b)| a * (2.0 * PI * b * 0.5).cos())
        .sum();
    let mut sum = 0.0;
    for v in z {
        for (a, b) in ak.iter().zip(&bk) {
            sum += (2.0 * PI * (v + 0.5) * b).cos() * a;
        }
    }
    10.0 * (sum / z.len() as f64 - f0).powf(3.0)
}

/// f17 and f18's core: Schaffer's F7 over consecutive pairs.
fn schaffers(z: &[f64]) -> f64 {
    let sum: f64 = z
        .windows(2)
        .map(|w| {
            let s = w[0] * w[0] + w[1] * w[1];
            s.powf(0.25) * (1.0 + (50.0 * s.powf(0.1)).sin().powf(2.0))
        })
        .sum();
    (sum / (z.len() as f64 - 1.0)).powf(2.0)
}

/// f19's core: Griewank's composition with Rosenbrock's function.
fn griewank_rosenbrock(z: &[f64]) -> f64 {
    let sum: f64 = z
        .windows(2)
        .map(|w| {
            let c1 = w[0] * w[0] - w[1];
            let c2 = 1.0 - w[0];
            let s = 100.0 * c1 * c1 + c2 * c2;
            s / 4000.0 - s.cos()
        })
        .sum();
    10.0 + 10.0 * sum / (z.len() as f64 - 1.0)
}

/// f23's core: Katsuura's product of 32-term sawtooth sums.
fn katsuura(z: &[f64]) -> f64 {
    let n = z.len() as f64;
    let mut product = 1.0;
    for (i, &v) in z.iter().enumerate() {
        let mut sum = 0.0;
        for j in 1..33 {
            let p = 2.0_f64.powf(f64::from(j));
            sum += (p * v - round(p * v)).abs() / p;
        }
        product *= 1.0 + (i as f64 + 1.0) * sum;
    }
    10.0 / n / n * (-1.0 + product.powf(10.0 / n.powf(1.2)))
}
