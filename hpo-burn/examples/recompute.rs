//! Activation recomputation on the CPU: peak memory and step time with and
//! without it, for the base and large presets.
//!
//! ```text
//! cargo run --release -p hpo-burn --example recompute
//! ```
//!
//! For BERT-base (12 layers, hidden 768), BERT-large (24 layers, hidden
//! 1024), both with BERT's 30,522-token vocabulary, and a DeBERTa-v3-base
//! layout (BERT-base's dimensions, 256 relative position buckets, v3's
//! 128,100-token vocabulary), at a few micro-batch x length shapes, it
//! trains three AdamW steps on synthetic ids from fresh weights (dropout
//! 0.1), once keeping every layer's activations and once recomputing them
//! ([`hpo_burn::train::recompute`]), each in a process of its own (the
//! kernel's peak counter reset through `/proc/self/clear_refs`). It reports
//! the growth of the peak resident memory over the steps, the estimate
//! (`estimate_training_memory_with`), and the mean wall and CPU seconds
//! (user and system time of all threads) of the last two steps; the table's
//! times are CPU seconds, which other processes on the machine move less. From BERT-base's steps at micro-batch 4, 8 and 16 x 128 it
//! also fits the fixed cost of a pass, in tokens, that makes a smaller
//! micro-batch slower per example (the executor's
//! [`hpo_burn::estimator::StepTime`]). Writes
//! `bench/results/recompute.{json,md}` at the workspace root (or under
//! `$HPO_BENCH_OUT`).

use hpo_burn::batch::{make_batch, EncodedExample};
use hpo_burn::burn::module::AutodiffModule;
use hpo_burn::burn::nn::loss::CrossEntropyLoss;
use hpo_burn::burn::optim::{AdamWConfig, GradientsParams, Optimizer};
use hpo_burn::burn::tensor::backend::Backend;
use hpo_burn::burn::tensor::cast::ToElement;
use hpo_burn::memory::{process_peak_rss, process_rss};
use hpo_burn::model::{Preset, Relative};
use hpo_burn::tokenize::Encoded;
use hpo_burn::train::recompute::recomputed_gradients;
use hpo_burn::{estimate_training_memory_with, Cpu, ModelConfig, Precision};
use serde_json::{json, Value};
use std::time::Instant;

/// `(model, micro-batch, length)`, measured kept and recomputed.
const RUNS: [(&str, usize, usize); 8] = [
    ("bert-base", 4, 128),
    ("bert-base", 8, 128),
    ("bert-base", 16, 128),
    ("bert-base", 8, 256),
    ("deberta-v3-base", 8, 128),
    ("deberta-v3-base", 8, 256),
    ("bert-large", 4, 128),
    ("bert-large", 8, 128),
];

fn config(model: &str) -> ModelConfig {
    let mut c = match model {
        "bert-large" => ModelConfig::preset(Preset::Large, 30522, 2),
        "deberta-v3-base" => ModelConfig::preset(Preset::Base, 128_100, 2),
        _ => ModelConfig::preset(Preset::Base, 30522, 2),
    };
    c.dropout = 0.1;
    if model.starts_with("deberta") {
        c.absolute_positions = false;
        c.type_vocab_size = 0;
        c.pooler_gelu = true;
        c.relative = Some(Relative {
            buckets: 256,
            max_distance: 512,
            norm: true,
        });
    }
    c
}

fn batch(size: usize, len: usize, seed: usize, vocab: usize) -> Vec<EncodedExample> {
    (0..size)
        .map(|i| EncodedExample {
            encoded: Encoded {
                ids: (0..len)
                    .map(|j| (5 + (i * 131 + j * 17 + seed * 7) % (vocab - 5)) as u32)
                    .collect(),
                segments: vec![0; len],
            },
            label: i % 2,
        })
        .collect()
}

