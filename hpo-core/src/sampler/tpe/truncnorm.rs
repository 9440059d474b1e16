//! The standard normal distribution, truncated: log masses and sampling that
//! stay accurate far in the tails (a kernel may sit far outside a narrowed
//! support), after Optuna's `_truncnorm.py`.

use std::f64::consts::{FRAC_1_SQRT_2, PI};

/// `ln(sqrt(2 pi))`.
pub(crate) const LN_SQRT_2PI: f64 = 0.918_938_533_204_672_8;

/// Beyond this many standard deviations a normal tail is below 1e-16.
const TAIL_NEGLIGIBLE: f64 = 8.3;

/// Standard normal CDF.
pub(crate) fn ndtr(z: f64) -> f64 {
    0.5 * libm::erfc(-z * FRAC_1_SQRT_2)
}

/// `ln(ndtr(z))`, accurate for very negative `z`.
pub(crate) fn log_ndtr(z: f64) -> f64 {
    if z > 6.0 {
        // ndtr(z) = 1 - tiny.
        return (-0.5 * libm::erfc(z * FRAC_1_SQRT_2)).ln_1p();
    }
    if z > -20.0 {
        return ndtr(z).ln();
    }
    // Asymptotic series of Mills' ratio: ln phi(z) - ln(-z) + ln(1 - 1/z^2 + 3/z^4 - 15/z^6 + 105/z^8).
    let z2 = z * z;
    let inv = 1.0 / z2;
    let series = 1.0 - inv * (1.0 - 3.0 * inv * (1.0 - 5.0 * inv * (1.0 - 7.0 * inv)));
    -0.5 * z2 - LN_SQRT_2PI - (-z).ln() + series.ln()
}

/// `ln(ndtr(b) - ndtr(a))` for `a <= b`: the log mass of `[a, b]`.
pub(crate) fn log_gauss_mass(a: f64, b: f64) -> f64 {
    if a >= b {
        return f64::NEG_INFINITY;
    }
    if b <= 0.0 {
        left_tail_mass(a, b)
    } else if a >= 0.0 {
        left_tail_mass(-b, -a)
    } else {
        // Central: 1 - ndtr(a) - ndtr(-b), both terms below 1/2; a tail
        // beyond 8.3 sigma is below 1e-16 and skipped (one erfc instead of two).
        let left = if a < -TAIL_NEGLIGIBLE { 0.0 } else { ndtr(a) };
        let right = if b > TAIL_NEGLIGIBLE { 0.0 } else { ndtr(-b) };
        (-left - right).ln_1p()
    }
}

/// Log mass of `[a, b]` with `b <= 0`.
fn left_tail_mass(a: f64, b: f64) -> f64 {
    if b > -30.0 {
        // Both CDF values are comfortably representable: subtract directly
        // (two erfc and one log instead of the log-space route).
        let m = ndtr(b) - ndtr(a);
        if m > 1e-300 {
            return m.ln();
        }
    }
    let lb = log_ndtr(b);
    let la = log_ndtr(a);
    lb + log1mexp(la - lb)
}

/// `ln(1 - exp(x))` for `x <= 0`.
fn log1mexp(x: f64) -> f64 {
    if x > -std::f64::consts::LN_2 {
        (-x.exp_m1()).ln()
    } else {
        (-x.exp()).ln_1p()
    }
}

/// Inverse of [`ndtr`] (Acklam's approximation refined by one Halley step).
pub(crate) fn ndtri(p: f64) -> f64 {
    const A: [f64; 6] = [
        -3.969_683_028_665_376e1,
        2.209_460_984_245_205e2,
        -2.759_285_104_469_687e2,
        1.383_577_518_672_69e2,
        -3.066_479_806_614_716e1,
        2.506_628_277_459_239,
    ];
    const B: [f64; 5] = [
        -5.447_609_879_822_406e1,
        1.615_858_368_580_409e2,
        -1.556_989_798_598_866e2,
        6.680_131_188_771_972e1,
        -1.328_068_155_288_572e1,
    ];
    const C: [f64; 6] = [
        -7.784_894_002_430_293e-3,
        -3.223_964_580_411_365e-1,
        -2.400_758_277_161_838,
        -2.549_732_539_343_734,
        4.374_664_141_464_968,
        2.938_163_982_698_783,
    ];
    const D: [f64; 4] = [
        7.784_695_709_041_462e-3,
        3.224_671_290_700_398e-1,
        2.445_134_137_142_996,
        3.754_408_661_907_416,
    ];
    if p <= 0.0 {
        return f64::NEG_INFINITY;
    }
    if p >= 1.0 {
        return f64::INFINITY;
    }
    let tail = |q: f64| {
        (((((C[0] * q + C[1]) * q + C[2]) * q + C[3]) * q + C[4]) * q + C[5])
            / ((((D[0] * q + D[1]) * q + D[2]) * q + D[3]) * q + 1.0)
    };
    let x = if p < 0.02425 {
        tail((-2.0 * p.ln()).sqrt())
    } else if p <= 1.0 - 0.02425 {
        let q = p - 0.5;
        let r = q * q;
        (((((A[0] * r + A[1]) * r + A[2]) * r + A[3]) * r + A[4]) * r + A[5]) * q
            / (((((B[0] * r + B[1]) * r + B[2]) * r + B[3]) * r + B[4]) * r + 1.0)
    } else {
        -tail((-2.0 * (1.0 - p).ln()).sqrt())
    };
    // Halley refinement against the exact CDF.
    let e = ndtr(x) - p;
    let u = e * (2.0 * PI).sqrt() * (0.5 * x * x).exp();
    if u.is_finite() {
        x - u / (1.0 + 0.5 * x * u)
    } else {
        x
    }
}

