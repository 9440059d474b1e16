//! One training run on the shipped VADER tweets, printing every epoch.
//!
//! ```text
//! cargo run --release -p hpo-burn --example fit_vader -- [PRESET] [EPOCHS] [LR] [TRAIN_LIMIT] [MAX_LEN] [BATCH] [balanced|plain]
//! ```

use hpo_burn::{
    load_tsv, run, Cpu, MemoryGuard, Pooling, Preset, Recorder, RunSpec, TextTask, TrainConfig,
    TsvSpec,
};

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let arg = |i: usize, d: &str| args.get(i).cloned().unwrap_or_else(|| d.to_string());
    let preset: Preset = arg(1, "tiny").parse()?;
    let epochs: usize = arg(2, "3").parse()?;
    let lr: f64 = arg(3, "1e-3").parse()?;
    let limit: usize = arg(4, "1200").parse()?;
    let max_len: usize = arg(5, "64").parse()?;
    let batch: usize = arg(6, "16").parse()?;
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../data/vader/tweets.tsv");
    let data = load_tsv(path, &TsvSpec::single("text", "label").with_positive("neg"))?;
    let (mut train, valid) = data.split_stratified(0.2, 42)?;
    if limit > 0 && limit < train.examples.len() {
        train = train
            .split_stratified(1.0 - limit as f64 / train.examples.len() as f64, 42)?
            .0;
    }
    let task = TextTask::new(train, valid, None, hpo_burn::DEFAULT_TRAINED_VOCAB)?;
    println!("vocab {}", task.tokenizer.vocab_size());
    let spec = RunSpec {
        preset,
        head_layers: 0,
        head_width: 128,
        dropout: 0.1,
        pooling: Pooling::Mean,
        train: TrainConfig {
            epochs,
            learning_rate: lr,
            micro_batch: batch,
            max_len,
            balanced_loss: arg(7, "balanced") == "balanced",
            ..TrainConfig::default()
        },
    };
    let t = std::time::Instant::now();
    let report = run::<Cpu, _>(
        &task,
        &spec,
        MemoryGuard::Unlimited,
        &Default::default(),
        &mut Recorder::new(),
    )?;
    for e in &report.history {
        println!(
            "epoch {} loss {:.4} valid acc {:.3} macro-F1 {:.3} ({:.1}s, {} tokens, {} padded)",
            e.epoch,
            e.train_loss,
            e.valid.accuracy,
            e.valid.macro_f1,
            e.train_seconds,
            e.tokens,
            e.padded_tokens
        );
    }
    println!("total {:.1}s", t.elapsed().as_secs_f64());
    Ok(())
}