/// One run in this process: three training steps from fresh weights.
fn measure(model: &str, size: usize, len: usize, recompute: bool) -> anyhow::Result<Value> {
    let device = Default::default();
    let reset = std::fs::write("/proc/self/clear_refs", "5").is_ok();
    let base = process_rss().unwrap_or(0);
    Cpu::seed(&device, 0);
    let config = config(model);
    let mut net = config.init::<Cpu>(&device)?;
    // burn draws a parameter when it is first read: draw them all now, so
    // that both runs start from the same weights and draw the same masks.
    let _ = net.valid();
    let mut optim = AdamWConfig::new().init();
    let criterion = CrossEntropyLoss::new(None, &device);
    let mut seconds = Vec::new();
    let mut cpu = Vec::new();
    let mut losses = Vec::new();
    for k in 0..3 {
        let started = Instant::now();
        let cpu_started = cpu_seconds();
        let examples = batch(size, len, k, config.vocab_size);
        let refs: Vec<&EncodedExample> = examples.iter().collect();
        let b = make_batch::<Cpu>(&refs, 0, &device);
        let labels = b.labels.clone();
        let loss = |logits| -> hpo_burn::Result<_> {
            let loss = criterion.forward(logits, labels);
            Ok((loss.clone().into_scalar().to_f64(), loss))
        };
        let (value, grads) = if recompute {
            recomputed_gradients(&net, b, loss)?
        } else {
            let logits = net.forward(b.input_ids, b.segment_ids, b.mask_pad);
            let (value, loss) = loss(logits)?;
            (value, GradientsParams::from_grads(loss.backward(), &net))
        };
        net = optim.step(1e-4, net, grads);
        losses.push(value);
        seconds.push(started.elapsed().as_secs_f64());
        cpu.push(cpu_seconds() - cpu_started);
    }
    let step = (seconds[1] + seconds[2]) / 2.0;
    let cpu_step = (cpu[1] + cpu[2]) / 2.0;
    let estimate =
        estimate_training_memory_with(&config, size, len, Precision::F32, recompute).total();
    let measured = process_peak_rss()
        .filter(|_| reset)
        .map(|p| p.saturating_sub(base));
    Ok(json!({
        "model": model,
        "params": config.num_params(),
        "batch": size,
        "seq_len": len,
        "recompute": recompute,
        "losses": losses,
        "estimated_peak_bytes": estimate,
        "measured_peak_rss_delta_bytes": measured,
        "estimate_over_measured": measured.map(|m| estimate as f64 / m as f64),
        "seconds_per_step": step,
        "cpu_seconds_per_step": cpu_step,
    }))
}

/// This process's CPU time (user and system, all threads) in seconds, from
/// `/proc/self/stat` (0 where it cannot be read): less moved than wall time
/// by other processes on the machine.
fn cpu_seconds() -> f64 {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return 0.0;
    };
    // The fields after the command name (which may hold spaces), from the
    // state: utime and stime are the 12th and 13th.
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    (ticks(11) + ticks(12)) / 100.0
}