/// Inverse of [`log_ndtr`]: the `z` with `ln(ndtr(z)) = log_p`, for `log_p <= 0`.
fn ndtri_exp(log_p: f64) -> f64 {
    if log_p > -700.0 {
        return ndtri(log_p.exp());
    }
    // Deep left tail: start from the leading asymptotics, then Newton on log_ndtr.
    let t = -2.0 * log_p;
    let mut z = -(t - t.ln() - (2.0 * PI).ln()).sqrt();
    for _ in 0..4 {
        let f = log_ndtr(z) - log_p;
        // d/dz ln ndtr(z) = phi(z) / ndtr(z)
        let slope = (-0.5 * z * z - LN_SQRT_2PI - log_ndtr(z)).exp();
        if !(slope.is_finite() && slope > 0.0) {
            break;
        }
        z -= f / slope;
    }
    z
}

/// One draw of a standard normal truncated to `[a, b]`, from a uniform `u` in `[0, 1)`.
pub(crate) fn sample_standard(a: f64, b: f64, u: f64) -> f64 {
    if a.is_nan() || b.is_nan() || a >= b {
        return if a.is_finite() { a } else { 0.0 };
    }
    if a >= 0.0 {
        // Mirror into the left half, where log_ndtr is accurate.
        return -sample_standard(-b, -a, 1.0 - u);
    }
    let x = if b <= 0.0 {
        // Left tail: work with log probabilities.
        let la = log_ndtr(a);
        let lb = log_ndtr(b);
        let span = lb + log1mexp(la - lb); // ln(ndtr(b) - ndtr(a))
        let lp = log_add_exp(la, u.max(f64::MIN_POSITIVE).ln() + span);
        ndtri_exp(lp.min(lb))
    } else {
        let pa = ndtr(a);
        let pb = ndtr(b);
        ndtri(pa + u * (pb - pa))
    };
    if x.is_nan() {
        return 0.5 * (a.max(-1e300) + b.min(1e300));
    }
    x.clamp(a, b)
}

/// `ln(exp(a) + exp(b))`.
pub(crate) fn log_add_exp(a: f64, b: f64) -> f64 {
    let m = a.max(b);
    if m == f64::NEG_INFINITY {
        return m;
    }
    m + ((a - m).exp() + (b - m).exp()).ln()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_ndtr_is_continuous_across_branches() {
        for z in [-20.0f64, 6.0] {
            let l = log_ndtr(z - 1e-9);
            let r = log_ndtr(z + 1e-9);
            assert!(
                (l - r).abs() < 1e-6 * l.abs().max(1e-12),
                "jump at {z}: {l} vs {r}"
            );
        }
        // Known value: ln(ndtr(-40)) = -804.608442013754
        assert!((log_ndtr(-40.0) + 804.608_442_013_754).abs() < 1e-9);
        assert!((log_ndtr(0.0) - 0.5f64.ln()).abs() < 1e-15);
    }

    #[test]
    fn gauss_mass_matches_cdf_differences_and_tails() {
        let m = log_gauss_mass(-1.0, 1.0).exp();
        assert!((m - 0.682_689_492_137_085_9).abs() < 1e-14);
        // Symmetric tails give the same mass.
        assert!((log_gauss_mass(3.0, 4.0) - log_gauss_mass(-4.0, -3.0)).abs() < 1e-12);
        // Far tails are finite and ordered.
        let far = log_gauss_mass(50.0, 51.0);
        assert!(far.is_finite() && far < -1000.0);
        assert!(log_gauss_mass(50.0, 51.0) > log_gauss_mass(51.0, 52.0));
        assert_eq!(log_gauss_mass(1.0, 1.0), f64::NEG_INFINITY);
    }

    #[test]
    fn ndtri_inverts_ndtr() {
        for p in [1e-300, 1e-20, 1e-5, 0.02, 0.3, 0.5, 0.77, 0.99, 1.0 - 1e-12] {
            let z = ndtri(p);
            assert!(((ndtr(z) - p) / p).abs() < 1e-9, "p={p}, z={z}");
        }
        for lp in [-800.0, -2000.0] {
            let z = ndtri_exp(lp);
            assert!((log_ndtr(z) - lp).abs() < 1e-6 * lp.abs(), "lp={lp} z={z}");
        }
    }

    #[test]
    fn truncated_samples_stay_inside_and_follow_the_density() {
        let mut inside = 0;
        for i in 0..1000 {
            let u = (i as f64 + 0.5) / 1000.0;
            for (a, b) in [
                (-1.0, 2.0),
                (5.0, 6.0),
                (-60.0, -59.0),
                (30.0, 1e9),
                (-0.1, 0.1),
            ] {
                let x = sample_standard(a, b, u);
                assert!(x >= a && x <= b, "{x} outside [{a}, {b}]");
            }
            // Quantiles of N(0,1) on [-1, 2]: fraction below 0 is (0.5-ndtr(-1))/(ndtr(2)-ndtr(-1)).
            if sample_standard(-1.0, 2.0, u) < 0.0 {
                inside += 1;
            }
        }
        let expect = (0.5 - ndtr(-1.0)) / (ndtr(2.0) - ndtr(-1.0));
        assert!((inside as f64 / 1000.0 - expect).abs() < 0.01);
        // In a far tail, mass concentrates at the near end.
        assert!(sample_standard(10.0, 20.0, 0.5) < 10.2);
    }
}
