//! Every subcommand's output on the fixtures.

use super::fixture::*;

#[test]
fn studies_lists_every_study_with_counts() {
    let db = hpo_db();
    let out = ok(&["studies", &url(db)]);
    let lines: Vec<&str> = out.lines().collect();
    assert!(lines[0].starts_with("study"), "{out}");
    assert!(
        lines[0].contains("complete") && lines[0].contains("best"),
        "{out}"
    );
    let net = lines
        .iter()
        .find(|l| l.starts_with("net <script>"))
        .unwrap();
    assert!(net.contains("minimize"), "{net}");
    assert!(net.contains(&N_TRIALS.to_string()), "{net}");
    let pareto = lines.iter().find(|l| l.starts_with(PARETO_STUDY)).unwrap();
    assert!(
        pareto.contains("minimize,minimize") && pareto.contains("on front"),
        "{pareto}"
    );

    let out = ok(&["studies", &url(&optuna_ref_db())]);
    assert!(
        out.contains("single_obj") && out.contains("multi_obj"),
        "{out}"
    );
}

#[test]
fn trials_table_csv_json_agree() {
    let u = url(hpo_db());
    let table = ok(&["trials", &u, HPO_STUDY]);
    assert_eq!(table.lines().count(), N_TRIALS + 1, "{table}");
    let header = table.lines().next().unwrap();
    for col in [
        "number",
        "state",
        "value",
        "duration_s",
        "param_lr",
        "param_activation",
        "oom_retries",
        "peak_memory",
        "failure",
    ] {
        assert!(header.contains(col), "{col} missing in {header}");
    }
    // The crash message of a failed trial is shown.
    assert!(table.contains("simulated crash"), "{table}");

    let csv = ok(&["trials", &u, HPO_STUDY, "--format", "csv"]);
    assert_eq!(csv.lines().count(), N_TRIALS + 1);
    let json: serde_json::Value =
        serde_json::from_str(&ok(&["trials", &u, HPO_STUDY, "--format", "json"])).unwrap();
    let arr = json.as_array().unwrap();
    assert_eq!(arr.len(), N_TRIALS);
    assert_eq!(arr[0]["number"], 0);
    assert!(arr[0]["params"]["lr"].is_number());
    assert!(arr[0]["intermediate_values"].as_object().is_some());
}

/// People read 4 significant digits; machines get every digit.
#[test]
fn tables_print_numbers_for_people_exports_keep_every_digit() {
    let u = url(hpo_db());
    let json: serde_json::Value =
        serde_json::from_str(&ok(&["trials", &u, HPO_STUDY, "--format", "json"])).unwrap();
    let lr = json.as_array().unwrap()[0]["params"]["lr"]
        .as_f64()
        .unwrap();
    let full = hpo::distribution::python_float_repr(lr);
    let short = hpo::distribution::significant(lr, 4);
    assert!(full.len() > short.len(), "{full} {short}");
    let table = ok(&["trials", &u, HPO_STUDY]);
    assert!(table.contains(&short) && !table.contains(&full), "{table}");
    let csv = ok(&["trials", &u, HPO_STUDY, "--format", "csv"]);
    assert!(csv.contains(&full), "{csv}");
    // `hpo best` stays paste-ready, full precision: its parameters read back
    // as the stored values, bit for bit.
    let best = ok(&["best", &u, HPO_STUDY]);
    let mut lines = best.lines();
    let number: u64 = lines
        .next()
        .unwrap()
        .split_whitespace()
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    let pasted: serde_json::Value = serde_json::from_str(lines.next().unwrap()).unwrap();
    let stored = json
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["number"] == number)
        .unwrap();
    assert_eq!(
        pasted["lr"].as_f64().unwrap().to_bits(),
        stored["params"]["lr"].as_f64().unwrap().to_bits(),
        "{best}"
    );
}

#[test]
fn trials_filter_sort_and_limit() {
    let u = url(hpo_db());
    let json = |args: &[&str]| -> Vec<serde_json::Value> {
        let mut a = vec!["trials", u.as_str(), HPO_STUDY, "--format", "json"];
        a.extend_from_slice(args);
        serde_json::from_str::<serde_json::Value>(&ok(&a))
            .unwrap()
            .as_array()
            .unwrap()
            .clone()
    };
    let all = json(&[]);
    let failed = json(&["--state", "fail"]);
    assert!(!failed.is_empty());
    assert!(failed.iter().all(|t| t["state"] == "FAIL"));
    assert_eq!(
        failed.len(),
        all.iter().filter(|t| t["state"] == "FAIL").count()
    );
    assert!(failed
        .iter()
        .all(|t| t["failure"].as_str().unwrap().contains("simulated crash")));
    let pruned = json(&["--state", "PRUNED"]);
    assert!(
        !pruned.is_empty(),
        "the median pruner should have pruned some of {N_TRIALS} trials"
    );

    let best3 = json(&["--state", "complete", "--sort", "value", "--limit", "3"]);
    assert_eq!(best3.len(), 3);
    let v: Vec<f64> = best3
        .iter()
        .map(|t| t["values"][0].as_f64().unwrap())
        .collect();
    assert!(v[0] <= v[1] && v[1] <= v[2], "{v:?}");
    let min = all
        .iter()
        .filter(|t| t["state"] == "COMPLETE")
        .map(|t| t["values"][0].as_f64().unwrap())
        .fold(f64::INFINITY, f64::min);
    assert_eq!(v[0], min);
}

