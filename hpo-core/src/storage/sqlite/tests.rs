use super::*;
use crate::distribution::Distribution;
use crate::storage::Storage;
use crate::trial::{FrozenTrial, TrialState};
use crate::Direction;

#[test]
fn a_trial_costs_few_statements_and_commits() {
    let s = SqliteStorage::in_memory().unwrap();
    let sid = s.create_study("s", &[Direction::Minimize]).unwrap();
    let d = Distribution::Float(crate::FloatDistribution::new(0.0, 1.0).unwrap());
    let warm_up = s.create_trial(sid, None).unwrap();
    s.trials(sid).unwrap();
    s.finish_trial(warm_up.id, TrialState::Complete, Some(&[1.0]), &[])
        .unwrap();
    let before = s.stats();
    assert!(s.claim_waiting_trial(sid).unwrap().is_none());
    let t = s.create_trial(sid, None).unwrap();
    s.trials(sid).unwrap();
    s.set_trial_param(t.id, "x", 0.5, &d).unwrap();
    s.set_trial_param(t.id, "y", 0.25, &d).unwrap();
    s.finish_trial(t.id, TrialState::Complete, Some(&[1.0]), &[])
        .unwrap();
    s.trials(sid).unwrap();
    let after = s.stats();
    let statements = after.statements - before.statements;
    let commits = after.commits - before.commits;
    // claim check 1, insert 1, read 1, params 2, finish 4 (BEGIN, UPDATE, INSERT, COMMIT), read 1.
    assert_eq!((statements, commits), (10, 4), "{after:?}");
}

#[test]
fn finished_trials_are_read_once() {
    let s = SqliteStorage::in_memory().unwrap();
    let sid = s.create_study("s", &[Direction::Minimize]).unwrap();
    for _ in 0..5 {
        let t = s.create_trial(sid, None).unwrap();
        s.finish_trial(t.id, TrialState::Complete, Some(&[1.0]), &[])
            .unwrap();
    }
    // This storage finished them, so it never loads their details: one
    // statement per `trials` call.
    let before = s.stats().statements;
    assert_eq!(s.trials(sid).unwrap().len(), 5);
    assert_eq!(s.trials(sid).unwrap().len(), 5);
    assert_eq!(s.stats().statements - before, 2);
}

#[test]
fn a_second_handle_reads_each_finished_trial_once() {
    let dir = std::env::temp_dir().join(format!("hpo-sqlite-unit-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("incremental.db");
    let _ = std::fs::remove_file(&path);
    let writer = SqliteStorage::open(&path).unwrap();
    let reader = SqliteStorage::open(&path).unwrap();
    let sid = writer.create_study("s", &[Direction::Minimize]).unwrap();
    for _ in 0..200 {
        let t = writer.create_trial(sid, None).unwrap();
        writer
            .finish_trial(t.id, TrialState::Complete, Some(&[1.0]), &[])
            .unwrap();
    }
    let running = writer.create_trial(sid, None).unwrap();
    assert_eq!(reader.trials(sid).unwrap().len(), 201);
    assert_eq!(reader.stats().trials_loaded, 201);
    // One new finished trial and the RUNNING one are all that is read again.
    let t = writer.create_trial(sid, None).unwrap();
    writer
        .finish_trial(t.id, TrialState::Complete, Some(&[2.0]), &[])
        .unwrap();
    let seen = reader.trials(sid).unwrap();
    assert_eq!(seen.len(), 202);
    assert_eq!(reader.stats().trials_loaded, 203);
    assert_eq!(seen[200].id, running.id);
    assert_eq!(seen[201].values, Some(vec![2.0]));
    // Once the old RUNNING trial finishes, reads start after it.
    writer
        .finish_trial(running.id, TrialState::Fail, None, &[])
        .unwrap();
    assert_eq!(reader.trials(sid).unwrap()[200].state, TrialState::Fail);
    assert_eq!(reader.stats().trials_loaded, 204);
    reader.trials(sid).unwrap();
    assert_eq!(reader.stats().trials_loaded, 204);
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn two_handles_on_one_file_number_trials_contiguously() {
    let dir = std::env::temp_dir().join(format!("hpo-sqlite-unit-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("two-handles.db");
    let _ = std::fs::remove_file(&path);
    let a = SqliteStorage::open(&path).unwrap();
    let b = SqliteStorage::open(&path).unwrap();
    let sid = a.create_study("s", &[Direction::Minimize]).unwrap();
    let waiting = FrozenTrial::new(0, 0, TrialState::Waiting);
    for _ in 0..10 {
        a.create_trial(sid, Some(&waiting)).unwrap();
    }
    let claimed = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for s in [&a, &b, &a, &b] {
            let claimed = &claimed;
            scope.spawn(move || {
                for _ in 0..20 {
                    let t = match s.claim_waiting_trial(sid).unwrap() {
                        Some(t) => {
                            claimed.lock().unwrap().push(t.number);
                            t
                        }
                        None => s.create_trial(sid, None).unwrap(),
                    };
                    s.finish_trial(t.id, TrialState::Complete, Some(&[0.0]), &[])
                        .unwrap();
                }
            });
        }
    });
    let mut claimed = claimed.into_inner().unwrap();
    claimed.sort_unstable();
    assert_eq!(
        claimed,
        (0..10).collect::<Vec<_>>(),
        "each WAITING trial claimed once"
    );
    let numbers: Vec<u64> = b.trials(sid).unwrap().iter().map(|t| t.number).collect();
    assert_eq!(numbers, (0..80).collect::<Vec<_>>());
    std::fs::remove_file(&path).unwrap();
}
