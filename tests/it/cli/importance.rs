//! hpo's PED-ANOVA against Optuna's `get_param_importances` with
//! `PedAnovaImportanceEvaluator` on the same (Optuna-written) study.
//! The analytic checks (functions with known importances) are unit tests
//! of the binary's `importance` module.

use super::fixture::*;

#[test]
fn importances_match_optunas_on_the_same_study() {
    let expected: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/cli/data/optuna_importance.json"),
        )
        .unwrap(),
    )
    .unwrap();
    let optuna = expected["ped_anova"].as_object().unwrap();
    let ours: serde_json::Value = serde_json::from_str(&ok(&[
        "importance",
        &url(&optuna_db()),
        OPTUNA_STUDY,
        "--format",
        "json",
    ]))
    .unwrap();
    let ours = ours.as_object().unwrap();
    let rank = |m: &serde_json::Map<String, serde_json::Value>| {
        let mut v: Vec<(String, f64)> = m
            .iter()
            .map(|(k, v)| (k.clone(), v.as_f64().unwrap()))
            .collect();
        v.sort_by(|a, b| b.1.total_cmp(&a.1));
        v.into_iter().map(|(k, _)| k).collect::<Vec<_>>()
    };
    assert_eq!(rank(ours), rank(optuna), "ours {ours:?}, Optuna {optuna:?}");
    // The function: lr matters most, then layers, then optimizer; noise not at all.
    assert_eq!(rank(ours), ["lr", "layers", "optimizer", "noise"]);
    for (k, v) in optuna {
        let (a, b) = (ours[k].as_f64().unwrap(), v.as_f64().unwrap());
        assert!((a - b).abs() < 0.01, "{k}: hpo {a}, Optuna {b}");
    }
}

#[test]
fn importance_table_on_an_hpo_study() {
    let out = ok(&["importance", &url(hpo_db()), HPO_STUDY]);
    assert_eq!(out.lines().count(), 5, "{out}");
    assert!(
        out.lines().nth(1).unwrap().starts_with("lr") || out.contains("lr"),
        "{out}"
    );
}
