//! Each model family against HuggingFace transformers: a small randomly
//! initialised classifier per family, written with its tokenizer and what
//! transformers computed by `tests/fixtures/make_families.py` (the
//! committed fixtures under `tests/fixtures/families/`). On the CPU:
//! tokenizer ids equal on 300 tweets, single and paired; last hidden states
//! and logits within 1e-4; one training step's loss within 1e-5 and the
//! gradients of named parameters within 1e-3 relative.

use crate::relative_error;
use hpo_burn::burn::nn::loss::CrossEntropyLossConfig;
use hpo_burn::burn::tensor::{Bool, Int, Tensor, TensorData};
use hpo_burn::data::Text;
use hpo_burn::family::Family;
use hpo_burn::{BertClassifier, Checkpoint, Cpu, CpuInference};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::PathBuf;

#[derive(Deserialize)]
struct TokenizerIds {
    texts: usize,
    criterion: String,
    single: Vec<Vec<u32>>,
    pair: Vec<Vec<u32>>,
}

#[derive(Deserialize)]
struct Grad {
    shape: Vec<usize>,
    values: Vec<f32>,
}

/// `expected.json`, written by `make_families.py`.
#[derive(Deserialize)]
struct Expected {
    family: String,
    tokenizer: TokenizerIds,
    input_ids: Vec<Vec<i64>>,
    attention_mask: Vec<Vec<i64>>,
    hidden: usize,
    last_hidden_state: Vec<f32>,
    logits: Vec<f32>,
    labels: Vec<i64>,
    loss: f64,
    grads: BTreeMap<String, Grad>,
}

fn folder(family: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("tests/fixtures/families/{family}"))
}

