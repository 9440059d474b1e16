//! Behaviour of `#[hpo::search_space]`, on the `Criteria` space of
//! `examples/search_space.rs`: constraints hold for every sampled
//! configuration, optional parameters follow their conditions, configurations
//! round-trip through parameters and enqueued trials, and a sampler learns a
//! constrained space.

use hpo::{
    Direction, FailureKind, ParamKind, ParamValue, RandomSampler, SearchSpace, Study, TpeSampler,
    Trial, TrialError, TrialState,
};
use std::collections::BTreeMap;

// The space of the example and the book, compiled here as a module (its
// `main` and stand-in training function are unused in this binary).
#[path = "../../examples/search_space.rs"]
#[allow(dead_code)]
mod example;

use example::{Backbone, Criteria};

fn random_study(seed: u64) -> Study {
    Study::builder()
        .direction(Direction::Minimize)
        .sampler(RandomSampler::seeded(seed))
        .build()
        .unwrap()
}

fn sample_one<S: SearchSpace>(study: &Study) -> (S, Trial) {
    let mut trial = study.ask().unwrap();
    let config = S::sample(&mut trial).unwrap();
    (config, trial)
}

fn check_criteria(c: &Criteria) {
    if c.model.is_heavy() {
        assert!(c.batch_size <= 16, "{c:?}");
        assert!(c.max_len <= 384, "{c:?}");
        assert!(c.grad_accum <= 4, "{c:?}");
    }
    assert!([8, 12, 16, 24, 32, 48, 64].contains(&c.batch_size));
    assert!(
        (128..=512).contains(&c.max_len) && c.max_len.is_multiple_of(32),
        "{c:?}"
    );
    assert!((1e-6..=5e-4).contains(&c.lr));
    assert_eq!(c.head_hidden.is_some(), c.head_layers > 0, "{c:?}");
    if let Some(h) = c.head_hidden {
        assert!((64..=1024).contains(&h));
    }
    assert_eq!(c.epochs, 100);
}

#[test]
fn every_sampled_config_satisfies_the_heavy_model_rule() {
    let mut heavy = 0;
    let mut light_big_batch = 0;
    for seed in 0..40 {
        let study = random_study(seed);
        for _ in 0..10 {
            let (c, trial): (Criteria, _) = sample_one(&study);
            check_criteria(&c);
            // What the trial stored matches the config, under the declared distributions.
            assert_eq!(Criteria::from_params(&trial.params()).unwrap(), c);
            let stored = trial
                .frozen()
                .distributions
                .get("batch_size")
                .unwrap()
                .clone();
            assert_eq!(
                Some(&stored),
                Criteria::describe().distribution("batch_size")
            );
            heavy += usize::from(c.model.is_heavy());
            light_big_batch += usize::from(!c.model.is_heavy() && c.batch_size > 16);
            study.tell(trial, 0.0).unwrap();
        }
    }
    // Both sides of the condition were exercised.
    assert!(
        heavy > 20 && light_big_batch > 20,
        "heavy={heavy} light_big_batch={light_big_batch}"
    );
}

#[test]
fn inactive_options_are_none_exactly_when_their_condition_is_false() {
    let study = random_study(7);
    let (mut none, mut some) = (0, 0);
    for _ in 0..200 {
        let (c, trial): (Criteria, _) = sample_one(&study);
        assert_eq!(c.head_hidden.is_some(), c.head_layers > 0);
        // An inactive parameter is not suggested at all.
        assert_eq!(
            trial.params().contains_key("head_hidden"),
            c.head_layers > 0
        );
        if c.head_hidden.is_some() {
            some += 1
        } else {
            none += 1
        }
        study.tell(trial, 1.0).unwrap();
    }
    assert!(none > 10 && some > 10);
}

#[test]
fn from_params_inverts_to_params() {
    let study = random_study(11);
    for _ in 0..100 {
        let (c, trial): (Criteria, _) = sample_one(&study);
        let params: BTreeMap<String, ParamValue> = c.to_params().into_iter().collect();
        assert_eq!(Criteria::from_params(&params).unwrap(), c);
        assert_eq!(params, trial.params());
        study.tell(trial, 1.0).unwrap();
    }
}

#[test]
fn an_enqueued_config_is_sampled_back() {
    let study = random_study(3);
    let warm = Criteria {
        model: Backbone::DebertaV3Large,
        lr: 2e-5,
        batch_size: 12,
        max_len: 320,
        grad_accum: 3,
        head_layers: 2,
        head_hidden: Some(300),
        epochs: 100,
    };
    study.enqueue(warm.to_params()).unwrap();
    let (c, trial): (Criteria, _) = sample_one(&study);
    assert_eq!(c, warm);
    study.tell(trial, 0.5).unwrap();
    let best = Criteria::from_params(&study.best_trial().unwrap().params()).unwrap();
    assert_eq!(best, warm);
}

