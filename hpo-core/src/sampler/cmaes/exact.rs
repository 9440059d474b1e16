//! Floats stored bit for bit.
//!
//! serde_json writes the shortest decimal that names an `f64`, but without
//! its `float_roundtrip` feature it may read such a decimal back one unit in
//! the last place off. CMA-ES's state goes through storage text between
//! trials, and a resumed study must continue exactly as an uninterrupted one
//! would, so the state keeps every float as its bit pattern (an integer,
//! which JSON carries exactly). Used with `#[serde(with = "...")]`.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// One `f64`.
pub(super) mod float {
    use super::*;

    pub(in crate::sampler::cmaes) fn serialize<S: Serializer>(
        x: &f64,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        x.to_bits().serialize(s)
    }

    pub(in crate::sampler::cmaes) fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<f64, D::Error> {
        Ok(f64::from_bits(u64::deserialize(d)?))
    }
}

/// A `Vec<f64>`.
pub(super) mod floats {
    use super::*;

    pub(in crate::sampler::cmaes) fn serialize<S: Serializer>(
        x: &[f64],
        s: S,
    ) -> Result<S::Ok, S::Error> {
        x.iter()
            .map(|v| v.to_bits())
            .collect::<Vec<u64>>()
            .serialize(s)
    }

    pub(in crate::sampler::cmaes) fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Vec<f64>, D::Error> {
        Ok(Vec::<u64>::deserialize(d)?
            .into_iter()
            .map(f64::from_bits)
            .collect())
    }
}

/// A `Vec<(f64, f64)>` (bounds).
pub(super) mod pairs {
    use super::*;

    pub(in crate::sampler::cmaes) fn serialize<S: Serializer>(
        x: &[(f64, f64)],
        s: S,
    ) -> Result<S::Ok, S::Error> {
        x.iter()
            .map(|(a, b)| (a.to_bits(), b.to_bits()))
            .collect::<Vec<(u64, u64)>>()
            .serialize(s)
    }

    pub(in crate::sampler::cmaes) fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Vec<(f64, f64)>, D::Error> {
        Ok(Vec::<(u64, u64)>::deserialize(d)?
            .into_iter()
            .map(|(a, b)| (f64::from_bits(a), f64::from_bits(b)))
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use serde::{Deserialize, Serialize};

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct S {
        #[serde(with = "super::float")]
        a: f64,
        #[serde(with = "super::floats")]
        b: Vec<f64>,
        #[serde(with = "super::pairs")]
        c: Vec<(f64, f64)>,
    }

    #[test]
    fn floats_survive_json_text_bit_for_bit() {
        // 0.0019455300957159005 reads back one ULP off as a plain JSON number.
        let s = S {
            a: 0.0019455300957159005,
            b: vec![-0.0019455300957159003, f64::MIN_POSITIVE, 1e300, -0.0],
            c: vec![(0.1, 0.7), (f64::MAX, f64::MIN)],
        };
        let text = serde_json::to_string(&s).unwrap();
        let back: S = serde_json::from_str(&text).unwrap();
        assert_eq!(back, s);
        assert!(back.b[3].is_sign_negative());
    }
}
