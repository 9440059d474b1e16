use super::*;

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
