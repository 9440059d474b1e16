//! Every plot kind: the SVG parses and holds one mark per trial it shows.

use super::fixture::*;
use std::path::Path;

struct Svg {
    text: String,
}

impl Svg {
    fn draw(db: &Path, study: &str, kind: &str) -> Svg {
        let dir = tempdir(&format!("plot-{kind}-{}", study.len()));
        let out = dir.join(format!("{kind}.svg"));
        ok(&["plot", &url(db), study, kind, "-o", out.to_str().unwrap()]);
        let text = std::fs::read_to_string(&out).unwrap();
        // Parses as XML (raw markup from study data would break it).
        roxmltree::Document::parse(&text).unwrap_or_else(|e| panic!("{kind}: bad SVG: {e}"));
        Svg { text }
    }

    fn doc(&self) -> roxmltree::Document<'_> {
        roxmltree::Document::parse(&self.text).unwrap()
    }

    fn count(&self, tag: &str) -> usize {
        self.doc()
            .descendants()
            .filter(|n| n.tag_name().name() == tag)
            .count()
    }

    fn count_filled(&self, tag: &str, fill: &str) -> usize {
        self.doc()
            .descendants()
            .filter(|n| n.tag_name().name() == tag && n.attribute("fill") == Some(fill))
            .count()
    }

    fn texts(&self) -> Vec<String> {
        self.doc()
            .descendants()
            .filter(|n| n.tag_name().name() == "text")
            .filter_map(|n| n.text().map(|t| t.trim().to_owned()))
            .collect()
    }
}

/// Trials of the fixture by state, from `hpo export`.
fn trials(db: &Path, study: &str) -> Vec<serde_json::Value> {
    let doc: serde_json::Value = serde_json::from_str(&ok(&["export", &url(db), study])).unwrap();
    doc["trials"].as_array().unwrap().clone()
}

fn n_state(ts: &[serde_json::Value], s: &str) -> usize {
    ts.iter().filter(|t| t["state"] == s).count()
}

#[test]
fn history_has_one_point_per_complete_trial() {
    let db = hpo_db();
    let ts = trials(db, HPO_STUDY);
    let svg = Svg::draw(db, HPO_STUDY, "history");
    assert_eq!(svg.count("circle"), n_state(&ts, "COMPLETE"));
    let svg = Svg::draw(&optuna_db(), OPTUNA_STUDY, "history");
    assert_eq!(svg.count("circle"), 200);
}

#[test]
fn slice_has_a_panel_per_parameter_with_log_and_categorical_axes() {
    let db = hpo_db();
    let ts = trials(db, HPO_STUDY);
    let svg = Svg::draw(db, HPO_STUDY, "slice");
    // Every complete trial has all four parameters.
    assert_eq!(svg.count("circle"), 4 * n_state(&ts, "COMPLETE"));
    let texts = svg.texts();
    // lr is log: ticks at powers of ten; activation is categorical: its choices.
    assert!(texts.iter().any(|t| t == "1e-4"), "{texts:?}");
    for c in ["relu", "tanh", "<i>gelu</i>"] {
        assert!(texts.iter().any(|t| t == c), "{c} missing from {texts:?}");
    }
    let svg = Svg::draw(&optuna_db(), OPTUNA_STUDY, "slice");
    assert_eq!(svg.count("circle"), 4 * 200);
}

#[test]
fn parallel_coordinates_has_one_line_end_per_complete_trial() {
    let db = hpo_db();
    let ts = trials(db, HPO_STUDY);
    let svg = Svg::draw(db, HPO_STUDY, "parallel-coordinate");
    assert_eq!(svg.count("circle"), n_state(&ts, "COMPLETE"));
    let texts = svg.texts();
    for axis in ["objective", "lr", "layers", "activation", "dropout"] {
        assert!(
            texts.iter().any(|t| t == axis),
            "{axis} missing from {texts:?}"
        );
    }
}

#[test]
fn importance_has_one_bar_per_parameter() {
    let svg = Svg::draw(&optuna_db(), OPTUNA_STUDY, "importance");
    assert_eq!(svg.count_filled("rect", "#1F77B4"), 4, "{}", svg.text);
    let texts = svg.texts();
    for p in ["lr", "layers", "optimizer", "noise"] {
        assert!(texts.iter().any(|t| t == p), "{p} missing from {texts:?}");
    }
}

