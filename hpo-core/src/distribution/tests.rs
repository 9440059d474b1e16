use super::*;

/// Every distinct `distribution_json` of Optuna 5.0's reference database
/// (hpo-core/tests/data/optuna_5_0_schema_ref.db, written by Optuna itself).
const OPTUNA_JSON: &[&str] = &[
    r#"{"name": "FloatDistribution", "attributes": {"step": null, "low": 0.0, "high": 1.0, "log": false}}"#,
    r#"{"name": "CategoricalDistribution", "attributes": {"choices": ["relu", "tanh", "gelu"]}}"#,
    r#"{"name": "CategoricalDistribution", "attributes": {"choices": ["x", "y"]}}"#,
    r#"{"name": "IntDistribution", "attributes": {"log": false, "step": 2, "low": 0, "high": 10}}"#,
    r#"{"name": "FloatDistribution", "attributes": {"step": null, "low": 1e-05, "high": 0.1, "log": true}}"#,
    r#"{"name": "CategoricalDistribution", "attributes": {"choices": [null, true, 3, 1.5, "s"]}}"#,
    r#"{"name": "IntDistribution", "attributes": {"log": false, "step": 1, "low": 1, "high": 8}}"#,
    r#"{"name": "IntDistribution", "attributes": {"log": true, "step": 1, "low": 16, "high": 512}}"#,
    r#"{"name": "FloatDistribution", "attributes": {"step": null, "low": -10.0, "high": 10.0, "log": false}}"#,
    r#"{"name": "FloatDistribution", "attributes": {"step": 0.25, "low": 0.0, "high": 1.0, "log": false}}"#,
];

#[test]
fn optuna_reference_json_round_trips_byte_for_byte() {
    for text in OPTUNA_JSON {
        let d = Distribution::from_json(text).unwrap();
        assert_eq!(d.to_json(), *text);
    }
}

#[test]
fn mixed_categorical_keeps_kinds() {
    let d = Distribution::from_json(OPTUNA_JSON[5]).unwrap();
    let Distribution::Categorical(c) = d else {
        panic!("not categorical")
    };
    assert_eq!(
        c.choices(),
        &[
            Choice::Null,
            Choice::Bool(true),
            Choice::Int(3),
            Choice::Float(1.5),
            Choice::Str("s".into())
        ]
    );
}

#[test]
fn python_float_repr_matches_python() {
    let cases = [
        (0.0, "0.0"),
        (-10.0, "-10.0"),
        (1e-5, "1e-05"),
        (0.0001, "0.0001"),
        (0.1, "0.1"),
        (1.5, "1.5"),
        (123456.789, "123456.789"),
        (1e16, "1e+16"),
        (1.5e20, "1.5e+20"),
        (9999999999999998.0, "9999999999999998.0"),
        (2.5e-7, "2.5e-07"),
        (0.014685885989200861, "0.014685885989200861"),
        (f64::INFINITY, "Infinity"),
    ];
    for (x, s) in cases {
        assert_eq!(python_float_repr(x), s, "{x:e}");
    }
}

#[test]
fn json_strings_are_escaped_like_python() {
    let d: Distribution = CategoricalDistribution::new(["a\"b", "é", "tab\t"])
        .unwrap()
        .into();
    assert_eq!(
        d.to_json(),
        r#"{"name": "CategoricalDistribution", "attributes": {"choices": ["a\"b", "\u00e9", "tab\t"]}}"#
    );
    assert_eq!(Distribution::from_json(&d.to_json()).unwrap(), d);
}

#[test]
fn legacy_optuna_names_are_read() {
    let d = Distribution::from_json(
        r#"{"name": "DiscreteUniformDistribution", "attributes": {"low": 0.0, "high": 1.0, "q": 0.5}}"#,
    )
    .unwrap();
    assert_eq!(d, FloatDistribution::stepped(0.0, 1.0, 0.5).unwrap().into());
    let d = Distribution::from_json(
        r#"{"name": "IntLogUniformDistribution", "attributes": {"low": 1, "high": 64}}"#,
    )
    .unwrap();
    assert_eq!(d, IntDistribution::log(1, 64).unwrap().into());
}

