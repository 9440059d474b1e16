//! The memory estimate against measured peaks, per model family, on the CPU.
//!
//! ```text
//! cargo run --release -p hpo-burn --example family_memory
//! ```
//!
//! For BERT, RoBERTa and DeBERTa-v3 layouts at the mini preset's
//! dimensions (4 layers, hidden 256, 4 heads, feed-forward 1024, an
//! 8,000-token vocabulary; DeBERTa with v3's 256 position buckets), at a
//! few micro-batch x length shapes, it trains two AdamW steps on synthetic
//! ids from fresh weights and compares the analytic estimate
//! (`estimate_training_memory`) with the growth of this process's peak
//! resident memory over the step (the kernel's peak counter reset before
//! each shape through `/proc/self/clear_refs`; each measurement in a
//! process of its own). Writes
//! `bench/results/family_memory.{json,md}` at the workspace root (or under
//! `$HPO_BENCH_OUT`).

use hpo_burn::batch::{make_batch, EncodedExample};
use hpo_burn::burn::nn::loss::CrossEntropyLoss;
use hpo_burn::burn::optim::{AdamWConfig, GradientsParams, Optimizer};
use hpo_burn::burn::tensor::backend::Backend;
use hpo_burn::burn::tensor::cast::ToElement;
use hpo_burn::memory::{process_peak_rss, process_rss};
use hpo_burn::model::Relative;
use hpo_burn::tokenize::Encoded;
use hpo_burn::{estimate_training_memory, Cpu, ModelConfig, Precision};
use serde_json::json;
use std::time::Instant;

const VOCAB: usize = 8000;
const SHAPES: [(usize, usize); 3] = [(16, 64), (32, 128), (16, 256)];

fn config(family: &str) -> ModelConfig {
    let mut c = ModelConfig::new(VOCAB, 2, 4, 256, 4, 1024).with_max_position(512);
    match family {
        "roberta" => {
            c.max_position = 514;
            c.position_offset = 2;
            c.type_vocab_size = 1;
        }
        "deberta" => {
            c.absolute_positions = false;
            c.type_vocab_size = 0;
            c.pooler_gelu = true;
            c.relative = Some(Relative {
                buckets: 256,
                max_distance: 512,
                norm: true,
            });
        }
        _ => {}
    }
    c
}

fn batch(size: usize, len: usize, seed: usize) -> Vec<EncodedExample> {
    (0..size)
        .map(|i| EncodedExample {
            encoded: Encoded {
                ids: (0..len)
                    .map(|j| (5 + (i * 131 + j * 17 + seed * 7) % (VOCAB - 5)) as u32)
                    .collect(),
                segments: vec![0; len],
            },
            label: i % 2,
        })
        .collect()
}

/// One family at one shape, in this process: two training steps from fresh
/// weights, the peak resident memory's growth over them, and the estimate.
fn measure(family: &str, size: usize, len: usize) -> anyhow::Result<serde_json::Value> {
    let device = Default::default();
    let reset = std::fs::write("/proc/self/clear_refs", "5").is_ok();
    let base = process_rss().unwrap_or(0);
    Cpu::seed(&device, 0);
    let config = config(family);
    let mut model = config.init::<Cpu>(&device)?;
    let mut optim = AdamWConfig::new().init();
    let started = Instant::now();
    for k in 0..2 {
        let examples = batch(size, len, k);
        let refs: Vec<&EncodedExample> = examples.iter().collect();
        let b = make_batch::<Cpu>(&refs, 0, &device);
        let logits = model.forward(b.input_ids, b.segment_ids, b.mask_pad);
        let loss = CrossEntropyLoss::new(None, &device).forward(logits, b.labels);
        let _ = loss.clone().into_scalar().to_f64();
        let grads = GradientsParams::from_grads(loss.backward(), &model);
        model = optim.step(1e-4, model, grads);
    }
    let seconds = started.elapsed().as_secs_f64() / 2.0;
    let estimate = estimate_training_memory(&config, size, len, Precision::F32).total();
    let measured = process_peak_rss()
        .filter(|_| reset)
        .map(|p| p.saturating_sub(base));
    Ok(json!({
        "family": family,
        "params": config.num_params(),
        "batch": size,
        "seq_len": len,
        "estimated_peak_bytes": estimate,
        "measured_peak_rss_delta_bytes": measured,
        "estimate_over_measured": measured.map(|m| estimate as f64 / m as f64),
        "seconds_per_step": seconds,
    }))
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let [family, size, len] = &args[..] {
        println!("{}", measure(family, size.parse()?, len.parse()?)?);
        return Ok(());
    }
    let out_dir = std::env::var("HPO_BENCH_OUT")
        .unwrap_or_else(|_| concat!(env!("CARGO_MANIFEST_DIR"), "/../bench/results").to_string());
    std::fs::create_dir_all(&out_dir)?;
    let mut rows = Vec::new();
    // Each measurement in a process of its own, so that no earlier one's
    // memory (kept by the allocator for reuse) hides part of its peak.
    for family in ["bert", "roberta", "deberta"] {
        for (size, len) in SHAPES {
            let out = std::process::Command::new(std::env::current_exe()?)
                .args([family.to_string(), size.to_string(), len.to_string()])
                .output()?;
            anyhow::ensure!(
                out.status.success(),
                "{family} {size}x{len}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            let row: serde_json::Value = serde_json::from_slice(&out.stdout)?;
            let mib = |k: &str| {
                row[k]
                    .as_f64()
                    .map_or("-".into(), |b| format!("{:.1}", b / 1048576.0))
            };
            println!(
                "{family:8} {size:3} x {len:3}: estimate {:>7} MiB, measured {:>7} MiB, {:.2} s/step",
                mib("estimated_peak_bytes"),
                mib("measured_peak_rss_delta_bytes"),
                row["seconds_per_step"].as_f64().unwrap_or(0.0)
            );
            rows.push(row);
        }
    }
    let machine = format!(
        "{} cores; {}",
        std::thread::available_parallelism().map_or(1, |n| n.get()),
        "the peak counter of /proc/self/status (VmHWM) after clear_refs"
    );
    let doc = json!({
        "made_by": "cargo run --release -p hpo-burn --example family_memory",
        "machine": machine,
        "rows": rows,
    });
    std::fs::write(
        format!("{out_dir}/family_memory.json"),
        serde_json::to_string_pretty(&doc)? + "\n",
    )?;
    let mut md = String::from(
        "| family | params | batch x len | estimate | measured peak RSS growth | estimate / measured | s/step |\n| --- | --- | --- | --- | --- | --- | --- |\n",
    );
    for r in &rows {
        let mib = |v: &serde_json::Value| {
            v.as_u64().map_or("-".to_string(), |b| {
                format!("{:.0} MiB", b as f64 / 1048576.0)
            })
        };
        md.push_str(&format!(
            "| {} | {:.1} M | {} x {} | {} | {} | {} | {:.2} |\n",
            r["family"].as_str().unwrap_or(""),
            r["params"].as_f64().unwrap_or(0.0) / 1e6,
            r["batch"],
            r["seq_len"],
            mib(&r["estimated_peak_bytes"]),
            mib(&r["measured_peak_rss_delta_bytes"]),
            r["estimate_over_measured"]
                .as_f64()
                .map_or("-".into(), |x| format!("{x:.2}")),
            r["seconds_per_step"].as_f64().unwrap_or(0.0),
        ));
    }
    std::fs::write(format!("{out_dir}/family_memory.md"), md)?;
    Ok(())
}
