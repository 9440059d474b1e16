//! The backend-thread panic guard, with real threads panicking, in a child
//! process: its counters are process-wide, so panics staged here must not
//! reach the training runs of other tests in this binary.
//!
//! The child is this test binary re-invoked on the ignored test
//! `panic_guard::guarded_process_entry`.

use crate::oom::{config, data, train_config};
use hpo_burn::burn::tensor::backend::Backend;
use hpo_burn::panic_guard::{self, PanicWatch};
use hpo_burn::{Cpu, Error, Result, TrainData, Trainer, TrialSink};
use serde_json::Value;
use std::panic::catch_unwind;
use std::process::Command;

const ENTRY_ENV: &str = "HPO_BURN_TEST_PANIC_GUARD";

/// Panics `times` times on a thread called `name` (`None`: unnamed), the way
/// cubecl's device-service thread does on every failed allocation.
// Panicking is this helper's whole purpose.
#[allow(clippy::panic)]
fn panic_on_thread(name: Option<&str>, times: usize) {
    let builder = match name {
        Some(n) => std::thread::Builder::new().name(n.to_owned()),
        None => std::thread::Builder::new(),
    };
    builder
        .spawn(move || {
            for i in 0..times {
                let _ = catch_unwind(|| panic!("can't allocate buffer of size {}", 1024 + i));
            }
        })
        .unwrap()
        .join()
        .unwrap();
}

/// A sink whose first report makes a backend thread fail, as if an
/// allocation had failed during the epoch.
struct FailingBackend;

impl TrialSink for FailingBackend {
    fn report_epoch(&mut self, _epoch: u64, _metric: f64) -> Result<bool> {
        panic_on_thread(Some("DSD-0-0"), 1);
        Ok(false)
    }

    fn record(&mut self, _key: &str, _value: Value) -> Result<()> {
        Ok(())
    }
}

#[test]
#[ignore = "run by backend_panics_are_printed_once_then_counted in a child process"]
fn guarded_process_entry() {
    if std::env::var_os(ENTRY_ENV).is_none() {
        return;
    }
    let watch = PanicWatch::start();
    // A flood: 1000 panics on two backend threads.
    panic_on_thread(Some("DSD-0-0"), 500);
    panic_on_thread(None, 500);
    // Someone else's thread: the previous hook (the default) prints it.
    let _ = std::thread::Builder::new()
        .name("user-worker".into())
        .spawn(|| panic!("a user panic"))
        .unwrap()
        .join();
    let seen = panic_guard::backend_panics();
    assert_eq!(seen.count, 1000);
    assert_eq!(seen.out_of_memory, 1000);
    match watch.check() {
        Err(Error::BackendPanics {
            count: 1000,
            out_of_memory: true,
            ..
        }) => {}
        other => panic!("the watch must fail with the panics, got {other:?}"),
    }
    assert_eq!(panic_guard::report(), 999);
    assert_eq!(panic_guard::report(), 0, "the count is reported once");

    // A run during which a backend thread panics never returns Ok.
    let device = Default::default();
    Cpu::seed(&device, 3);
    let model = config().init::<Cpu>(&device).unwrap();
    let (train, valid) = data();
    let trainer = Trainer::<Cpu>::new(train_config(8, 1), config(), "toy", device);
    let data = TrainData {
        train: &train,
        valid: &valid,
        pad_id: 0,
        classes: 2,
    };
    match trainer.fit(model, data, &mut FailingBackend) {
        Err(e @ Error::BackendPanics { .. }) => {
            let text = e.to_string();
            assert!(text.starts_with("out of memory: 1 panics"), "{text}");
            assert!(text.contains("'DSD-0-0'"), "{text}");
            // `?` in an objective: a failed trial whose reason says out of
            // memory, which the process executor relaunches smaller.
            let trial = hpo_core::TrialError::from(e);
            assert!(
                matches!(&trial, hpo_core::TrialError::Failed(m) if m.starts_with("out of memory")),
                "{trial:?}"
            );
        }
        Err(other) => panic!("expected BackendPanics, got {other}"),
        Ok(_) => panic!("a run during which the backend panicked returned Ok"),
    }
    println!("ENTRY OK");
}

#[test]
fn backend_panics_are_printed_once_then_counted() {
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "panic_guard::guarded_process_entry",
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(ENTRY_ENV, "1")
        // The default hook's backtrace of the user panic is not what is tested.
        .env("RUST_BACKTRACE", "0")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.contains("ENTRY OK"),
        "child failed: {}\nstdout:\n{stdout}\nstderr:\n{stderr}",
        out.status
    );
    let flood: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("can't allocate buffer"))
        .collect();
    assert_eq!(flood.len(), 1, "one message for 1001 panics:\n{stderr}");
    assert!(
        flood[0].starts_with("hpo-burn: backend thread 'DSD-0-0' panicked at "),
        "{}",
        flood[0]
    );
    assert!(flood[0].ends_with("can't allocate buffer of size 1024"));
    assert!(stderr.contains("hpo-burn: 999 more panics on backend threads were not printed"));
    assert!(stderr.contains("hpo-burn: 1 more panics on backend threads were not printed"));
    // Other threads' panics still reach the previous hook.
    assert!(
        stderr.contains("thread 'user-worker'") && stderr.contains("a user panic"),
        "{stderr}"
    );
    assert!(stderr.lines().count() < 20, "no flood:\n{stderr}");
}