#[test]
fn from_params_names_the_missing_or_wrong_parameter() {
    let mut params: BTreeMap<String, ParamValue> = BTreeMap::new();
    params.insert("model".into(), "BertXXL".into());
    let err = Criteria::from_params(&params).unwrap_err().to_string();
    assert!(
        err.contains("`model`") && err.contains("BertXXL") && err.contains("Criteria"),
        "{err}"
    );
    params.insert("model".into(), "BertBase".into());
    let err = Criteria::from_params(&params).unwrap_err().to_string();
    assert!(err.contains("`lr`") && err.contains("missing"), "{err}");
}

#[test]
fn the_description_lists_fields_and_constraints() {
    let d = Criteria::describe();
    let names: Vec<&str> = d.params.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "model",
            "lr",
            "batch_size",
            "max_len",
            "grad_accum",
            "head_layers",
            "head_hidden",
            "epochs"
        ]
    );
    assert_eq!(
        d.constraints,
        ["if model.is_heavy() { batch_size <= 16, max_len <= 384, grad_accum <= 4 }"]
    );
    match &d.param("head_hidden").unwrap().kind {
        ParamKind::Searched { active_if, .. } => {
            assert_eq!(active_if.as_deref(), Some("head_layers > 0"))
        }
        other => panic!("{other:?}"),
    }
    assert!(
        matches!(&d.param("epochs").unwrap().kind, ParamKind::Fixed { value } if value == "100")
    );
    let text = d.to_string();
    assert!(
        text.contains("choice(\"BertBase\", \"RobertaBase\""),
        "{text}"
    );
    assert!(text.contains("int[128, 512] step 32"), "{text}");
    assert!(text.contains("(only if head_layers > 0)"), "{text}");
    assert!(d.problems.is_empty());
}

/// Every field kind, with narrowings of each form, including two rules that
/// contradict each other when `small` and `tight` are both true: reported at
/// start-up (`check`), and an Infeasible trial naming both when sampled.
#[derive(Debug, Clone, Copy, PartialEq, hpo::Choice)]
enum Opt {
    Adam,
    Sgd,
    Lion,
}

#[hpo::search_space]
#[constraint(if optimizer == Opt::Sgd { momentum >= 0.5, warmup == false, name in ["a", "b"] })]
#[constraint(if small { width <= 64, ratio <= 0.25, depth in [1, 2], fallback in [Opt::Adam, Opt::Lion] })]
#[constraint(if tight { width >= 128 })]
#[derive(Debug, Clone, PartialEq)]
struct Everything {
    #[param(choice)]
    optimizer: Opt,
    #[param(bool)]
    small: bool,
    #[param(bool)]
    tight: bool,
    #[param(choice)]
    fallback: Opt,
    #[param(float(0.0..=0.99))]
    momentum: f32,
    #[param(float(0.0..=1.0, step = 0.125))]
    ratio: f64,
    #[param]
    warmup: bool,
    #[param(choice("a", "b", "c"))]
    name: String,
    #[param(choice("x", "y"))]
    tag: &'static str,
    #[param(choice(0.5, 1, 2.5))]
    scale: f64,
    #[param(int(-8..=256))]
    width: i16,
    #[param(choice(1, 2, 3, 4))]
    depth: u8,
    #[param(int(1..=64, log), active_if = depth > 2 && !small)]
    extra: Option<u64>,
    #[param(choice(true, false), active_if = optimizer != Opt::Lion)]
    nesterov: Option<bool>,
    #[param(default)]
    notes: Vec<String>,
    #[param(fixed = Some(3))]
    seed: Option<u32>,
}