#[test]
fn best_prints_params_ready_to_paste() {
    let u = url(hpo_db());
    let out = ok(&["best", &u, HPO_STUDY]);
    let mut lines = out.lines();
    let head = lines.next().unwrap();
    assert!(head.starts_with("trial "), "{out}");
    let params: serde_json::Value = serde_json::from_str(lines.next().unwrap()).unwrap();
    for p in ["lr", "layers", "activation", "dropout"] {
        assert!(params.get(p).is_some(), "{p} missing: {out}");
    }
    // The Pareto front: one trial (two lines) per non-dominated point.
    let out = ok(&["best", &u, PARETO_STUDY]);
    assert!(
        out.lines().count() >= 4 && out.lines().count().is_multiple_of(2),
        "{out}"
    );
    // Optuna's study.
    let out = ok(&["best", &url(&optuna_db()), OPTUNA_STUDY]);
    assert!(out.contains("\"optimizer\""), "{out}");
}

#[test]
fn export_json_and_csv_hold_every_trial() {
    let u = url(hpo_db());
    let doc: serde_json::Value =
        serde_json::from_str(&ok(&["export", &u, HPO_STUDY, "--format", "json"])).unwrap();
    assert_eq!(doc["study"], HPO_STUDY);
    assert_eq!(doc["trials"].as_array().unwrap().len(), N_TRIALS);
    assert_eq!(doc["user_attrs"]["owner"], "<script>alert(3)</script>");
    let csv = ok(&["export", &u, HPO_STUDY, "--format", "csv"]);
    assert_eq!(csv.lines().count(), N_TRIALS + 1);
    // Optuna-written: 200 trials.
    let doc: serde_json::Value =
        serde_json::from_str(&ok(&["export", &url(&optuna_db()), OPTUNA_STUDY])).unwrap();
    assert_eq!(doc["trials"].as_array().unwrap().len(), 200);
}

#[test]
fn watch_once_shows_states_throughput_and_failures() {
    let u = url(hpo_db());
    let out = ok(&["watch", &u, HPO_STUDY, "--once"]);
    assert!(out.starts_with("study net <script>"), "{out}");
    assert!(out.contains("trials: complete "), "{out}");
    assert!(out.contains("trials/hour"), "{out}");
    assert!(out.contains("recent failures"), "{out}");
    assert!(out.contains("simulated crash"), "{out}");
    assert!(out.contains("device memory:"), "{out}");
    // No terminal: no escape codes.
    assert!(!out.contains('\x1b'));
    // A running trial of Optuna's reference study shows.
    let out = ok(&["watch", &url(&optuna_ref_db()), "single_obj", "--once"]);
    assert!(out.contains("running (1):"), "{out}");
}

#[test]
fn copy_moves_a_study_whole_and_refuses_to_overwrite() {
    let dir = tempdir("copy");
    let dst = dir.join("copy.db");
    let src = url(&optuna_db());
    let out = ok(&["copy", &src, &url(&dst), OPTUNA_STUDY]);
    assert!(out.contains("200 trials"), "{out}");
    let a: serde_json::Value = serde_json::from_str(&ok(&["export", &src, OPTUNA_STUDY])).unwrap();
    let b: serde_json::Value =
        serde_json::from_str(&ok(&["export", &url(&dst), OPTUNA_STUDY])).unwrap();
    assert_eq!(a, b, "the copy differs from the original");
    let err = fails(&["copy", &src, &url(&dst), OPTUNA_STUDY], 1);
    assert!(err.contains("already has a study"), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
}

/// `hpo watch` refreshing every 0.2 s next to a process writing trials: the
/// writer never sees a busy database, and the view follows its progress.
#[test]
fn watch_does_not_block_a_running_study() {
    use std::io::Read;
    let db = copy_of(hpo_db(), "watch-live");
    let mut watch = std::process::Command::new(assert_cmd::cargo::cargo_bin("hpo"))
        .args(["watch", &url(&db), PARETO_STUDY, "--interval", "0.2"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(500));
    let study = hpo::Study::builder()
        .name(PARETO_STUDY)
        .storage_url(url(&db))
        .directions([hpo::Direction::Minimize, hpo::Direction::Minimize])
        .load_if_exists(true)
        .build()
        .unwrap();
    for _ in 0..20 {
        study
            .optimize(1, |t: &mut hpo::Trial| {
                let x = t.suggest_float("x", 0.0, 1.0)?;
                std::thread::sleep(std::time::Duration::from_millis(30));
                Ok::<_, hpo::TrialError>(vec![x, (1.0 - x).powi(2)])
            })
            .unwrap();
    }
    std::thread::sleep(std::time::Duration::from_millis(500));
    assert!(watch.try_wait().unwrap().is_none(), "watch exited early");
    watch.kill().unwrap();
    let _ = watch.wait();
    let mut out = String::new();
    watch
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    let counts: Vec<usize> = out
        .lines()
        .filter_map(|l| l.strip_prefix(&format!("study {PARETO_STUDY}  (")))
        .filter_map(|l| l.split(' ').next()?.parse().ok())
        .collect();
    assert!(counts.len() >= 3, "too few frames: {out}");
    assert_eq!(counts[0], 12, "{counts:?}");
    assert_eq!(*counts.last().unwrap(), 32, "{counts:?}");
    assert!(counts.windows(2).all(|w| w[0] <= w[1]), "{counts:?}");
}
