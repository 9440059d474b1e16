//! A tiny HuggingFace-style BERT checkpoint written here, then loaded.

use hpo_burn::{Checkpoint, Cpu, Error};
use safetensors::tensor::{serialize_to_file, Dtype, TensorView};
use std::collections::BTreeMap;
use std::path::Path;

const VOCAB: usize = 12;
const H: usize = 8;
const FF: usize = 16;
const LAYERS: usize = 2;
const POS: usize = 32;

/// Key -> shape (PyTorch layout: linear weights are [out, in]).
fn hf_tensors() -> BTreeMap<String, Vec<usize>> {
    let mut t = BTreeMap::new();
    let mut add = |k: String, s: Vec<usize>| {
        t.insert(k, s);
    };
    add(
        "bert.embeddings.word_embeddings.weight".into(),
        vec![VOCAB, H],
    );
    add(
        "bert.embeddings.position_embeddings.weight".into(),
        vec![POS, H],
    );
    add(
        "bert.embeddings.token_type_embeddings.weight".into(),
        vec![2, H],
    );
    add("bert.embeddings.LayerNorm.weight".into(), vec![H]);
    add("bert.embeddings.LayerNorm.bias".into(), vec![H]);
    for l in 0..LAYERS {
        let p = format!("bert.encoder.layer.{l}");
        for m in ["query", "key", "value"] {
            add(format!("{p}.attention.self.{m}.weight"), vec![H, H]);
            add(format!("{p}.attention.self.{m}.bias"), vec![H]);
        }
        add(format!("{p}.attention.output.dense.weight"), vec![H, H]);
        add(format!("{p}.attention.output.dense.bias"), vec![H]);
        add(format!("{p}.attention.output.LayerNorm.weight"), vec![H]);
        add(format!("{p}.attention.output.LayerNorm.bias"), vec![H]);
        add(format!("{p}.intermediate.dense.weight"), vec![FF, H]);
        add(format!("{p}.intermediate.dense.bias"), vec![FF]);
        add(format!("{p}.output.dense.weight"), vec![H, FF]);
        add(format!("{p}.output.dense.bias"), vec![H]);
        add(format!("{p}.output.LayerNorm.weight"), vec![H]);
        add(format!("{p}.output.LayerNorm.bias"), vec![H]);
    }
    add("bert.pooler.dense.weight".into(), vec![H, H]);
    add("bert.pooler.dense.bias".into(), vec![H]);
    // Present in real checkpoints, unused by a classifier.
    add("cls.predictions.bias".into(), vec![VOCAB]);
    t
}

/// Deterministic, distinct values per tensor: element i of tensor k is k + i/1000.
fn values(k: usize, n: usize) -> Vec<f32> {
    (0..n).map(|i| k as f32 + i as f32 / 1000.0).collect()
}

