//! The exponential as plain arithmetic, so that a loop over many of them
//! vectorises.
//!
//! The kernel takes one `e^{-√5 r}` per pair of points: 600,000 for the
//! preliminary points of one proposal at 300 trials. The C library's `exp`
//! is a call per value, about a fifth of a proposal's time. This one is a
//! few multiplications and additions with no branch and no call, which the
//! compiler turns into vector instructions inside the lane loops of
//! [`wide`](super::wide)'s kernels (eight at a time with AVX-512), and
//! which gives the same bits on every machine and every vector unit (the C
//! library picks its own code by CPU).
//!
//! Method (Cody and Waite's reduction, as fdlibm's `exp`): `x = n ln 2 + r`
//! with `n` the integer nearest `x / ln 2` and `|r| ≤ ln 2 / 2`, `ln 2` split
//! in two so that `n · LN2_HI` is exact; `e^r` by its Taylor polynomial of
//! degree 13 (the first term left out is below 5e-18 of the value); `2^n`
//! written straight into the exponent bits. Within 2 ulp of the C
//! library's wherever the result is a normal double (tested on two million
//! points).

/// `log₂ e`.
const LOG2_E: f64 = std::f64::consts::LOG2_E;
/// The high part of `ln 2`, with its last 21 bits zero so that `n · LN2_HI`
/// is exact for `|n| < 2^21` (fdlibm's `ln2HI`).
const LN2_HI: f64 = 0.693_147_180_369_123_8;
/// `ln 2 - LN2_HI` (fdlibm's `ln2LO`).
const LN2_LO: f64 = 1.908_214_929_270_587_7e-10;
/// `1.5 · 2^52`: adding it rounds a double of magnitude below `2^51` to the
/// nearest integer (ties to even), which then sits in the low mantissa bits.
const ROUND: f64 = 6_755_399_441_055_744.0;
/// Below this the exponential rounds to 0 (it is under half the smallest
/// subnormal double, `2^-1075`).
const LOWEST: f64 = -745.2;
/// Above this it overflows (`ln f64::MAX` is 709.78...).
const HIGHEST: f64 = 709.79;

/// `1/k!` for `k = 2..=13`.
const INV_FACT: [f64; 12] = [
    1.0 / 2.0,
    1.0 / 6.0,
    1.0 / 24.0,
    1.0 / 120.0,
    1.0 / 720.0,
    1.0 / 5040.0,
    1.0 / 40_320.0,
    1.0 / 362_880.0,
    1.0 / 3_628_800.0,
    1.0 / 39_916_800.0,
    1.0 / 479_001_600.0,
    1.0 / 6_227_020_800.0,
];

/// `e^x`: within 2 ulp where the result is a normal double (`x` in
/// `[-708, 709.78]`), subnormal results within one of the smallest
/// subnormal, 0 below -745.2, infinite above 709.79, NaN for NaN.
#[inline(always)]
pub(super) fn exp(x: f64) -> f64 {
    // Written so that a loop over lanes vectorises: `max`/`min` rather than
    // `clamp`, integer steps on `u64` with wrapping arithmetic, and the
    // special cases as selects at the end.
    #[allow(clippy::manual_clamp)] // `clamp` keeps a NaN and does not vectorise here
    let xc = x.max(LOWEST).min(HIGHEST);
    let t = xc * LOG2_E + ROUND;
    let n = t - ROUND;
    let r = (xc - n * LN2_HI) - n * LN2_LO;
    // Horner from the highest term: 1 + r (1 + r (1/2 + r (1/6 + ...))).
    let mut p = INV_FACT[11];
    for c in INV_FACT[..11].iter().rev() {
        p = p * r + c;
    }
    let p = (p * r + 1.0) * r + 1.0;
    // `t`'s low bits hold `n` (two's complement, offset by ROUND's bits).
    // `2^n` is applied in two halves, each a normal double for every `n`
    // of the clamped range (-1076..=1024), so that subnormal results and
    // those near the top come out right.
    let n = t.to_bits().wrapping_sub(ROUND.to_bits());
    let half = ((n as i64) >> 1) as u64;
    let pow2 = |k: u64| f64::from_bits(k.wrapping_add(1023) << 52);
    let v = p * pow2(half) * pow2(n.wrapping_sub(half));
    let v = if x < LOWEST { 0.0 } else { v };
    let v = if x > HIGHEST { f64::INFINITY } else { v };
    if x.is_nan() {
        x
    } else {
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The distance from `a` to `b` in units in the last place of `b`.
    fn ulps(a: f64, b: f64) -> f64 {
        let ulp = f64::from_bits(b.to_bits() + 1) - b;
        (a - b).abs() / ulp
    }

    #[test]
    fn within_two_ulp_of_the_c_library_over_the_whole_range() {
        let mut worst: f64 = 0.0;
        let mut at = 0.0;
        let count = 1_000_000;
        let mut check = |x: f64| {
            let u = ulps(exp(x), x.exp());
            if u > worst {
                (worst, at) = (u, x);
            }
        };
        for i in 0..=count {
            check(-708.0 + 1417.78 * f64::from(i) / f64::from(count));
        }
        // The kernel's range, finely: -√5 r for r in [0, 20].
        for i in 0..=count {
            check(-45.0 * f64::from(i) / f64::from(count));
        }
        // The C library's own error is up to about 0.5 ulp more.
        assert!(worst <= 2.0, "{worst} ulp at {at}");
        // Subnormal results: within one of the smallest subnormal.
        let tiny = f64::from_bits(1);
        for i in 0..=10_000 {
            let x = -708.0 - 37.2 * f64::from(i) / 10_000.0;
            assert!((exp(x) - x.exp()).abs() <= tiny, "{x}");
        }
    }

    #[test]
    fn the_split_of_ln_2_is_fdlibms() {
        assert_eq!(LN2_HI.to_bits(), 0x3fe6_2e42_fee0_0000);
        assert_eq!(LN2_LO.to_bits(), 0x3dea_39ef_3579_3c76);
        assert_eq!(LN2_HI + LN2_LO, std::f64::consts::LN_2);
    }

    #[test]
    fn exact_where_the_exponential_is_exact_and_sane_at_the_ends() {
        assert_eq!(exp(0.0), 1.0);
        assert_eq!(exp(-0.0), 1.0);
        assert_eq!(exp(f64::NEG_INFINITY), 0.0);
        assert_eq!(exp(-1000.0), 0.0);
        assert_eq!(exp(-745.3), 0.0);
        assert!(exp(-745.0) > 0.0);
        assert_eq!(exp(709.8), f64::INFINITY);
        assert_eq!(exp(f64::INFINITY), f64::INFINITY);
        assert!(exp(f64::NAN).is_nan());
        assert!(exp(709.78).is_finite());
        // ln 2 multiples land on powers of two.
        for n in [-20i32, -1, 1, 10] {
            let x = f64::from(n) * std::f64::consts::LN_2;
            assert!(ulps(exp(x), 2f64.powi(n)) <= 1.0, "{n}");
        }
    }

    #[test]
    fn decreasing_where_the_kernel_uses_it() {
        let mut last = exp(0.0);
        for i in 1..20_000 {
            let v = exp(-f64::from(i) * 1e-3);
            assert!(v <= last, "{i}");
            last = v;
        }
    }
}
