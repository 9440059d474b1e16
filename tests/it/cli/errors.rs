//! Each error is one clear line with exit status 1 (2 for clap usage errors),
//! never shows a password, and never creates or changes a file.

use super::fixture::*;

fn one_line(err: &str) -> &str {
    assert_eq!(err.lines().count(), 1, "not one line: {err:?}");
    assert!(err.starts_with("error: "), "{err}");
    err
}

#[test]
fn missing_file_is_not_created() {
    let dir = tempdir("missing");
    let p = dir.join("nope.db");
    let err = fails(&["studies", &url(&p)], 1);
    assert!(one_line(&err).contains("does not exist"), "{err}");
    assert!(!p.exists(), "hpo created {p:?}");
    let err = fails(
        &[
            "plot",
            &url(&p),
            "s",
            "history",
            "-o",
            dir.join("x.svg").to_str().unwrap(),
        ],
        1,
    );
    one_line(&err);
    assert!(!dir.join("x.svg").exists());
}

#[test]
fn non_study_databases_are_named_and_untouched() {
    let dir = tempdir("foreign");
    // A text file, an empty file, and a SQLite database of something else.
    let text = dir.join("notes.db");
    std::fs::write(&text, "hello, this is not SQLite\n".repeat(10)).unwrap();
    let empty = dir.join("empty.db");
    std::fs::write(&empty, "").unwrap();
    let other = dir.join("other.db");
    {
        let c = rusqlite::Connection::open(&other).unwrap();
        c.execute_batch("CREATE TABLE notes(x TEXT); INSERT INTO notes VALUES ('hi');")
            .unwrap();
    }
    for p in [&text, &empty, &other] {
        let before = std::fs::read(p).unwrap();
        let err = fails(&["studies", &url(p)], 1);
        assert!(one_line(&err).contains("not a study database"), "{err}");
        assert_eq!(std::fs::read(p).unwrap(), before, "{p:?} was modified");
    }
}

#[test]
fn wrong_study_name_lists_the_studies_that_exist() {
    let u = url(hpo_db());
    let err = fails(&["trials", &u, "nope"], 1);
    let err = one_line(&err);
    assert!(err.contains("no study named `nope`"), "{err}");
    assert!(
        err.contains("`pareto`") && err.contains("`net <script>alert(1)</script>`"),
        "{err}"
    );
}

#[test]
fn malformed_urls_are_explained_without_passwords() {
    let err = fails(&["studies", "study.db"], 1);
    assert!(one_line(&err).contains("no scheme"), "{err}");
    let err = fails(&["studies", "redis://x"], 1);
    assert!(
        one_line(&err).contains("`redis` storage is not supported"),
        "{err}"
    );
    let err = fails(&["studies", "postgresql://alice:hunter2@db.example/hpo"], 1);
    assert!(
        !one_line(&err).contains("hunter2"),
        "password leaked: {err}"
    );
    assert!(err.contains("alice:***@"), "{err}");
    let err = fails(
        &[
            "copy",
            &url(&optuna_db()),
            "postgresql://bob:s3cret@h/db",
            OPTUNA_STUDY,
        ],
        1,
    );
    assert!(!one_line(&err).contains("s3cret"), "password leaked: {err}");
    // A percent-encoded password, in either spelling.
    let err = fails(&["studies", "postgresql://carol:p%40ss@db.example/hpo"], 1);
    assert!(
        !err.contains("p%40ss") && !err.contains("p@ss"),
        "password leaked: {err}"
    );
    // A space after the colon would have been a file named " study.db".
    let err = fails(&["studies", "sqlite: study.db"], 1);
    assert!(
        one_line(&err).contains("did you mean `sqlite:study.db`"),
        "{err}"
    );
    assert!(!std::path::Path::new(" study.db").exists());
}

/// The command reads URLs as the library does: query parameters and percent
/// escapes in the path.
#[test]
fn urls_with_queries_and_escapes_open_the_file_they_name() {
    let dir = tempdir("url-escapes");
    let spaced = dir.join("my study.db");
    std::fs::copy(hpo_db(), &spaced).unwrap();
    let escaped = format!("sqlite:{}/my%20study.db", dir.display());
    let plain = ok(&["studies", &url(hpo_db())]);
    for u in [
        escaped.clone(),
        format!("{escaped}?timeout=30"),
        format!("{escaped}?mode=ro"),
        format!("{}?mode=ro&timeout=5", url(&spaced)),
    ] {
        assert_eq!(ok(&["studies", &u]), plain, "{u}");
    }
    // A missing file is named as the library reads it, decoded.
    let err = fails(
        &[
            "studies",
            &format!("sqlite:{}/no%20such.db?timeout=3", dir.display()),
        ],
        1,
    );
    assert!(one_line(&err).contains("no such.db"), "{err}");
}

#[test]
fn usage_errors() {
    let u = url(hpo_db());
    let err = fails(&["trials", &u, HPO_STUDY, "--state", "sleeping"], 1);
    assert!(
        one_line(&err).contains("unknown trial state `sleeping`"),
        "{err}"
    );
    // clap's own errors: exit status 2.
    fails(&["plot", &u, HPO_STUDY, "pie", "-o", "x.svg"], 2);
    fails(&["trials"], 2);
    fails(&[], 2);
}

#[test]
fn a_plot_without_its_data_says_what_is_missing() {
    let dir = tempdir("nodata");
    let out = dir.join("m.svg");
    let err = fails(
        &[
            "plot",
            &url(&optuna_db()),
            OPTUNA_STUDY,
            "memory",
            "-o",
            out.to_str().unwrap(),
        ],
        1,
    );
    assert!(one_line(&err).contains("no trial recorded memory"), "{err}");
    assert!(!out.exists());
}
