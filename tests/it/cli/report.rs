//! The HTML report: self-contained, every piece of study data escaped, and
//! clean in a real browser.

use super::fixture::*;
use std::path::{Path, PathBuf};

fn report(db: &Path, study: &str, tag: &str) -> (PathBuf, String) {
    let dir = tempdir(tag);
    let out = dir.join("report.html");
    ok(&["report", &url(db), study, "-o", out.to_str().unwrap()]);
    let html = std::fs::read_to_string(&out).unwrap();
    (out, html)
}

fn assert_escaped(html: &str) {
    let lower = html.to_lowercase();
    assert!(
        !lower.contains("<script"),
        "unescaped <script> in the report"
    );
    assert!(!lower.contains("<img"), "unescaped <img> in the report");
    assert!(!lower.contains("<b>"), "unescaped <b> in the report");
    assert!(
        html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"),
        "the study name is missing"
    );
    // Self-contained: nothing fetched from anywhere.
    assert!(!lower.contains("src=\"http") && !lower.contains("href=\"http"));
}

/// Two reports written to one file at once: each goes through a temporary
/// file of its own and a rename, so both succeed and the file is whole.
#[test]
fn two_reports_at_once_leave_one_whole_file() {
    let dir = tempdir("report-twice");
    let out = dir.join("report.html");
    let run = || {
        let mut cmd = std::process::Command::new(assert_cmd::cargo::cargo_bin("hpo"));
        cmd.args([
            "report",
            &url(hpo_db()),
            HPO_STUDY,
            "-o",
            out.to_str().unwrap(),
        ]);
        cmd.spawn().unwrap()
    };
    let (mut a, mut b) = (run(), run());
    assert!(a.wait().unwrap().success() && b.wait().unwrap().success());
    let html = std::fs::read_to_string(&out).unwrap();
    assert!(html.trim_end().ends_with("</html>"), "a torn file");
    assert_escaped(&html);
    let left: Vec<_> = std::fs::read_dir(&dir).unwrap().flatten().collect();
    assert_eq!(left.len(), 1, "temporary files left behind: {left:?}");
}

/// The best trial's parameters are a table of name and value that wraps
/// on the page, not one long JSON line.
#[test]
fn the_best_trials_parameters_are_a_table() {
    let (_, html) = report(hpo_db(), HPO_STUDY, "report-best");
    let best = &html[html.find("<h2>Best</h2>").unwrap()..html.find("<h2>Plots</h2>").unwrap()];
    assert!(best.contains("<table class=\"best\">"), "{best}");
    assert!(best.contains("<th>lr</th>"), "{best}");
    assert!(!best.contains("<pre>"), "{best}");
}

#[test]
fn report_escapes_study_data_and_inlines_every_plot() {
    let (_, html) = report(hpo_db(), HPO_STUDY, "report-hpo");
    assert_escaped(&html);
    assert!(
        html.contains("&lt;script&gt;alert(3)&lt;/script&gt;"),
        "study attr missing"
    );
    assert!(
        html.contains("&lt;b&gt;simulated crash&lt;/b&gt;"),
        "failure missing"
    );
    // All seven plots have data in the hpo fixture.
    assert_eq!(html.matches("<svg").count(), 7);
    assert_eq!(html.matches("<figure").count(), 7);

    let (_, html) = report(&optuna_db(), OPTUNA_STUDY, "report-optuna");
    assert_escaped(&html);
    // No intermediate values and no memory in Optuna's study: notes instead.
    assert_eq!(html.matches("<svg").count(), 5);
    assert!(html.contains("no trial recorded memory"));
}

fn chromium() -> Option<String> {
    if let Ok(p) = std::env::var("HPO_CHROMIUM") {
        return Some(p);
    }
    ["chromium", "chromium-browser", "google-chrome"]
        .into_iter()
        .find(|c| {
            std::process::Command::new(c)
                .arg("--version")
                .output()
                .is_ok_and(|o| o.status.success())
        })
        .map(str::to_owned)
}

/// Opens the report in headless Chromium, takes a screenshot, and fails on
/// any console message (a CSP violation, a script error). Skipped with a
/// message when Chromium is absent, unless HPO_REQUIRE_CHROMIUM=1 (CI
/// installs it with .ci/chromium.sh).
#[test]
fn report_opens_in_headless_chromium_without_console_messages() {
    let Some(chrome) = chromium() else {
        assert!(
            std::env::var("HPO_REQUIRE_CHROMIUM").as_deref() != Ok("1"),
            "HPO_REQUIRE_CHROMIUM=1 but no chromium found (run .ci/chromium.sh)"
        );
        eprintln!("skipped: chromium not installed (run .ci/chromium.sh)");
        return;
    };
    for (db, study, tag) in [
        (hpo_db().to_path_buf(), HPO_STUDY, "chromium-hpo"),
        (optuna_db(), OPTUNA_STUDY, "chromium-optuna"),
    ] {
        let (html, _) = report(&db, study, tag);
        let shot = html.with_file_name("shot.png");
        let out = std::process::Command::new(&chrome)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--enable-logging=stderr",
                "--v=0",
                "--window-size=1200,2000",
            ])
            .arg(format!("--screenshot={}", shot.display()))
            .arg(format!("file://{}", html.display()))
            .output()
            .unwrap();
        let log = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "chromium failed: {log}");
        let console: Vec<&str> = log.lines().filter(|l| l.contains(":CONSOLE")).collect();
        assert!(console.is_empty(), "console messages: {console:?}");
        assert!(
            std::fs::metadata(&shot).unwrap().len() > 10_000,
            "empty screenshot"
        );
    }
}