/// The fixed cost of a pass in tokens, `p` in `time per example ∝ 1 +
/// p / tokens per pass`, from the smallest and largest micro-batch of
/// BERT-base at length 128, activations kept (CPU time).
fn pass_tokens(rows: &[Value]) -> Option<f64> {
    let per_example = |micro: u64| {
        rows.iter()
            .find(|r| {
                r["model"] == "bert-base"
                    && r["seq_len"] == 128
                    && r["batch"] == micro
                    && r["recompute"] == false
            })
            .and_then(|r| r["cpu_seconds_per_step"].as_f64())
            .map(|s| s / micro as f64)
    };
    let (small, large) = (per_example(4)?, per_example(16)?);
    // small / large = (1 + p/512) / (1 + p/2048)
    let ratio = small / large;
    let p = (ratio - 1.0) / (1.0 / 512.0 - ratio / 2048.0);
    Some(p.max(0.0))
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let [model, size, len, mode] = &args[..] {
        let value = measure(model, size.parse()?, len.parse()?, mode == "recompute")?;
        println!("{value}");
        return Ok(());
    }
    let out_dir = std::env::var("HPO_BENCH_OUT")
        .unwrap_or_else(|_| concat!(env!("CARGO_MANIFEST_DIR"), "/../bench/results").to_string());
    std::fs::create_dir_all(&out_dir)?;
    let mut rows = Vec::new();
    for (model, size, len) in RUNS {
        for mode in ["kept", "recompute"] {
            let out = std::process::Command::new(std::env::current_exe()?)
                .args([model, &size.to_string(), &len.to_string(), mode])
                .output()?;
            anyhow::ensure!(
                out.status.success(),
                "{model} {size}x{len} {mode}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            let row: Value = serde_json::from_slice(&out.stdout)?;
            let mib = |k: &str| {
                row[k]
                    .as_f64()
                    .map_or("-".into(), |b| format!("{:.0}", b / 1048576.0))
            };
            println!(
                "{model:16} {size:3} x {len:3} {mode:9}: estimate {:>6} MiB, measured {:>6} MiB, {:.2} s/step ({:.2} CPU s), losses {}",
                mib("estimated_peak_bytes"),
                mib("measured_peak_rss_delta_bytes"),
                row["seconds_per_step"].as_f64().unwrap_or(0.0),
                row["cpu_seconds_per_step"].as_f64().unwrap_or(0.0),
                row["losses"]
            );
            rows.push(row);
        }
    }
    let pass = pass_tokens(&rows);
    let doc = json!({
        "made_by": "cargo run --release -p hpo-burn --example recompute",
        "machine": format!(
            "{} cores; peak memory: the growth of VmHWM over the run after clear_refs, one process per row",
            std::thread::available_parallelism().map_or(1, |n| n.get())
        ),
        "pass_tokens_fitted": pass,
        "rows": rows,
    });
    std::fs::write(
        format!("{out_dir}/recompute.json"),
        serde_json::to_string_pretty(&doc)? + "\n",
    )?;
    std::fs::write(format!("{out_dir}/recompute.md"), table(&rows, pass))?;
    Ok(())
}

/// The markdown table: each shape's two runs side by side.
fn table(rows: &[Value], pass: Option<f64>) -> String {
    let mib = |v: &Value| v.as_f64().map_or(0.0, |b| b / 1048576.0);
    let mut md = String::from(
        "| model | micro-batch x len | peak RSS growth, kept | recomputed | memory saved | estimate / measured, kept | recomputed | CPU s/step, kept | recomputed | time factor | first loss, kept | recomputed |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n",
    );
    for pair in rows.chunks(2) {
        let [kept, again] = pair else { continue };
        let (mk, ma) = (
            mib(&kept["measured_peak_rss_delta_bytes"]),
            mib(&again["measured_peak_rss_delta_bytes"]),
        );
        let (sk, sa) = (
            kept["cpu_seconds_per_step"].as_f64().unwrap_or(0.0),
            again["cpu_seconds_per_step"].as_f64().unwrap_or(0.0),
        );
        let ratio = |r: &Value| {
            r["estimate_over_measured"]
                .as_f64()
                .map_or("-".into(), |x| format!("{x:.2}"))
        };
        md.push_str(&format!(
            "| {} | {} x {} | {mk:.0} MiB | {ma:.0} MiB | {:.0} % | {} | {} | {sk:.2} | {sa:.2} | {:.2} | {:.5} | {:.5} |\n",
            kept["model"].as_str().unwrap_or(""),
            kept["batch"],
            kept["seq_len"],
            100.0 * (1.0 - ma / mk.max(1e-9)),
            ratio(kept),
            ratio(again),
            sa / sk.max(1e-9),
            kept["losses"][0].as_f64().unwrap_or(0.0),
            again["losses"][0].as_f64().unwrap_or(0.0),
        ));
    }
    if let Some(p) = pass {
        md.push_str(&format!(
            "\nFixed cost of a pass (BERT-base, 4 against 16 x 128, activations kept): {p:.0} tokens.\n"
        ));
    }
    md
}