#[test]
fn every_field_kind_samples_within_its_narrowed_support() {
    let mut infeasible = 0;
    let mut complete = 0;
    for seed in 0..30 {
        let study = random_study(seed);
        for _ in 0..10 {
            let mut trial = study.ask().unwrap();
            match Everything::sample(&mut trial) {
                Ok(e) => {
                    complete += 1;
                    if e.optimizer == Opt::Sgd {
                        assert!(e.momentum >= 0.5 && !e.warmup && e.name != "c", "{e:?}");
                    }
                    if e.small {
                        assert!(e.width <= 64 && e.ratio <= 0.25 && e.depth <= 2, "{e:?}");
                        assert_ne!(e.fallback, Opt::Sgd, "{e:?}");
                    }
                    if e.tight {
                        assert!(e.width >= 128, "{e:?}");
                    }
                    assert!((e.ratio * 8.0).fract() == 0.0);
                    assert!((-8..=256).contains(&e.width));
                    assert_eq!(e.extra.is_some(), e.depth > 2 && !e.small);
                    assert_eq!(e.nesterov.is_some(), e.optimizer != Opt::Lion);
                    assert_eq!((e.notes.len(), e.seed), (0, Some(3)));
                    let params: BTreeMap<_, _> = e.to_params().into_iter().collect();
                    assert_eq!(Everything::from_params(&params).unwrap(), e);
                    // f32 fields store the sampled f64; both rebuild the same config.
                    assert_eq!(Everything::from_params(&trial.params()).unwrap(), e);
                    study.tell(trial, 0.0).unwrap();
                }
                Err(err) => {
                    // small && tight: width <= 64 and width >= 128 cannot both hold.
                    let msg = err.to_string();
                    assert!(matches!(err, TrialError::Infeasible(_)), "{msg}");
                    assert!(msg.contains("`width`"), "{msg}");
                    assert!(
                        msg.contains(
                            "if small { width <= 64, ratio <= 0.25, depth in [1, 2], fallback"
                        ),
                        "{msg}"
                    );
                    assert!(msg.contains("if tight { width >= 128 }"), "{msg}");
                    let t = study.tell(trial, Err::<f64, _>(err)).unwrap();
                    assert_eq!(t.state, TrialState::Fail);
                    assert_eq!(t.failure(), Some(FailureKind::Infeasible));
                    infeasible += 1;
                }
            }
        }
    }
    assert!(
        infeasible > 10 && complete > 100,
        "infeasible={infeasible} complete={complete}"
    );
}

#[test]
fn contradicting_constraints_are_found_at_start_up_naming_both() {
    // `small` and `tight` can both be true, and then `width` has no value:
    // found by `describe()`/`check()` before any trial, not trial by trial.
    let d = Everything::describe();
    assert_eq!(d.problems.len(), 1, "{:?}", d.problems);
    let problem = &d.problems[0];
    assert!(
        problem.contains("if small { width <= 64, ratio <= 0.25")
            && problem.contains("if tight { width >= 128 }")
            && problem.contains("`width`"),
        "{problem}"
    );
    assert!(d.to_string().contains("invalid: constraints `if small"));
    let err = Everything::check().unwrap_err();
    assert!(matches!(err, hpo::Error::InvalidConfig(_)), "{err:?}");
    assert!(err.to_string().contains("`Everything`"), "{err}");
    assert!(Criteria::check().is_ok());
}

/// A space whose contradiction the macro can only find by searching the
/// conditions (sampled by one test only: the report is once per process).
#[hpo::search_space]
#[constraint(if small { width <= 64 })]
#[constraint(if tight { width >= 128 })]
#[derive(Debug)]
struct Reported {
    #[param(bool)]
    small: bool,
    #[param(bool)]
    tight: bool,
    #[param(int(8..=256))]
    width: u32,
}