fn expected(family: &str) -> Expected {
    let text = std::fs::read_to_string(folder(family).join("expected.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

/// The fixture's checkpoint as a two-class classifier with its classifier
/// loaded and no dropout anywhere (the fixture was made with dropout 0).
fn model<B: hpo_burn::burn::tensor::backend::Backend>(
    checkpoint: &Checkpoint,
) -> BertClassifier<B> {
    let mut config = checkpoint.model_config(2);
    config.head_dropout = 0.0;
    let model = config.init::<B>(&Default::default()).unwrap();
    let (model, report) = checkpoint.load_with_classifier(model).unwrap();
    assert!(
        report.fresh.is_empty(),
        "nothing starts fresh: {:?}",
        report.fresh
    );
    model
}

fn inputs<B: hpo_burn::burn::tensor::backend::Backend>(
    e: &Expected,
) -> (Tensor<B, 2, Int>, Tensor<B, 2, Int>, Tensor<B, 2, Bool>) {
    let (batch, len) = (e.input_ids.len(), e.input_ids[0].len());
    let device = Default::default();
    let ids: Vec<i64> = e.input_ids.concat();
    let pad: Vec<bool> = e.attention_mask.concat().iter().map(|&m| m == 0).collect();
    (
        Tensor::from_data(TensorData::new(ids, [batch, len]), &device),
        Tensor::zeros([batch, len], &device),
        Tensor::from_data(TensorData::new(pad, [batch, len]), &device),
    )
}

/// The hidden states at non-padding positions (transformers gives RoBERTa's
/// padding positions the padding id's position; hpo-burn counts on, and
/// nothing reads those positions past the attention mask).
fn unpadded(values: &[f32], e: &Expected) -> Vec<f32> {
    let mask = e.attention_mask.concat();
    values
        .chunks(e.hidden)
        .zip(mask)
        .filter(|(_, m)| *m == 1)
        .flat_map(|(row, _)| row.to_vec())
        .collect()
}

fn parity(family: &str, want: Family) {
    let e = expected(family);
    assert_eq!(e.family, family);
    let checkpoint = Checkpoint::open(folder(family)).unwrap();
    assert_eq!(checkpoint.family, want);

    // The tokenizer: the same ids as transformers' on 300 tweets.
    let tokenizer = checkpoint.tokenizer().unwrap();
    let tweets = hpo_burn::load_tsv(
        crate::vader_path(),
        &hpo_burn::TsvSpec::single("text", "label"),
    )
    .unwrap();
    let texts: Vec<String> = tweets.examples[..e.tokenizer.texts]
        .iter()
        .map(|x| match &x.text {
            Text::Single(t) => t.clone(),
            Text::Pair { text, .. } => text.clone(),
        })
        .collect();
    for (i, text) in texts.iter().enumerate() {
        let single = tokenizer.encode(&Text::Single(text.clone()), 512).unwrap();
        assert_eq!(
            single.ids, e.tokenizer.single[i],
            "{family} tweet {i}: {text}"
        );
        let pair = Text::Pair {
            criterion: e.tokenizer.criterion.clone(),
            text: text.clone(),
        };
        let pair = tokenizer.encode(&pair, 512).unwrap();
        assert_eq!(pair.ids, e.tokenizer.pair[i], "{family} pair {i}: {text}");
        // Segments within the token types (DeBERTa-v3 has none: ignored).
        let types = checkpoint.config.type_vocab_size as u32;
        let within = pair.segments.iter().all(|&s| s < types);
        assert!(types == 0 || within, "{family} pair {i}");
    }

    // Inference: last hidden states and logits.
    let infer = model::<CpuInference>(&checkpoint);
    let (ids, segments, pad) = inputs::<CpuInference>(&e);
    let hidden = infer.encode(ids.clone(), segments.clone(), pad.clone());
    let hidden: Vec<f32> = hidden.into_data().to_vec().unwrap();
    let d = max_abs_diff(&unpadded(&hidden, &e), &unpadded(&e.last_hidden_state, &e));
    assert!(d < 1e-4, "{family}: last hidden states differ by {d}");
    let logits: Vec<f32> = infer
        .forward(ids, segments, pad)
        .into_data()
        .to_vec()
        .unwrap();
    let d = max_abs_diff(&logits, &e.logits);
    assert!(
        d < 1e-4,
        "{family}: logits {logits:?} against {:?}",
        e.logits
    );

    // One training step: the loss and named gradients.
    let train = model::<Cpu>(&checkpoint);
    let (ids, segments, pad) = inputs::<Cpu>(&e);
    let logits = train.forward(ids, segments, pad);
    let labels = Tensor::<Cpu, 1, Int>::from_data(
        TensorData::new(e.labels.clone(), [e.labels.len()]),
        &Default::default(),
    );
    let loss = CrossEntropyLossConfig::new()
        .init(&Default::default())
        .forward(logits, labels);
    let value = f64::from(loss.clone().into_scalar());
    assert!(
        (value - e.loss).abs() < 1e-5,
        "{family}: loss {value} against {}",
        e.loss
    );
    let grads = loss.backward();
    for (name, want) in &e.grads {
        let got = gradient(&train, &grads, family, name);
        assert_eq!(got.len(), want.shape.iter().product::<usize>(), "{name}");
        let err = relative_error(&got, &want.values);
        assert!(
            err < 1e-3,
            "{family}: gradient of {name} off by {err:.2e} (relative)"
        );
    }
}

/// The gradient of the model parameter a HuggingFace name stands for (see
/// `hpo_burn::pretrained::KEY_MAPPING`), in PyTorch's layout (linear
/// weights transposed from burn's `[in, out]` to `[out, in]`).
fn gradient(
    model: &BertClassifier<Cpu>,
    grads: &<Cpu as hpo_burn::burn::tensor::backend::AutodiffBackend>::Gradients,
    family: &str,
    name: &str,
) -> Vec<f32> {
    let name = name.strip_prefix(&format!("{family}.")).unwrap_or(name);
    let layer = |n: &str| -> usize { n.split('.').nth(2).unwrap().parse().unwrap() };
    let vector =
        |t: Tensor<Cpu, 1>| -> Vec<f32> { t.grad(grads).unwrap().into_data().to_vec().unwrap() };
    let linear = |t: Tensor<Cpu, 2>| -> Vec<f32> {
        let g = t.grad(grads).unwrap();
        g.transpose().into_data().to_vec().unwrap()
    };
    match name {
        "embeddings.LayerNorm.weight" => vector(model.embeddings.norm.gamma.val()),
        "pooler.dense.bias" | "classifier.dense.bias" => {
            vector(model.pooler.dense.bias.as_ref().unwrap().val())
        }
        "classifier.weight" | "classifier.out_proj.weight" => {
            linear(model.head.output.weight.val())
        }
        "encoder.rel_embeddings.weight" => {
            let table = model
                .encoder
                .relative
                .as_ref()
                .unwrap()
                .embeddings
                .weight
                .val();
            table.grad(grads).unwrap().into_data().to_vec().unwrap()
        }
        n if n.ends_with("attention.self.query.weight")
            || n.ends_with("attention.self.query_proj.weight") =>
        {
            linear(model.encoder.layers[layer(n)].mha.query.weight.val())
        }
        n if n.ends_with("output.dense.weight") && !n.contains("attention") => linear(
            model.encoder.layers[layer(n)]
                .pwff
                .linear_outer
                .weight
                .val(),
        ),
        other => unreachable!("no mapping for {other} in this test"),
    }
}

#[test]
fn bert_matches_transformers() {
    parity("bert", Family::Bert);
}

#[test]
fn roberta_matches_transformers() {
    parity("roberta", Family::Roberta);
}

#[test]
fn deberta_matches_transformers() {
    parity("deberta", Family::Deberta);
}

/// A checkpoint of a layout hpo-burn does not load is refused naming its
/// `model_type`; a folder with only `pytorch_model.bin` names the
/// conversion.
#[test]
fn unknown_layouts_and_unconverted_folders_are_refused_by_name() {
    let dir = std::env::temp_dir().join(format!("hpo-families-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let config = std::fs::read_to_string(folder("roberta").join("config.json")).unwrap();
    let mut json: serde_json::Value = serde_json::from_str(&config).unwrap();
    json["model_type"] = "xlnet".into();
    std::fs::write(dir.join("config.json"), json.to_string()).unwrap();
    let e = Checkpoint::open(&dir).unwrap_err().to_string();
    let named = e.contains("\"xlnet\"") && e.contains("bert, roberta, deberta-v2");
    assert!(named, "{e}");
    json["model_type"] = "roberta".into();
    std::fs::write(dir.join("config.json"), json.to_string()).unwrap();
    std::fs::write(dir.join("pytorch_model.bin"), b"not read").unwrap();
    let e = Checkpoint::open(&dir).unwrap_err().to_string();
    assert!(
        e.contains("only pytorch_model.bin") && e.contains("bench/convert_checkpoint.py"),
        "{e}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Every parameter's gradient in `grads`, in the model's order.
fn all_gradients(
    model: &BertClassifier<Cpu>,
    grads: &hpo_burn::burn::optim::GradientsParams,
) -> Vec<Vec<f32>> {
    use hpo_burn::burn::module::{Module, ModuleVisitor, Param};
    struct Collect<'a>(&'a hpo_burn::burn::optim::GradientsParams, Vec<Vec<f32>>);
    impl ModuleVisitor<Cpu> for Collect<'_> {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<Cpu, D>>) {
            let g = self.0.get::<CpuInference, D>(param.id);
            self.1
                .push(g.map_or_else(Vec::new, |g| g.into_data().to_vec().unwrap()));
        }
    }
    let mut c = Collect(grads, Vec::new());
    model.visit(&mut c);
    c.1
}

/// Activation recomputation gives each family's transformers loss and the
/// ordinary step's gradients.
fn recomputed_step_matches(family: &str) {
    use hpo_burn::batch::Batch;
    use hpo_burn::burn::optim::GradientsParams;
    use hpo_burn::train::recompute::recomputed_gradients;
    let e = expected(family);
    let checkpoint = Checkpoint::open(folder(family)).unwrap();
    let train = model::<Cpu>(&checkpoint);
    let labels = || {
        Tensor::<Cpu, 1, Int>::from_data(
            TensorData::new(e.labels.clone(), [e.labels.len()]),
            &Default::default(),
        )
    };
    let criterion = CrossEntropyLossConfig::new().init(&Default::default());
    let (ids, segments, pad) = inputs::<Cpu>(&e);
    let loss = criterion.forward(train.forward(ids, segments, pad), labels());
    let ordinary = all_gradients(
        &train,
        &GradientsParams::from_grads(loss.backward(), &train),
    );

    let (ids, segments, pad) = inputs::<Cpu>(&e);
    let [size, len] = ids.dims();
    let batch = Batch {
        input_ids: ids,
        segment_ids: segments,
        mask_pad: pad,
        labels: labels(),
        size,
        len,
        tokens: size * len,
    };
    let (value, grads) = recomputed_gradients(&train, batch, |logits| {
        let loss = criterion.forward(logits, labels());
        Ok((f64::from(loss.clone().into_scalar()), loss))
    })
    .unwrap();
    assert!(
        (value - e.loss).abs() < 1e-5,
        "{family}: loss {value} against transformers' {}",
        e.loss
    );
    let recomputed = all_gradients(&train, &grads);
    assert_eq!(ordinary.len(), recomputed.len());
    for (i, (a, b)) in ordinary.iter().zip(&recomputed).enumerate() {
        assert_eq!(a.len(), b.len(), "{family}: parameter {i}");
        let scale = a.iter().fold(0f32, |m, v| m.max(v.abs())).max(1e-8);
        let d = max_abs_diff(a, b);
        assert!(
            d <= 1e-4 * scale,
            "{family}: parameter {i} off by {d} (scale {scale})"
        );
    }
    assert!(ordinary.iter().filter(|g| !g.is_empty()).count() > 20);
}

#[test]
fn recomputed_steps_match_for_every_family() {
    for family in ["bert", "roberta", "deberta"] {
        recomputed_step_matches(family);
    }
}
