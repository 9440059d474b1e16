//! The backend-thread panic guard, with real threads panicking, in a child
//! process: its counters are process-wide, so panics staged here must not
//! reach the training runs of other tests in this binary.
//!
//! The child is this test binary re-invoked on the ignored test
//! `panic_guard::guarded_process_entry`.

use crate::oom::{config, data, train_config, train_data};
use hpo_burn::burn::tensor::backend::Backend;
use hpo_burn::fault::{Fault, FaultKind};
use hpo_burn::panic_guard::{self, BackendThreads, PanicWatch};
use hpo_burn::{Cpu, Error, Recorder, Result, Trainer, TrialSink};
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

    // A run during which one of its backend threads panics never returns Ok:
    // the trainer plays a run on CUDA device 0, whose thread is DSD-0-0.
    let device = Default::default();
    Cpu::seed(&device, 3);
    let (train, valid) = data();
    let data = train_data(&train, &valid);
    let on = |threads: BackendThreads| {
        let mut trainer = Trainer::<Cpu>::new(train_config(8, 1), config(), "toy", device);
        trainer.backend_threads = threads;
        trainer
    };
    // The evidence belongs to the run's own device: a run on CUDA device 1,
    // or on the CPU, is not failed by device 0's allocation failure.
    for other in [BackendThreads::cuda(1), BackendThreads::None] {
        let model = config().init::<Cpu>(&device).unwrap();
        let fit = on(other.clone()).fit(model, data, &mut FailingBackend);
        assert!(fit.is_ok(), "{other:?}: {:?}", fit.err());
    }
    let model = config().init::<Cpu>(&device).unwrap();
    match on(BackendThreads::cuda(0)).fit(model, data, &mut FailingBackend) {
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
    assert_eq!(flood.len(), 1, "one message for 1003 panics:\n{stderr}");
    assert!(
        flood[0].starts_with("hpo-burn: backend thread 'DSD-0-0' panicked at "),
        "{}",
        flood[0]
    );
    assert!(flood[0].ends_with("can't allocate buffer of size 1024"));
    assert!(stderr.contains("hpo-burn: 999 more panics on backend threads were not printed"));
    // The CUDA device 1 and CPU runs' own reports, then device 0's.
    assert_eq!(
        stderr
            .matches("hpo-burn: 1 more panics on backend threads were not printed")
            .count(),
        3,
        "{stderr}"
    );
    // Other threads' panics still reach the previous hook.
    assert!(
        stderr.contains("thread 'user-worker'") && stderr.contains("a user panic"),
        "{stderr}"
    );
    assert!(stderr.lines().count() < 20, "no flood:\n{stderr}");
}

/// Runs one of cubecl's recorded failure sequences through the training loop.
fn replay(kind: FaultKind, micro: usize) -> Result<()> {
    let device = Default::default();
    Cpu::seed(&device, 3);
    let model = config().init::<Cpu>(&device).unwrap();
    let (train, valid) = data();
    let trainer = Trainer::<Cpu>::new(train_config(micro, 1), config(), "toy", device)
        .with_fault(Some(Fault { kind, min_micro: 8 }));
    let data = train_data(&train, &valid);
    trainer.fit(model, data, &mut Recorder::new()).map(|_| ())
}

/// What cubecl 0.10 does after a failed allocation on a real GPU (book:
/// "Surviving OOM"), replayed: whatever the training thread sees next, the
/// run ends as out of memory, which the process executor relaunches smaller;
/// a "Memory page" error with no allocation failure before it is a device
/// failure. One test, in sequence: every replay panics on the same
/// (replay-only) backend thread.
#[test]
fn cubecl_failure_sequences_end_as_they_should() {
    for kind in [
        FaultKind::AllocThenMemoryPage,
        FaultKind::AllocThenCallError,
        FaultKind::AllocThenNan,
    ] {
        let e = replay(kind, 8).unwrap_err();
        assert!(e.is_out_of_memory(), "{kind:?}: {e}");
        let text = e.to_string();
        assert!(
            text.starts_with("out of memory") && text.contains("can't allocate buffer"),
            "{kind:?}: {text}"
        );
        // `?` in an objective: a failure whose reason says out of memory,
        // which a worker records as OOM for the executor to relaunch.
        let trial = hpo_core::TrialError::from(e);
        assert!(
            matches!(&trial, hpo_core::TrialError::Failed(m) if hpo_core::executor::is_oom_text(m)),
            "{trial:?}"
        );
        // Half the micro-batch: below the replay's threshold, a clean run.
        replay(kind, 4).unwrap();
    }
    let e = replay(FaultKind::MemoryPageOnly, 8).unwrap_err();
    assert!(!e.is_out_of_memory(), "{e}");
    assert!(
        e.to_string()
            .starts_with("device failure while reading the training loss"),
        "{e}"
    );

    // Two trials on threads of one process, one of them failing an
    // allocation: only that one is out of memory, the other completes.
    let (failing, clean) = std::thread::scope(|s| {
        let failing = s.spawn(|| replay(FaultKind::AllocThenMemoryPage, 8));
        let clean = s.spawn(|| {
            let device = Default::default();
            let model = config().init::<Cpu>(&device).unwrap();
            let (train, valid) = data();
            let data = train_data(&train, &valid);
            Trainer::<Cpu>::new(train_config(8, 1), config(), "toy", device)
                .fit(model, data, &mut Recorder::new())
                .map(|_| ())
        });
        (failing.join().unwrap(), clean.join().unwrap())
    });
    assert!(failing.unwrap_err().is_out_of_memory());
    clean.unwrap();
}