/// What `tracing` logs while `f` runs.
fn warnings(f: impl FnOnce()) -> String {
    use std::sync::{Arc, Mutex};
    #[derive(Clone, Default)]
    struct Log(Arc<Mutex<Vec<u8>>>);
    impl std::io::Write for Log {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let log = Log::default();
    let writer = log.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .finish();
    tracing::subscriber::with_default(subscriber, f);
    let text = String::from_utf8(log.0.lock().unwrap().clone()).unwrap();
    text
}

#[test]
fn the_first_sample_reports_a_contradiction_once_naming_both_constraints() {
    let text = warnings(|| {
        let study = random_study(3);
        for _ in 0..5 {
            let mut trial = study.ask().unwrap();
            let outcome = Reported::sample(&mut trial).map(|_| 0.0);
            study.tell(trial, outcome).unwrap();
        }
    });
    assert_eq!(
        text.matches("search space `Reported`").count(),
        1,
        "reported once: {text}"
    );
    assert!(
        text.contains("search space `Reported`")
            && text.contains("if small { width <= 64 }")
            && text.contains("if tight { width >= 128 }"),
        "{text}"
    );
}

/// Same narrowings as `Everything`'s, but a third constraint rules out the
/// combination in which they would contradict.
#[hpo::search_space]
#[constraint(if small { tight == false })]
#[constraint(if small { width <= 64 })]
#[constraint(if tight { width >= 128 })]
#[derive(Debug)]
struct Exclusive {
    #[param(bool)]
    small: bool,
    #[param(bool)]
    tight: bool,
    #[param(int(8..=256))]
    width: u32,
}

/// As `Exclusive`, with the ruling-out narrowing's value read from a field.
#[hpo::search_space]
#[constraint(if small { tight == never })]
#[constraint(if small { width <= 64 })]
#[constraint(if tight { width >= 128 })]
#[derive(Debug)]
struct ValueFromField {
    #[param(bool)]
    small: bool,
    #[param(fixed = false)]
    never: bool,
    #[param(bool)]
    tight: bool,
    #[param(int(8..=256))]
    width: u32,
}

/// Conditions over an integer range: they overlap only when `overlap` is
/// set (at `depth == 2`), through an optional field's activation.
#[hpo::search_space]
#[constraint(if depth >= 3 { width <= 64 })]
#[constraint(if depth <= 1 { width >= 128 })]
#[constraint(if extra == Some(2) { width >= 200 })]
#[derive(Debug)]
struct ByDepth {
    #[param(int(0..=4))]
    depth: u8,
    #[param(bool)]
    overlap: bool,
    #[param(choice(1, 2), active_if = overlap && depth >= 3)]
    extra: Option<u8>,
    #[param(int(8..=256))]
    width: u32,
}

#[test]
fn constraints_that_cannot_apply_together_are_not_reported() {
    assert!(Exclusive::describe().problems.is_empty());
    Exclusive::check().unwrap();
    ValueFromField::check().unwrap();
    // ... and sampling reads the value from the field: never both.
    let study = random_study(2);
    for _ in 0..100 {
        let (c, trial): (ValueFromField, _) = sample_one(&study);
        assert!(!c.never, "{c:?}");
        assert!(!(c.small && c.tight), "{c:?}");
        study.tell(trial, 0.0).unwrap();
    }
    // `depth >= 3` and `depth <= 1` never hold together; `extra == Some(2)`
    // with `depth >= 3` does (overlap = true, depth = 3), and is reported.
    let d = ByDepth::describe();
    assert_eq!(d.problems.len(), 1, "{:?}", d.problems);
    assert!(
        d.problems[0].contains("if depth >= 3 { width <= 64 }")
            && d.problems[0].contains("if extra == Some(2) { width >= 200 }"),
        "{:?}",
        d.problems
    );
    // Sampling agrees: the reported combination is infeasible, the others run.
    let study = random_study(1);
    let (mut infeasible, mut complete) = (0, 0);
    for _ in 0..300 {
        let mut trial = study.ask().unwrap();
        match ByDepth::sample(&mut trial) {
            Ok(c) => {
                assert!(!(c.depth >= 3 && c.extra == Some(2)), "{c:?}");
                complete += 1;
                study.tell(trial, 0.0).unwrap();
            }
            Err(e) => {
                assert!(matches!(e, TrialError::Infeasible(_)), "{e}");
                infeasible += 1;
                study.tell(trial, Err::<f64, _>(e)).unwrap();
            }
        }
    }
    assert!(infeasible > 0 && complete > 200, "{infeasible} {complete}");
}

// Conditions over floats and wide integer ranges: found at start-up by
// reasoning over the bounds the conditions state.

/// `lr > 1e-3` and `lr > 1e-2` hold together above 1e-2, where `warmup`
/// has no value (the example of issue 10).
#[hpo::search_space]
#[constraint(if lr > 1e-3 { warmup >= 0.2 })]
#[constraint(if lr > 1e-2 { warmup <= 0.1 })]
#[derive(Debug)]
struct FloatOverlap {
    #[param(float(1e-5..=1e-1, log))]
    lr: f64,
    #[param(float(0.0..=0.5))]
    warmup: f64,
}

/// As `FloatOverlap`, but `lr > 1e-3` and `lr < 1e-4` never hold together.
#[hpo::search_space]
#[constraint(if lr > 1e-3 { warmup >= 0.2 })]
#[constraint(if lr < 1e-4 { warmup <= 0.1 })]
#[derive(Debug)]
struct FloatDisjoint {
    #[param(float(1e-5..=1e-1, log))]
    lr: f64,
    #[param(float(0.0..=0.5))]
    warmup: f64,
}

/// Both within one condition (`lr` between two bounds) and across two: the
/// conditions meet only at `lr == 1e-2`, which both include.
#[hpo::search_space]
#[constraint(if lr > 1e-3 && lr <= 1e-2 { warmup >= 0.2 })]
#[constraint(if lr >= 1e-2 { warmup <= 0.1 })]
#[derive(Debug)]
struct TouchingBounds {
    #[param(float(1e-5..=1e-1, log))]
    lr: f64,
    #[param(float(0.0..=0.5))]
    warmup: f64,
}

/// As `TouchingBounds` with one bound strict: no value of `lr` meets both.
#[hpo::search_space]
#[constraint(if lr > 1e-3 && lr < 1e-2 { warmup >= 0.2 })]
#[constraint(if lr >= 1e-2 { warmup <= 0.1 })]
#[derive(Debug)]
struct StrictBounds {
    #[param(float(1e-5..=1e-1, log))]
    lr: f64,
    #[param(float(0.0..=0.5))]
    warmup: f64,
}

/// The declared range's closed end counts: `lr >= 1e-1` holds at 1e-1.
#[hpo::search_space]
#[constraint(if lr >= 1e-1 { warmup >= 0.2 })]
#[constraint(if lr > 5e-2 { warmup <= 0.1 })]
#[derive(Debug)]
struct AtTheRangeEnd {
    #[param(float(1e-5..=1e-1, log))]
    lr: f64,
    #[param(float(0.0..=0.5))]
    warmup: f64,
}

/// ... and beyond it a condition never holds: `lr > 1e-1`.
#[hpo::search_space]
#[constraint(if lr > 1e-1 { warmup >= 0.2 })]
#[constraint(if lr > 5e-2 { warmup <= 0.1 })]
#[derive(Debug)]
struct PastTheRangeEnd {
    #[param(float(1e-5..=1e-1, log))]
    lr: f64,
    #[param(float(0.0..=0.5))]
    warmup: f64,
}

/// A wide integer range (100,000 values, too many to enumerate):
/// `steps > 50_000` and `steps >= 90_000` overlap.
#[hpo::search_space]
#[constraint(if steps > 50_000 { batch <= 16 })]
#[constraint(if steps >= 90_000 { batch >= 32 })]
#[derive(Debug)]
struct WideInt {
    #[param(int(1..=100_000))]
    steps: u32,
    #[param(choice(8, 16, 32, 64))]
    batch: u32,
}

/// No integer is above 50,000 and below 50,001 (a float would be).
#[hpo::search_space]
#[constraint(if steps > 50_000 { batch <= 16 })]
#[constraint(if steps < 50_001 { batch >= 32 })]
#[derive(Debug)]
struct IntegerGap {
    #[param(int(1..=100_000))]
    steps: u32,
    #[param(choice(8, 16, 32, 64))]
    batch: u32,
}

#[hpo::search_space]
#[constraint(if steps > 50_000.0 { batch <= 16 })]
#[constraint(if steps < 50_001.0 { batch >= 32 })]
#[derive(Debug)]
struct FloatGap {
    #[param(float(1.0..=100_000.0))]
    steps: f64,
    #[param(choice(8, 16, 32, 64))]
    batch: u32,
}

/// On a stepped float only grid values count: none lies in (0.3, 0.45),
/// 0.5 lies in (0.3, 0.55).
#[hpo::search_space]
#[constraint(if ratio > 0.3 { width <= 64 })]
#[constraint(if ratio < 0.45 { width >= 128 })]
#[derive(Debug)]
struct OffGrid {
    #[param(float(0.0..=1.0, step = 0.25))]
    ratio: f64,
    #[param(int(8..=256))]
    width: u32,
}

#[hpo::search_space]
#[constraint(if ratio > 0.3 { width <= 64 })]
#[constraint(if ratio < 0.55 { width >= 128 })]
#[derive(Debug)]
struct OnGrid {
    #[param(float(0.0..=1.0, step = 0.25))]
    ratio: f64,
    #[param(int(8..=256))]
    width: u32,
}

/// The conditions overlap on their own, but a third constraint narrows
/// `momentum` whenever `lr > 1e-2`, so `momentum > 0.9` cannot then hold.
#[hpo::search_space]
#[constraint(if lr > 1e-2 { warmup <= 0.1, momentum <= 0.5 })]
#[constraint(if momentum > 0.9 { warmup >= 0.2 })]
#[derive(Debug)]
struct RuledOutByANarrowing {
    #[param(float(1e-5..=1e-1, log))]
    lr: f64,
    #[param(float(0.0..=0.99))]
    momentum: f32,
    #[param(float(0.0..=0.5))]
    warmup: f64,
}

/// Bools and floats in one condition: `small` and `!small` never hold
/// together, whatever `lr` is; `||` splits into alternatives.
#[hpo::search_space]
#[constraint(if small && lr > 1e-3 { warmup >= 0.2 })]
#[constraint(if !small && lr > 1e-2 { warmup <= 0.1 })]
#[constraint(if !small || lr < 1e-4 { warmup <= 0.15 })]
#[derive(Debug)]
struct MixedWithBools {
    #[param(bool)]
    small: bool,
    #[param(float(1e-5..=1e-1, log))]
    lr: f64,
    #[param(float(0.0..=0.5))]
    warmup: f64,
}

/// `extra` exists only when `lr > 1e-2` (its `active_if`), which
/// `lr < 1e-3` excludes; in `ActiveOverlap` it exists from 1e-4 on.
#[hpo::search_space]
#[constraint(if extra == Some(2) { width >= 200 })]
#[constraint(if lr < 1e-3 { width <= 64 })]
#[derive(Debug)]
struct ActiveDisjoint {
    #[param(float(1e-5..=1e-1, log))]
    lr: f64,
    #[param(choice(1, 2), active_if = lr > 1e-2)]
    extra: Option<u8>,
    #[param(int(8..=256))]
    width: u32,
}

#[hpo::search_space]
#[constraint(if extra == Some(2) { width >= 200 })]
#[constraint(if lr < 1e-3 { width <= 64 })]
#[derive(Debug)]
struct ActiveOverlap {
    #[param(float(1e-5..=1e-1, log))]
    lr: f64,
    #[param(choice(1, 2), active_if = lr > 1e-4)]
    extra: Option<u8>,
    #[param(int(8..=256))]
    width: u32,
}

/// `||` and `!=`: the conditions overlap above 5e-2 (`OrOverlap`), and not
/// at all when the second needs `lr <= 1e-2` and `momentum >= 0.5`
/// (`OrDisjoint`).
#[hpo::search_space]
#[constraint(if lr > 5e-2 || momentum < 0.1 { warmup >= 0.2 })]
#[constraint(if lr != 1e-3 && lr >= 3e-2 { warmup <= 0.1 })]
#[derive(Debug)]
struct OrOverlap {
    #[param(float(1e-5..=1e-1, log))]
    lr: f64,
    #[param(float(0.0..=0.99))]
    momentum: f64,
    #[param(float(0.0..=0.5))]
    warmup: f64,
}

#[hpo::search_space]
#[constraint(if lr > 5e-2 || momentum < 0.1 { warmup >= 0.2 })]
#[constraint(if !(lr > 1e-2 || momentum < 0.5) { warmup <= 0.1 })]
#[derive(Debug)]
struct OrDisjoint {
    #[param(float(1e-5..=1e-1, log))]
    lr: f64,
    #[param(float(0.0..=0.99))]
    momentum: f64,
    #[param(float(0.0..=0.5))]
    warmup: f64,
}

/// Arithmetic on a float is not decided at start-up: nothing is reported
/// there, and a trial that meets both conditions is infeasible, naming both.
#[hpo::search_space]
#[constraint(if lr > 1e-3 { warmup >= 0.2 })]
#[constraint(if lr * 10.0 > 1e-1 { warmup <= 0.1 })]
#[derive(Debug)]
struct Undecided {
    #[param(float(1e-5..=1e-1, log))]
    lr: f64,
    #[param(float(0.0..=0.5))]
    warmup: f64,
}

/// The one problem of `d`, which must name both constraints and the field.
fn the_contradiction(d: &hpo::SpaceDescription, first: &str, second: &str, field: &str) {
    assert_eq!(d.problems.len(), 1, "{}: {:?}", d.name, d.problems);
    let problem = &d.problems[0];
    assert!(
        problem.contains(first) && problem.contains(second) && problem.contains(field),
        "{problem}"
    );
}

#[test]
fn float_conditions_that_overlap_are_found_at_start_up_naming_both() {
    the_contradiction(
        &FloatOverlap::describe(),
        "if lr > 1e-3 { warmup >= 0.2 }",
        "if lr > 1e-2 { warmup <= 0.1 }",
        "`warmup`",
    );
    let err = FloatOverlap::check().unwrap_err();
    assert!(matches!(err, hpo::Error::InvalidConfig(_)), "{err:?}");
    assert!(err.to_string().contains("`FloatOverlap`"), "{err}");
    the_contradiction(
        &TouchingBounds::describe(),
        "if lr > 1e-3 && lr <= 1e-2 { warmup >= 0.2 }",
        "if lr >= 1e-2 { warmup <= 0.1 }",
        "`warmup`",
    );
    the_contradiction(
        &AtTheRangeEnd::describe(),
        "if lr >= 1e-1",
        "if lr > 5e-2",
        "`warmup`",
    );
    the_contradiction(
        &OnGrid::describe(),
        "ratio > 0.3",
        "ratio < 0.55",
        "`width`",
    );
    the_contradiction(
        &OrOverlap::describe(),
        "if lr > 5e-2 || momentum < 0.1",
        "if lr != 1e-3 && lr >= 3e-2",
        "`warmup`",
    );
    the_contradiction(
        &FloatGap::describe(),
        "steps > 50_000.0",
        "steps < 50_001.0",
        "`batch`",
    );
    the_contradiction(
        &ActiveOverlap::describe(),
        "if extra == Some(2) { width >= 200 }",
        "if lr < 1e-3 { width <= 64 }",
        "`width`",
    );
}

#[test]
fn wide_integer_conditions_that_overlap_are_found_at_start_up() {
    the_contradiction(
        &WideInt::describe(),
        "if steps > 50_000 { batch <= 16 }",
        "if steps >= 90_000 { batch >= 32 }",
        "`batch`",
    );
    assert!(WideInt::check().is_err());
    // No integer lies strictly between 50,000 and 50,001.
    assert!(IntegerGap::describe().problems.is_empty());
    IntegerGap::check().unwrap();
}

#[test]
fn float_conditions_that_cannot_hold_together_are_not_reported() {
    for d in [
        FloatDisjoint::describe(),
        StrictBounds::describe(),
        PastTheRangeEnd::describe(),
        OffGrid::describe(),
        RuledOutByANarrowing::describe(),
        MixedWithBools::describe(),
        ActiveDisjoint::describe(),
        OrDisjoint::describe(),
    ] {
        assert!(d.problems.is_empty(), "{}: {:?}", d.name, d.problems);
    }
    FloatDisjoint::check().unwrap();
    RuledOutByANarrowing::check().unwrap();
    // Sampling agrees: these spaces never end a trial infeasible.
    for seed in [4, 5] {
        let study = random_study(seed);
        for _ in 0..100 {
            let (c, trial): (FloatDisjoint, _) = sample_one(&study);
            assert!(c.lr >= 1e-4 || c.warmup <= 0.1, "{c:?}");
            study.tell(trial, 0.0).unwrap();
            let (c, trial): (StrictBounds, _) = sample_one(&study);
            assert!(c.lr < 1e-2 || c.warmup <= 0.1, "{c:?}");
            study.tell(trial, 0.0).unwrap();
        }
    }
    let study = random_study(6);
    for _ in 0..200 {
        let mut trial = study.ask().unwrap();
        let c = RuledOutByANarrowing::sample(&mut trial).unwrap();
        assert!(c.lr <= 1e-2 || c.momentum <= 0.5, "{c:?}");
        study.tell(trial, 0.0).unwrap();
    }
}

#[test]
fn the_reported_float_region_is_exactly_where_trials_are_infeasible() {
    let study = random_study(8);
    let (mut infeasible, mut complete) = (0, 0);
    for _ in 0..200 {
        let mut trial = study.ask().unwrap();
        match FloatOverlap::sample(&mut trial) {
            Ok(c) => {
                assert!(c.lr <= 1e-2, "{c:?}");
                complete += 1;
                study.tell(trial, 0.0).unwrap();
            }
            Err(e) => {
                let msg = e.to_string();
                assert!(matches!(e, TrialError::Infeasible(_)), "{msg}");
                assert!(
                    msg.contains("if lr > 1e-3 { warmup >= 0.2 }")
                        && msg.contains("if lr > 1e-2 { warmup <= 0.1 }"),
                    "{msg}"
                );
                let lr = trial.params()["lr"].as_f64().unwrap();
                assert!(lr > 1e-2, "{lr}");
                infeasible += 1;
                study.tell(trial, Err::<f64, _>(e)).unwrap();
            }
        }
    }
    assert!(infeasible > 10 && complete > 100, "{infeasible} {complete}");
}

/// As `FloatOverlap`, sampled by one test only (the report is once per
/// process).
#[hpo::search_space]
#[constraint(if lr > 1e-3 { warmup >= 0.2 })]
#[constraint(if lr > 1e-2 { warmup <= 0.1 })]
#[derive(Debug)]
struct FloatReported {
    #[param(float(1e-5..=1e-1, log))]
    lr: f64,
    #[param(float(0.0..=0.5))]
    warmup: f64,
}

#[test]
fn the_first_sample_reports_a_float_contradiction_once_before_any_trial_meets_it() {
    let study = random_study(12);
    let text = warnings(|| {
        for _ in 0..20 {
            let mut trial = study.ask().unwrap();
            let outcome = FloatReported::sample(&mut trial).map(|_| 0.0);
            study.tell(trial, outcome).unwrap();
        }
    });
    assert_eq!(
        text.matches("search space `FloatReported`").count(),
        1,
        "reported once: {text}"
    );
    assert!(
        text.contains("if lr > 1e-3 { warmup >= 0.2 }")
            && text.contains("if lr > 1e-2 { warmup <= 0.1 }"),
        "{text}"
    );
    // The warning came before the first trial ended, and trials that met
    // both conditions came after it.
    let report = text.find("search space `FloatReported`").unwrap();
    let first_trial = text.find("trial 0 ").unwrap();
    assert!(report < first_trial, "{text}");
    assert!(text.contains("failed (infeasible)"), "{text}");
}

#[test]
fn float_conditions_in_forms_not_decided_are_left_to_the_trial() {
    assert!(Undecided::describe().problems.is_empty());
    let study = random_study(9);
    let mut infeasible = 0;
    for _ in 0..200 {
        let mut trial = study.ask().unwrap();
        match Undecided::sample(&mut trial) {
            Ok(c) => {
                assert!(c.lr <= 1e-2, "{c:?}");
                study.tell(trial, 0.0).unwrap();
            }
            Err(e) => {
                let msg = e.to_string();
                assert!(
                    msg.contains("if lr > 1e-3 { warmup >= 0.2 }")
                        && msg.contains("if lr * 10.0 > 1e-1 { warmup <= 0.1 }"),
                    "{msg}"
                );
                infeasible += 1;
                study.tell(trial, Err::<f64, _>(e)).unwrap();
            }
        }
    }
    assert!(infeasible > 10, "{infeasible}");
}

/// A toy objective over the constrained space: the optimum is a heavy model
/// (which the constraint forces to small batches) with lr near 1e-4.
fn toy(c: &Criteria) -> f64 {
    let model = if c.model == Backbone::DebertaV3Large {
        0.0
    } else {
        1.0
    };
    let lr = (c.lr.log10() + 4.0).powi(2);
    let batch = (c.batch_size as f64 - 16.0).abs() / 16.0;
    let len = (c.max_len as f64 - 384.0).abs() / 256.0;
    model + lr + batch + len + 0.1 * c.grad_accum as f64
}

/// Best toy value found by `sampler` in 150 trials of the constrained space.
fn best_found(sampler: impl hpo::Sampler + 'static) -> (f64, Criteria) {
    let study = Study::builder()
        .direction(Direction::Minimize)
        .sampler(sampler)
        .build()
        .unwrap();
    study
        .optimize(150, |trial| -> Result<f64, TrialError> {
            let c = Criteria::sample(trial)?;
            Ok(toy(&c))
        })
        .unwrap();
    let best = Criteria::from_params(&study.best_trial().unwrap().params()).unwrap();
    check_criteria(&best);
    (toy(&best), best)
}

#[test]
fn tpe_converges_on_a_constrained_space_and_beats_random() {
    let mut tpe = Vec::new();
    let mut random = Vec::new();
    for seed in 0..4 {
        let (v, best) = best_found(TpeSampler::seeded(seed));
        eprintln!("seed {seed}: TPE best {v} with {best:?}");
        tpe.push(v);
        random.push(best_found(RandomSampler::seeded(seed)).0);
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        (v[1] + v[2]) / 2.0
    };
    // A good value needs the heavy model (forced to batch_size <= 16 by the
    // constraint), lr near 1e-4 and the largest allowed length.
    let good = tpe.iter().filter(|v| **v < 0.9).count();
    assert!(
        good >= 3,
        "TPE reached < 0.9 in only {good} of 4 seeds: {tpe:?}"
    );
    let (t, r) = (median(&mut tpe), median(&mut random));
    assert!(t < r, "TPE median best {t} is not below random's {r}");
}

/// A crate that re-exports `hpo` elsewhere points the macros at it.
mod reexport {
    pub use hpo as engine;
}

#[derive(Debug, Clone, Copy, PartialEq, hpo::Choice)]
#[choice(crate = "crate::search_space::reexport::engine")]
enum Act {
    Relu,
    Gelu,
}

#[hpo::search_space(crate = "crate::search_space::reexport::engine")]
#[derive(Debug, PartialEq)]
struct Reexported {
    #[param(choice)]
    act: Act,
    #[param(int(1..=4))]
    layers: u8,
}

#[test]
fn the_crate_path_can_be_overridden() {
    let study = random_study(5);
    let (c, trial): (Reexported, _) = sample_one(&study);
    assert_eq!(Reexported::from_params(&trial.params()).unwrap(), c);
    assert_eq!(trial.params().len(), 2);
}