fn write_checkpoint(dir: &Path, tensors: &BTreeMap<String, Vec<usize>>) {
    let config = serde_json::json!({
        "architectures": ["BertForMaskedLM"],
        "vocab_size": VOCAB, "hidden_size": H, "num_hidden_layers": LAYERS,
        "num_attention_heads": 2, "intermediate_size": FF,
        "max_position_embeddings": POS, "type_vocab_size": 2,
        "layer_norm_eps": 1e-12, "hidden_act": "gelu", "hidden_dropout_prob": 0.1
    });
    std::fs::write(dir.join("config.json"), config.to_string()).unwrap();
    std::fs::write(
        dir.join("vocab.txt"),
        "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\ni\nfeel\nsad\nhappy\n##ly\ntoday\n.\n",
    )
    .unwrap();
    let bytes: Vec<(String, Vec<usize>, Vec<u8>)> = tensors
        .iter()
        .enumerate()
        .map(|(k, (name, shape))| {
            let n = shape.iter().product();
            let data: Vec<u8> = values(k, n).iter().flat_map(|v| v.to_le_bytes()).collect();
            (name.clone(), shape.clone(), data)
        })
        .collect();
    let views: Vec<(String, TensorView<'_>)> = bytes
        .iter()
        .map(|(n, s, d)| {
            (
                n.clone(),
                TensorView::new(Dtype::F32, s.clone(), d).unwrap(),
            )
        })
        .collect();
    serialize_to_file(views, None, &dir.join("model.safetensors")).unwrap();
}

fn floats(t: hpo_burn::burn::tensor::Tensor<Cpu, 2>) -> Vec<f32> {
    t.into_data().to_vec::<f32>().unwrap()
}

#[test]
fn loads_every_tensor_with_the_key_mapping() {
    let _lock = crate::backend_lock();
    let dir = tempfile::tempdir().unwrap();
    let tensors = hf_tensors();
    write_checkpoint(dir.path(), &tensors);
    let ckpt = Checkpoint::open(dir.path()).unwrap();
    let config = ckpt.model_config(3).with_head(1, 4);
    let model = config.init::<Cpu>(&Default::default()).unwrap();
    let (model, report) = ckpt.load_into(model).unwrap();

    // Every backbone tensor loaded, only the head fresh, the MLM bias unused.
    assert_eq!(
        report.loaded.len(),
        tensors.len() - 1,
        "{:?}",
        report.loaded
    );
    assert_eq!(report.fresh.len(), 4, "{:?}", report.fresh);
    assert!(report.fresh.iter().all(|p| p.starts_with("head.")));
    assert_eq!(report.unused, vec!["cls.predictions.bias".to_string()]);

    // Values: linear weights are transposed from [out, in] to [in, out].
    let k = tensors
        .keys()
        .position(|n| n == "bert.encoder.layer.1.attention.self.query.weight")
        .unwrap();
    let written = values(k, H * H);
    let loaded = floats(model.encoder.layers[1].mha.query.weight.val());
    for o in 0..H {
        for i in 0..H {
            assert_eq!(loaded[i * H + o], written[o * H + i]);
        }
    }
    let k = tensors
        .keys()
        .position(|n| n == "bert.encoder.layer.0.intermediate.dense.weight")
        .unwrap();
    let loaded = floats(model.encoder.layers[0].pwff.linear_inner.weight.val());
    assert_eq!(loaded[1], values(k, FF * H)[H]); // [in=0, out=1] <- [out=1, in=0]
    let k = tensors
        .keys()
        .position(|n| n == "bert.embeddings.word_embeddings.weight")
        .unwrap();
    assert_eq!(
        floats(model.embeddings.token.weight.val()),
        values(k, VOCAB * H)
    );
    let k = tensors
        .keys()
        .position(|n| n == "bert.encoder.layer.0.output.LayerNorm.weight")
        .unwrap();
    let gamma = model.encoder.layers[0]
        .norm_2
        .gamma
        .val()
        .into_data()
        .to_vec::<f32>()
        .unwrap();
    assert_eq!(gamma, values(k, H));

    // The checkpoint's own vocabulary tokenizes.
    let tok = ckpt.tokenizer().unwrap();
    assert_eq!(tok.vocab_size(), VOCAB);
}

#[test]
fn missing_or_misshaped_keys_fail_loudly() {
    let _lock = crate::backend_lock();
    let dir = tempfile::tempdir().unwrap();
    let mut tensors = hf_tensors();
    tensors.remove("bert.encoder.layer.1.output.dense.weight");
    write_checkpoint(dir.path(), &tensors);
    let ckpt = Checkpoint::open(dir.path()).unwrap();
    let model = ckpt
        .model_config(2)
        .init::<Cpu>(&Default::default())
        .unwrap();
    let err = ckpt.load_into(model).unwrap_err();
    assert!(matches!(err, Error::Checkpoint { .. }));
    let msg = err.to_string();
    assert!(
        msg.contains("missing") && msg.contains("encoder.layers.1.pwff.linear_outer.weight"),
        "{msg}"
    );

    let dir = tempfile::tempdir().unwrap();
    let mut tensors = hf_tensors();
    tensors.insert(
        "bert.encoder.layer.0.attention.self.key.weight".into(),
        vec![H, H + 1],
    );
    write_checkpoint(dir.path(), &tensors);
    let ckpt = Checkpoint::open(dir.path()).unwrap();
    let model = ckpt
        .model_config(2)
        .init::<Cpu>(&Default::default())
        .unwrap();
    let msg = ckpt.load_into(model).unwrap_err().to_string();
    assert!(
        msg.contains("encoder.layers.0.mha.key.weight") && msg.to_lowercase().contains("shape"),
        "{msg}"
    );

    // A directory without weights is refused up front.
    std::fs::remove_file(dir.path().join("model.safetensors")).unwrap();
    let msg = Checkpoint::open(dir.path()).unwrap_err().to_string();
    assert!(msg.contains("model.safetensors"), "{msg}");
}

#[test]
fn truncation_loads_only_the_first_layers() {
    let _lock = crate::backend_lock();
    let dir = tempfile::tempdir().unwrap();
    let tensors = hf_tensors();
    write_checkpoint(dir.path(), &tensors);
    let ckpt = Checkpoint::open(dir.path()).unwrap().truncated(1).unwrap();
    assert_eq!(ckpt.stored_layers, LAYERS);
    assert!(ckpt.name().ends_with("[:1]"), "{}", ckpt.name());
    let config = ckpt.model_config(2);
    assert_eq!(config.layers, 1);
    let model = config.init::<Cpu>(&Default::default()).unwrap();
    let (model, report) = ckpt.load_into(model).unwrap();
    assert_eq!(model.encoder.layers.len(), 1);

    // Layer 0, the embeddings and the pooler are loaded; layer 1 is not.
    let per_layer = 16;
    assert_eq!(report.loaded.len(), tensors.len() - 1 - per_layer);
    assert!(report.loaded.iter().all(|k| !k.contains("layers.1.")));
    assert!(report
        .loaded
        .iter()
        .any(|k| k == "encoder.layers.0.mha.query.weight"));
    assert!(report.loaded.iter().any(|k| k == "pooler.dense.weight"));
    let unused_layer_1 = report
        .unused
        .iter()
        .filter(|k| k.contains("layers.1.") || k.contains("layer.1."))
        .count();
    assert_eq!(unused_layer_1, per_layer, "{:?}", report.unused);

    // The values are layer 0's (transposed), not layer 1's.
    let k = tensors
        .keys()
        .position(|n| n == "bert.encoder.layer.0.attention.self.value.weight")
        .unwrap();
    let written = values(k, H * H);
    let loaded = floats(model.encoder.layers[0].mha.value.weight.val());
    for o in 0..H {
        for i in 0..H {
            assert_eq!(loaded[i * H + o], written[o * H + i]);
        }
    }
    let k = tensors
        .keys()
        .position(|n| n == "bert.pooler.dense.bias")
        .unwrap();
    let bias = model
        .pooler
        .dense
        .bias
        .as_ref()
        .unwrap()
        .val()
        .into_data()
        .to_vec::<f32>()
        .unwrap();
    assert_eq!(bias, values(k, H));

    // Keeping zero layers, or more than stored, is refused with the range.
    let full = Checkpoint::open(dir.path()).unwrap();
    for bad in [0, LAYERS + 1] {
        let msg = full.clone().truncated(bad).unwrap_err().to_string();
        assert!(msg.contains(&format!("1..={LAYERS}")), "{msg}");
    }
}
