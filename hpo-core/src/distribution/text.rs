//! Numbers for people: floats to a few significant digits.
//!
//! Stored values keep every digit (a learning rate of
//! `0.0048651344102729425` reads back bit for bit), but a person reading a
//! table, a trial line or a live view needs the digits that matter:
//! `0.004865`. [`significant`] formats as Python's `%.4g` does (so numbers
//! look the same beside Optuna's tools); [`ParamValue::to_short_string`]
//! applies it to a parameter. Full precision stays in exports, JSON and
//! paste-ready lines.

use super::choice::ParamValue;

/// Significant digits of numbers printed for people.
pub const PEOPLE_DIGITS: usize = 4;

/// `x` to `digits` significant digits (at least 1), as Python's `%.{digits}g`:
/// fixed notation for exponents from -4 to `digits - 1`, scientific
/// otherwise, trailing zeros dropped (`0.004865`, `0.8937`, `1.235e+04`,
/// `1e-05`, `100`).
pub fn significant(x: f64, digits: usize) -> String {
    if x.is_nan() {
        return "nan".into();
    }
    if x.is_infinite() {
        return if x > 0.0 { "inf".into() } else { "-inf".into() };
    }
    if x == 0.0 {
        return if x.is_sign_negative() { "-0" } else { "0" }.into();
    }
    let p = digits.max(1);
    // Rounded to p digits first: the exponent is the rounded number's.
    let sci = format!("{:.*e}", p - 1, x);
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i64 = exp.parse().unwrap_or(0);
    if (-4..p as i64).contains(&exp) {
        let decimals = (p as i64 - 1 - exp).max(0) as usize;
        trim_zeros(&format!("{:.*}", decimals, x))
    } else {
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{}e{sign}{:02}", trim_zeros(mantissa), exp.abs())
    }
}

/// `1.2300` -> `1.23`, `4.000` -> `4`; integers untouched.
fn trim_zeros(s: &str) -> String {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_owned()
    } else {
        s.to_owned()
    }
}

impl ParamValue {
    /// The value for people: a float to [`PEOPLE_DIGITS`] significant digits,
    /// integers and choices as they are.
    pub fn to_short_string(&self) -> String {
        match self {
            ParamValue::Float(x) => significant(*x, PEOPLE_DIGITS),
            other => other.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn as_pythons_percent_g() {
        // Expected values are Python's `'%.4g' % x`.
        for (x, want) in [
            (0.0048651344102729425, "0.004865"),
            (0.8937105410373212, "0.8937"),
            (12345.678, "1.235e+04"),
            (1e-05, "1e-05"),
            (0.0001, "0.0001"),
            (100.0, "100"),
            (9.99951, "10"),
            (-2.5e-7, "-2.5e-07"),
            (123456789.0, "1.235e+08"),
            (1.0, "1"),
            (0.0, "0"),
            (f64::NAN, "nan"),
            (f64::NEG_INFINITY, "-inf"),
        ] {
            assert_eq!(significant(x, 4), want, "{x}");
        }
        assert_eq!(significant(0.123456, 2), "0.12");
        assert_eq!(significant(0.123456, 0), "0.1", "at least one digit");
    }

    #[test]
    fn parameters_read_short() {
        assert_eq!(
            ParamValue::Float(0.0048651344102729425).to_short_string(),
            "0.004865"
        );
        assert_eq!(ParamValue::Int(16).to_short_string(), "16");
    }
}