#[test]
fn intermediate_marks_every_curve_and_crosses_out_pruned_trials() {
    let db = hpo_db();
    let ts = trials(db, HPO_STUDY);
    let with_curves = ts
        .iter()
        .filter(|t| !t["intermediate_values"].as_object().unwrap().is_empty())
        .count();
    let pruned = n_state(&ts, "PRUNED");
    assert!(pruned > 0);
    let svg = Svg::draw(db, HPO_STUDY, "intermediate");
    assert_eq!(svg.count("circle"), with_curves);
    // A cross is two strokes of the pruned colour... drawn as lines or paths.
    assert!(svg.text.contains("#D62728"), "no red pruned marks");
}

#[test]
fn timeline_has_one_bar_per_started_trial() {
    let db = hpo_db();
    let ts = trials(db, HPO_STUDY);
    let svg = Svg::draw(db, HPO_STUDY, "timeline");
    let bars = svg.count_filled("rect", "#1F77B4")
        + svg.count_filled("rect", "#FF7F0E")
        + svg.count_filled("rect", "#D62728");
    assert_eq!(bars, ts.len());
}

#[test]
fn memory_shows_estimates_and_measurements() {
    let db = hpo_db();
    let ts = trials(db, HPO_STUDY);
    let measured = ts
        .iter()
        .filter(|t| t["peak_memory_bytes"].is_number())
        .count();
    assert!(measured > 0);
    let svg = Svg::draw(db, HPO_STUDY, "memory");
    assert_eq!(svg.count("circle"), measured);
    assert_eq!(
        svg.count("polygon"),
        ts.len(),
        "one estimate triangle per trial"
    );
    assert!(svg
        .texts()
        .iter()
        .any(|t| t.ends_with("GiB") || t.ends_with("MiB")));
    // The title says which measured figure the dots are (the fixture's
    // trials recorded their process's resident memory).
    assert!(
        svg.texts()
            .iter()
            .any(|t| t.contains("measured (dot: RSS)")),
        "{:?}",
        svg.texts()
    );
}

/// Renders the SVGs to PNG with `rsvg-convert` when it is installed (CI
/// installs it with .ci/chromium.sh), so a broken SVG that XML parsing
/// accepts still fails here.
#[test]
fn svgs_render_to_png() {
    if std::process::Command::new("rsvg-convert")
        .arg("--version")
        .output()
        .is_err()
    {
        eprintln!("skipped: rsvg-convert not installed (run .ci/chromium.sh)");
        return;
    }
    let db = hpo_db();
    for kind in [
        "history",
        "slice",
        "parallel-coordinate",
        "importance",
        "intermediate",
        "timeline",
        "memory",
    ] {
        let dir = tempdir(&format!("png-{kind}"));
        let svg = dir.join("p.svg");
        let png = dir.join("p.png");
        ok(&[
            "plot",
            &url(db),
            HPO_STUDY,
            kind,
            "-o",
            svg.to_str().unwrap(),
        ]);
        let st = std::process::Command::new("rsvg-convert")
            .arg(&svg)
            .arg("-o")
            .arg(&png)
            .status()
            .unwrap();
        assert!(st.success(), "{kind}");
        assert!(std::fs::metadata(&png).unwrap().len() > 1000, "{kind}");
    }
}

/// Writes the book's figures (book/src/watching/*.svg) from the fixture
/// study: `cargo test -p hpo --test it -- --ignored cli::plots::book_figures`.
#[test]
#[ignore = "writes the book's figures; run by hand"]
fn book_figures() {
    let out = Path::new(env!("CARGO_MANIFEST_DIR")).join("book/src/watching");
    std::fs::create_dir_all(&out).unwrap();
    let db = out.join("../../../target-book-study.db");
    let _ = std::fs::remove_file(&db);
    // Three threads, so the timeline shows trials running side by side.
    let name = "curves";
    make_hpo_db(&db, name, 3);
    for kind in [
        "history",
        "slice",
        "parallel-coordinate",
        "importance",
        "intermediate",
        "timeline",
        "memory",
    ] {
        let f = out.join(format!("{kind}.svg"));
        ok(&["plot", &url(&db), name, kind, "-o", f.to_str().unwrap()]);
    }
    std::fs::write(
        out.join("watch.txt"),
        ok(&["watch", &url(&db), name, "--once"]),
    )
    .unwrap();
    std::fs::write(
        out.join("trials.txt"),
        ok(&["trials", &url(&db), name, "--sort", "value", "--limit", "5"]),
    )
    .unwrap();
    std::fs::write(out.join("studies.txt"), ok(&["studies", &url(&db)])).unwrap();
    std::fs::write(
        out.join("importance.txt"),
        ok(&["importance", &url(&db), name]),
    )
    .unwrap();
    std::fs::remove_file(&db).unwrap();
}
