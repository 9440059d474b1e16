//! Training throughput benchmark on the CPU backend.
//!
//! ```text
//! cargo bench -p hpo-burn --bench training
//! ```
//!
//! For the tiny and mini presets at micro-batch 32 x 128 tokens (no padding)
//! it times full training steps (forward, backward, AdamW), then writes
//! `training.json` and `training.md` to `bench/results/` at the workspace
//! root (or to `$HPO_BENCH_OUT`):
//! tokens/s, model-FLOPs utilisation against this CPU's peak, and the
//! analytic memory estimate next to the measured peak resident memory.
//!
//! Model FLOPs per trained token follow Kaplan et al. 2020: `6 N + 12 L s h`
//! (N = non-embedding parameters, L layers, s sequence length, h hidden).
//! Peak FLOP/s is `cores x clock x FLOPs/cycle/core`; the clock and FLOPs per
//! cycle are read from the environment (`HPO_CPU_GHZ`, `HPO_CPU_FLOPS_PER_CYCLE`)
//! with defaults for the 2-core AMD EPYC (Zen 4) this project's figures come
//! from: 2.6 GHz (the TSC rate; boost clock unknown inside the VM) and 32
//! f32 FLOPs/cycle (two 256-bit FMA pipes; Zen 4 splits AVX-512 into two
//! halves, and matrixmultiply's kernels use AVX2+FMA anyway).

use hpo_burn::batch::{make_batch, EncodedExample};
use hpo_burn::burn::nn::loss::CrossEntropyLoss;
use hpo_burn::burn::optim::{AdamWConfig, GradientsParams, Optimizer};
use hpo_burn::burn::tensor::backend::Backend;
use hpo_burn::burn::tensor::cast::ToElement;
use hpo_burn::memory::{process_peak_rss, process_rss};
use hpo_burn::tokenize::Encoded;
use hpo_burn::{estimate_training_memory, Cpu, ModelConfig, Precision, Preset};
use serde_json::json;
use std::time::{Duration, Instant};

const BATCH: usize = 32;
const LEN: usize = 128;
const VOCAB: usize = 8000;

