//! The BBOB functions of `benches/support/bbob.rs` against COCO's own values
//! (`tests/data/bbob.json`, written with `cocoex` 2.8.2 by
//! `scripts/bbob_fixture.py`): for f1..f24, instances 1-3, dimensions 5 and
//! 10, the optimum, the value there and the values at six points (four
//! uniform in the domain, two near the optimum).

use crate::support::bbob::{self as support, Bbob};
use serde_json::Value;

/// Relative tolerance on every value, absolute below magnitude 1.
const TOL: f64 = 1e-9;

/// The error of `got` against `want`: relative, or absolute near zero.
fn error(got: f64, want: f64) -> f64 {
    (got - want).abs() / want.abs().max(1.0)
}

fn fixture() -> Vec<Value> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/bbob.json");
    let text = std::fs::read_to_string(path).unwrap();
    let json: Value = serde_json::from_str(&text).unwrap();
    json["problems"].as_array().unwrap().clone()
}

fn floats(v: &Value) -> Vec<f64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect()
}

/// The worst error per function over the fixture's instances and
/// dimensions: (function, worst error on x_opt, on f_opt, on the values).
fn worst_errors(functions: std::ops::RangeInclusive<u8>) -> Vec<(u8, f64, f64, f64)> {
    let problems = fixture();
    let mut out = Vec::new();
    for function in functions {
        let (mut ex, mut ef, mut ev) = (0.0_f64, 0.0_f64, 0.0_f64);
        let mut seen = 0;
        for p in &problems {
            if p["function"].as_u64().unwrap() != u64::from(function) {
                continue;
            }
            seen += 1;
            let instance = u32::try_from(p["instance"].as_u64().unwrap()).unwrap();
            let dim = usize::try_from(p["dimension"].as_u64().unwrap()).unwrap();
            let f = Bbob::new(function, instance, dim).unwrap();
            assert_eq!(
                (f.function(), f.instance(), f.dim()),
                (function, instance, dim)
            );
            let x_opt = floats(&p["x_opt"]);
            let f_opt = p["f_opt"].as_f64().unwrap();
            assert_eq!(f.x_opt().len(), dim);
            for (a, b) in f.x_opt().iter().zip(&x_opt) {
                ex = ex.max(error(*a, *b));
            }
            // The fixture's f_opt is COCO's value at its x_opt.
            ef = ef.max(error(f.f_opt(), f_opt));
            ev = ev.max(error(f.eval(&x_opt), f_opt));
            let points = p["points"].as_array().unwrap();
            let values = floats(&p["values"]);
            assert_eq!(points.len(), values.len());
            for (x, want) in points.iter().zip(values) {
                ev = ev.max(error(f.eval(&floats(x)), want));
            }
        }
        assert_eq!(seen, 6, "f{function}: 3 instances x 2 dimensions");
        out.push((function, ex, ef, ev));
    }
    out
}

fn check(functions: std::ops::RangeInclusive<u8>) {
    let worst = worst_errors(functions);
    for (function, ex, ef, ev) in &worst {
        eprintln!("f{function}: worst error x_opt {ex:.1e}, f_opt {ef:.1e}, values {ev:.1e}");
    }
    let bad: Vec<_> = worst
        .iter()
        .filter(|(_, ex, ef, ev)| !(*ex <= TOL && *ef <= TOL && *ev <= TOL))
        .collect();
    assert!(bad.is_empty(), "beyond {TOL:e}: {bad:?}");
}

#[test]
fn separable_f1_to_f5_match_coco() {
    check(1..=5);
}

#[test]
fn moderate_f6_to_f9_match_coco() {
    check(6..=9);
}

#[test]
fn ill_conditioned_f10_to_f14_match_coco() {
    check(10..=14);
}

#[test]
fn multimodal_f15_to_f19_match_coco() {
    check(15..=19);
}

#[test]
fn weakly_structured_f20_to_f24_match_coco() {
    check(20..=24);
}

#[test]
fn bad_arguments_are_errors_and_bad_points_nan() {
    assert!(Bbob::new(0, 1, 5).is_err());
    assert!(Bbob::new(25, 1, 5).is_err());
    assert!(Bbob::new(1, 0, 5).is_err());
    assert!(Bbob::new(1, 1, 1).is_err());
    assert!(Bbob::new(1, 1, support::MAX_DIM + 1).is_err());
    let f = Bbob::new(8, 1, 5).unwrap();
    assert_eq!(f.domain(), (support::LOWER, support::UPPER));
    assert!(f.eval(&[0.0; 4]).is_nan());
    assert!(f.eval(&[0.0, 0.0, f64::NAN, 0.0, 0.0]).is_nan());
}

/// Beyond the fixture (other dimensions, instances up to 15): the optimum
/// lies in the domain, the value there is f_opt, and no point of the domain
/// is better.
#[test]
fn optimum_is_the_minimum_in_every_dimension_and_instance() {
    use rand::{Rng, SeedableRng};
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(2009);
    for dim in [2, 3, 20, support::MAX_DIM] {
        for instance in 1..=15 {
            for function in 1..=24 {
                let f = Bbob::new(function, instance, dim).unwrap();
                let (lo, hi) = f.domain();
                assert!(f.x_opt().iter().all(|v| (lo..=hi).contains(v)));
                let at_opt = f.eval(f.x_opt());
                assert!(
                    error(at_opt, f.f_opt()) <= TOL,
                    "f{function} i{instance} d{dim}: f(x_opt) = {at_opt}, f_opt = {}",
                    f.f_opt()
                );
                for _ in 0..20 {
                    let x: Vec<f64> = (0..dim).map(|_| rng.random_range(lo..=hi)).collect();
                    let y = f.eval(&x);
                    assert!(
                        y >= f.f_opt(),
                        "f{function} i{instance} d{dim}: {y} at {x:?}"
                    );
                }
            }
        }
    }
}