#[test]
fn malformed_json_is_a_parse_error_naming_the_problem() {
    for (text, needle) in [
        ("not json", "not JSON"),
        (r#"{"attributes": {}}"#, "missing \"name\""),
        (
            r#"{"name": "Bogus", "attributes": {}}"#,
            "unknown distribution name `Bogus`",
        ),
        (
            r#"{"name": "FloatDistribution", "attributes": {"low": 0.0}}"#,
            "\"high\"",
        ),
        (
            r#"{"name": "CategoricalDistribution", "attributes": {"choices": [[1]]}}"#,
            "not a JSON scalar",
        ),
    ] {
        let e = Distribution::from_json(text).unwrap_err().to_string();
        assert!(e.contains(needle), "{e:?} should mention {needle:?}");
    }
}

#[test]
fn invalid_float_distributions_are_rejected_with_the_reason() {
    let cases: Vec<(Result<FloatDistribution>, &str)> = vec![
        (FloatDistribution::new(1.0, 0.0), "must not exceed"),
        (FloatDistribution::new(f64::NAN, 1.0), "finite"),
        (FloatDistribution::new(0.0, f64::INFINITY), "finite"),
        (FloatDistribution::log(0.0, 1.0), "low > 0"),
        (FloatDistribution::log(-1.0, 1.0), "low > 0"),
        (FloatDistribution::stepped(0.0, 1.0, 0.3), "does not divide"),
        (FloatDistribution::stepped(0.0, 1.0, 0.0), "positive"),
        (FloatDistribution::stepped(0.0, 1.0, -0.5), "positive"),
        (
            FloatDistribution::with(1.0, 2.0, true, Some(0.5)),
            "both log-scaled and stepped",
        ),
    ];
    for (r, needle) in cases {
        let e = r.unwrap_err().to_string();
        assert!(e.contains(needle), "{e:?} should mention {needle:?}");
    }
    // Degenerate but valid: a single value.
    assert!(Distribution::Float(FloatDistribution::new(2.0, 2.0).unwrap()).is_single());
    // Steps that divide in decimal but not exactly in binary are accepted.
    assert!(FloatDistribution::stepped(0.0, 0.3, 0.1).is_ok());
}

#[test]
fn invalid_int_distributions_are_rejected_with_the_reason() {
    let cases: Vec<(Result<IntDistribution>, &str)> = vec![
        (IntDistribution::new(5, 4), "must not exceed"),
        (IntDistribution::log(0, 4), "low >= 1"),
        (IntDistribution::stepped(0, 10, 3), "does not divide"),
        (IntDistribution::stepped(0, 10, 0), "at least 1"),
        (IntDistribution::with(1, 8, true, 2), "step 1"),
    ];
    for (r, needle) in cases {
        let e = r.unwrap_err().to_string();
        assert!(e.contains(needle), "{e:?} should mention {needle:?}");
    }
    assert!(IntDistribution::new(i64::MIN, i64::MAX).is_ok());
}

#[test]
fn categorical_rejects_empty_and_duplicates_but_not_int_vs_float() {
    assert!(CategoricalDistribution::new(Vec::<Choice>::new()).is_err());
    let e = CategoricalDistribution::new(["a", "b", "a"])
        .unwrap_err()
        .to_string();
    assert!(e.contains("\"a\" appears more than once"), "{e}");
    assert!(CategoricalDistribution::new([Choice::Int(3), Choice::Float(3.0)]).is_ok());
}

#[test]
fn contains_checks_bounds_grid_and_integrality() {
    let f: Distribution = FloatDistribution::stepped(0.0, 1.0, 0.25).unwrap().into();
    assert!(f.contains(0.75));
    assert!(!f.contains(0.7));
    assert!(!f.contains(1.25));
    assert!(!f.contains(f64::NAN));
    let i: Distribution = IntDistribution::stepped(0, 10, 2).unwrap().into();
    assert!(i.contains(6.0));
    assert!(!i.contains(5.0));
    assert!(!i.contains(6.5));
    let c: Distribution = CategoricalDistribution::new(["a", "b"]).unwrap().into();
    assert!(c.contains(1.0));
    assert!(!c.contains(2.0));
    assert!(!c.contains(-1.0));
}

#[test]
fn external_internal_conversions_round_trip() {
    let c: Distribution =
        CategoricalDistribution::new([Choice::Null, true.into(), 3.into(), 1.5.into(), "s".into()])
            .unwrap()
            .into();
    for i in 0..5 {
        let ext = c.to_external(i as f64).unwrap();
        assert_eq!(c.to_internal(&ext).unwrap(), i as f64);
    }
    let i: Distribution = IntDistribution::log(16, 512).unwrap().into();
    assert_eq!(i.to_external(189.0).unwrap(), ParamValue::Int(189));
    assert!(i.to_internal(&ParamValue::Int(600)).is_err());
    assert!(i.to_external(189.5).is_err());
    let f: Distribution = FloatDistribution::log(1e-5, 0.1).unwrap().into();
    assert_eq!(f.to_internal(&ParamValue::Float(0.001)).unwrap(), 0.001);
    assert!(f.to_internal(&ParamValue::from("x")).is_err());
}

#[test]
fn support_normalization_snaps_inwards_and_detects_empty() {
    let i: Distribution = IntDistribution::stepped(128, 512, 32).unwrap().into();
    assert_eq!(
        Support::range(0.0, 384.0).normalize("len", &i).unwrap(),
        Support::range(128.0, 384.0)
    );
    assert_eq!(
        Support::range(130.0, 390.0).normalize("len", &i).unwrap(),
        Support::range(160.0, 384.0)
    );
    assert_eq!(
        Support::range(0.0, 1000.0).normalize("len", &i).unwrap(),
        Support::Full
    );
    let e = Support::range(130.0, 150.0)
        .normalize("len", &i)
        .unwrap_err()
        .to_string();
    assert!(e.contains("`len`"), "{e}");
    let f: Distribution = FloatDistribution::stepped(0.0, 1.0, 0.25).unwrap().into();
    assert_eq!(
        Support::range(0.3, 0.8).normalize("x", &f).unwrap(),
        Support::range(0.5, 0.75)
    );
    let c: Distribution = CategoricalDistribution::new([8, 16, 32]).unwrap().into();
    assert_eq!(
        Support::choices([2, 0]).normalize("b", &c).unwrap(),
        Support::Choices(vec![0, 2])
    );
    assert_eq!(
        Support::choices([0, 1, 2]).normalize("b", &c).unwrap(),
        Support::Full
    );
    assert!(Support::choices([]).normalize("b", &c).is_err());
    assert!(Support::choices([3]).normalize("b", &c).is_err());
    assert!(Support::range(0.0, 1.0).normalize("b", &c).is_err());
}

#[test]
fn snap_lands_on_valid_values() {
    let i: Distribution = IntDistribution::stepped(0, 10, 2).unwrap().into();
    for x in [-3.0, 0.9, 1.1, 5.0, 9.4, 42.0] {
        assert!(i.contains(i.snap(x)), "{x} -> {}", i.snap(x));
    }
    let f: Distribution = FloatDistribution::stepped(-1.0, 1.0, 0.1).unwrap().into();
    for x in [-2.0, -0.049, 0.333, 0.95, 3.0] {
        assert!(f.contains(f.snap(x)), "{x} -> {}", f.snap(x));
    }
}

#[test]
fn a_distribution_that_is_not_json_keeps_the_parsers_error_as_its_source() {
    let err = Distribution::from_json("{not json").unwrap_err();
    assert!(matches!(err, Error::Parse { .. }), "{err}");
    let source = std::error::Error::source(&err).expect("serde_json's error is the source");
    assert!(
        !err.to_string().contains(&source.to_string()),
        "the cause is not also flattened into the message: {err}"
    );
}