fn env_f64(key: &str, default: f64) -> f64 {
    std::env::var(key)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn synthetic_batch(seed: usize) -> Vec<EncodedExample> {
    (0..BATCH)
        .map(|i| {
            let ids: Vec<u32> = (0..LEN)
                .map(|j| (5 + (i * 131 + j * 17 + seed * 7) % (VOCAB - 5)) as u32)
                .collect();
            EncodedExample {
                encoded: Encoded {
                    segments: vec![0; LEN],
                    ids,
                },
                label: i % 2,
            }
        })
        .collect()
}

fn main() -> anyhow::Result<()> {
    // `cargo bench` passes `--bench`; the output folder is not an argument.
    let out_dir = std::env::var("HPO_BENCH_OUT")
        .unwrap_or_else(|_| concat!(env!("CARGO_MANIFEST_DIR"), "/../bench/results").to_string());
    std::fs::create_dir_all(&out_dir)?;
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
    let ghz = env_f64("HPO_CPU_GHZ", 2.6);
    let flops_per_cycle = env_f64("HPO_CPU_FLOPS_PER_CYCLE", 32.0);
    let peak = cores * ghz * 1e9 * flops_per_cycle;
    let device = Default::default();
    let mut rows = Vec::new();

    for preset in [Preset::Tiny, Preset::Mini] {
        // Reset the peak-RSS counter so each preset's peak is its own.
        let reset = std::fs::write("/proc/self/clear_refs", "5").is_ok();
        let base_rss = process_rss().unwrap_or(0);
        Cpu::seed(&device, 0);
        let config = ModelConfig::preset(preset, VOCAB, 2).with_max_position(LEN);
        let mut model = config.init::<Cpu>(&device)?;
        let mut optim = AdamWConfig::new().init();
        let batches: Vec<Vec<EncodedExample>> = (0..4).map(synthetic_batch).collect();
        let mut step = |k: usize, model: hpo_burn::BertClassifier<Cpu>| {
            let refs: Vec<&EncodedExample> = batches[k % batches.len()].iter().collect();
            let b = make_batch::<Cpu>(&refs, 0, &device);
            let logits = model.forward(b.input_ids, b.segment_ids, b.mask_pad);
            let loss = CrossEntropyLoss::new(None, &device).forward(logits, b.labels);
            let _ = loss.clone().into_scalar().to_f64();
            let grads = GradientsParams::from_grads(loss.backward(), &model);
            optim.step(1e-4, model, grads)
        };
        for k in 0..2 {
            model = step(k, model); // warm-up
        }
        let started = Instant::now();
        let mut steps = 0;
        while steps < 3 || started.elapsed() < Duration::from_secs(20) {
            model = step(steps, model);
            steps += 1;
        }
        let seconds = started.elapsed().as_secs_f64();
        let tokens = (steps * BATCH * LEN) as f64;
        let tokens_per_s = tokens / seconds;
        let embedding =
            (config.vocab_size + config.max_position + config.type_vocab_size) * config.hidden;
        let non_embedding = (config.num_params() - embedding) as f64;
        let flops_per_token =
            6.0 * non_embedding + 12.0 * (config.layers * LEN * config.hidden) as f64;
        let achieved = flops_per_token * tokens_per_s;
        let estimate = estimate_training_memory(&config, BATCH, LEN, Precision::F32).total();
        let measured = process_peak_rss()
            .filter(|_| reset)
            .map(|p| p.saturating_sub(base_rss));
        let row = json!({
            "preset": preset.name(),
            "params": config.num_params(),
            "batch": BATCH,
            "seq_len": LEN,
            "steps": steps,
            "seconds": seconds,
            "tokens_per_s": tokens_per_s,
            "model_flops_per_token": flops_per_token,
            "achieved_gflops": achieved / 1e9,
            "mfu": achieved / peak,
            "estimated_peak_bytes": estimate,
            "measured_peak_rss_delta_bytes": measured,
        });
        println!("{row}");
        rows.push(row);
        drop(model);
    }

    let report = json!({
        "benchmark": "hpo-burn training throughput (CPU, burn-flex backend)",
        "cpu_cores": cores,
        "cpu_ghz": ghz,
        "flops_per_cycle_per_core": flops_per_cycle,
        "peak_gflops": peak / 1e9,
        "rows": rows,
    });
    std::fs::write(
        format!("{out_dir}/training.json"),
        serde_json::to_string_pretty(&report)?,
    )?;
    let mut md = String::from(
        "| preset | params | batch x len | tokens/s | GFLOP/s | MFU | estimated peak | measured peak RSS |\n| --- | --- | --- | --- | --- | --- | --- | --- |\n",
    );
    for r in &rows {
        let mib = |v: &serde_json::Value| {
            v.as_u64().map_or("n/a".to_string(), |b| {
                format!("{:.0} MiB", b as f64 / 1048576.0)
            })
        };
        md.push_str(&format!(
            "| {} | {:.2}M | {} x {} | {:.0} | {:.1} | {:.1}% | {} | {} |\n",
            r["preset"].as_str().unwrap_or(""),
            r["params"].as_f64().unwrap_or(0.0) / 1e6,
            BATCH,
            LEN,
            r["tokens_per_s"].as_f64().unwrap_or(0.0),
            r["achieved_gflops"].as_f64().unwrap_or(0.0),
            100.0 * r["mfu"].as_f64().unwrap_or(0.0),
            mib(&r["estimated_peak_bytes"]),
            mib(&r["measured_peak_rss_delta_bytes"]),
        ));
    }
    md.push_str(&format!(
        "\nPeak: {cores} cores x {ghz} GHz x {flops_per_cycle} FLOP/cycle = {:.0} GFLOP/s.\n",
        peak / 1e9
    ));
    std::fs::write(format!("{out_dir}/training.md"), &md)?;
    print!("{md}");
    Ok(())
}
