//! GPU training throughput: BERT-base and BERT-large trained from scratch on
//! synthetic token ids, with hpo-burn's own training loop, for comparison
//! with the PyTorch reference (`bench/gpu/torch_bert_bench.py`) run on the
//! same device in the same call.
//!
//! ```text
//! cargo run --release -p hpo-burn --features cuda --example gpu_training -- \
//!     --device cuda:0 --out bench/results
//! cargo run --release -p hpo-burn --example gpu_training -- --device cpu \
//!     --shapes tiny:4x32 --steps 2        # the same steps on the CPU (dry run)
//! ```
//!
//! Each shape (`preset:BATCHxLENGTH`, with `+r` after it for activation
//! recomputation, `TrainConfig::recompute`) trains two epochs of `--steps`
//! optimizer steps with [`Trainer::fit`] (AdamW, gradient clipped over all
//! parameters, dropout 0.1, one micro-batch a step): the first epoch
//! compiles and autotunes the kernels, the second is timed. Per shape and
//! precision it reports tokens/s, model-FLOPs utilisation (6 x non-embedding
//! parameters + 12 x layers x length x hidden FLOPs per token, against the
//! card's dense peak for the precision's arithmetic: plain f32, TF32 and
//! bf16 are all given), the measured peak device memory (cubecl's reserved
//! bytes, sampled every step; NVML's per-process figure beside it) and the
//! analytic estimate. A matrix-product probe tells whether cubecl's f32
//! products ran in plain f32 or on TF32 tensor cores (relative error
//! against f64: ~1e-7 against ~3e-4), so that the comparison with PyTorch
//! is made at matched precision.
//!
//! Precisions: `f32` (everything f32, as hpo-burn trains), and `half`
//! (weights, gradients, optimizer state and activations all in bf16: burn
//! 0.21 has no mixed precision with f32 master weights, so this is the
//! speed of 16-bit compute, not a recipe to train with).
//!
//! `--products` first times each matrix product of a BERT-base 32 x 512
//! step by hpo-burn's product (`hpo_burn::model::matmul`: the table of
//! cubek kernels, or cuBLAS with `HPO_CUDA_MATMUL=cublas`; each row's
//! `ours` says which) and by burn's own product, and compares their results
//! and gradients (`gpu_products.json`; CUDA only; the `ms_table` and
//! `tflops_table` columns are hpo-burn's, whichever ran).
//! `HPO_CUDA_MATMUL=cublas` trains with cuBLAS's products,
//! `HPO_CUDA_MATMUL=burn` with burn's.
//!
//! Writes `gpu_training.json` and `gpu_training.md` to `--out`.

use anyhow::{bail, Context};
use hpo_burn::batch::EncodedExample;
use hpo_burn::burn::tensor::backend::{AutodiffBackend, Backend};
use hpo_burn::burn::tensor::{Distribution, Tensor, TensorData};
use hpo_burn::memory::{estimate_training_memory_with, Precision};
use hpo_burn::tokenize::Encoded;
use hpo_burn::train::{TrainData, Trainer};
use hpo_burn::{ModelConfig, Pooling, Preset, Recorder, TrainConfig};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::{json, Value};
use std::path::PathBuf;

const VOCAB: usize = 30522;

#[derive(Debug, Clone)]
struct Shape {
    preset: Preset,
    batch: usize,
    len: usize,
    /// `+r` after the shape: activation recomputation.
    recompute: bool,
}

impl std::str::FromStr for Shape {
    type Err = anyhow::Error;
    fn from_str(s: &str) -> anyhow::Result<Self> {
        let (s, recompute) = match s.strip_suffix("+r") {
            Some(rest) => (rest, true),
            None => (s, false),
        };
        let (name, dims) = s.split_once(':').with_context(|| {
            format!("shape `{s}`: expected PRESET:BATCHxLEN, such as base:32x512")
        })?;
        let (b, l) = dims
            .split_once('x')
            .with_context(|| format!("shape `{s}`: expected BATCHxLEN after the colon"))?;
        let Some(&preset) = Preset::ALL.iter().find(|p| p.name() == name) else {
            let names: Vec<&str> = Preset::ALL.iter().map(|p| p.name()).collect();
            bail!("unknown preset `{name}` ({})", names.join(", "));
        };
        Ok(Shape {
            preset,
            batch: b.parse().with_context(|| format!("batch in `{s}`"))?,
            len: l.parse().with_context(|| format!("length in `{s}`"))?,
            recompute,
        })
    }
}

struct Args {
    device: String,
    shapes: Vec<Shape>,
    precisions: Vec<String>,
    steps: usize,
    out: PathBuf,
    check_runtime: bool,
    /// `--products`: first compare hpo-burn's products with burn's.
    products: bool,
}

fn args() -> anyhow::Result<Args> {
    let mut a = Args {
        device: "cuda:0".into(),
        shapes: vec!["base:32x512".parse()?, "large:16x384".parse()?],
        precisions: vec!["f32".into(), "half".into()],
        steps: 12,
        out: PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../bench/results"),
        check_runtime: false,
        products: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().with_context(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--device" => a.device = value()?,
            "--shapes" => {
                a.shapes = value()?
                    .split(',')
                    .map(str::parse)
                    .collect::<anyhow::Result<_>>()?
            }
            "--precisions" => a.precisions = value()?.split(',').map(str::to_owned).collect(),
            "--steps" => a.steps = value()?.parse().context("--steps")?,
            "--out" => a.out = PathBuf::from(value()?),
            "--check-runtime" => a.check_runtime = true,
            "--products" => a.products = true,
            other => bail!(
                "unknown flag {other}; flags: --device, --shapes, --precisions, --steps, --out, \
                 --check-runtime, --products"
            ),
        }
    }
    for p in &a.precisions {
        if p != "f32" && p != "half" {
            bail!("unknown precision `{p}` (f32, half)");
        }
    }
    Ok(a)
}

/// `n` synthetic examples of exactly `len` tokens.
fn synthetic(n: usize, len: usize, seed: u64) -> Vec<EncodedExample> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    (0..n)
        .map(|_| {
            let mut ids: Vec<u32> = (0..len)
                .map(|_| rng.random_range(5..VOCAB as u32))
                .collect();
            ids[0] = 101;
            EncodedExample {
                encoded: Encoded {
                    segments: vec![0; ids.len()],
                    ids,
                },
                label: rng.random_range(0..2),
            }
        })
        .collect()
}

/// Dense peak FLOP/s of the card for plain f32, TF32 and bf16 (datasheet
/// figures for the SXM parts, no sparsity).
#[cfg(feature = "cuda")]
fn peaks(name: &str) -> Option<(f64, f64, f64)> {
    if name.contains("H100") || name.contains("H200") {
        Some((66.9e12, 494.7e12, 989.4e12))
    } else if name.contains("A100") {
        Some((19.5e12, 156e12, 312e12))
    } else {
        None
    }
}

/// Training FLOPs per token: 6 x non-embedding parameters + attention's
/// 12 x layers x length x hidden.
fn flops_per_token(m: &ModelConfig, len: usize) -> f64 {
    let embeddings = (m.vocab_size + m.max_position + m.type_vocab_size) * m.hidden;
    let dense = (m.num_params() - embeddings) as f64;
    6.0 * dense + 12.0 * (m.layers * len * m.hidden) as f64
}

fn run_shape<B: AutodiffBackend>(
    shape: &Shape,
    steps: usize,
    device: &B::Device,
    precision: Precision,
) -> anyhow::Result<Value> {
    let model_config = ModelConfig::preset(shape.preset, VOCAB, 2)
        .with_pooling(Pooling::Cls)
        .with_max_position(shape.len.max(512));
    let config = TrainConfig {
        epochs: 2,
        learning_rate: 1e-4,
        micro_batch: shape.batch,
        accumulation: 1,
        max_len: shape.len,
        warmup_ratio: 0.0,
        bucket_by_length: false,
        eval_batch: shape.batch,
        recompute: shape.recompute,
        seed: 7,
        ..TrainConfig::default()
    };
    let train = synthetic(steps * shape.batch, shape.len, 1);
    let valid = synthetic(shape.batch, shape.len, 2);
    let trainer = Trainer::<B>::new(
        config,
        model_config.clone(),
        shape.preset.name(),
        device.clone(),
    );
    let model = model_config.init::<B>(device)?;
    let mut rec = Recorder::new();
    let data = TrainData {
        train: &train,
        valid: &valid,
        pad_id: 0,
        classes: 2,
    };
    let (_, report) = trainer.fit(model, data, &mut rec)?;
    let timed = report.history.last().context("no epoch ran")?;
    let warm = report.history.first().context("no epoch ran")?;
    let tokens_per_s = timed.tokens as f64 / timed.train_seconds;
    let estimate = estimate_training_memory_with(
        &model_config,
        shape.batch,
        shape.len,
        precision,
        shape.recompute,
    );
    let attr = |k: &str| rec.attrs.get(k).and_then(Value::as_u64);
    Ok(json!({
        "preset": shape.preset.name(),
        "batch": shape.batch,
        "len": shape.len,
        "recompute": shape.recompute,
        "params": model_config.num_params(),
        "steps_timed": steps,
        "tokens_per_s": tokens_per_s,
        "first_epoch_seconds": warm.train_seconds,
        "timed_epoch_seconds": timed.train_seconds,
        "train_loss": timed.train_loss,
        "flops_per_token": flops_per_token(&model_config, shape.len),
        "peak_device_bytes": attr("peak_device_bytes"),
        "peak_in_use_bytes": attr("peak_in_use_bytes"),
        "nvml_process_peak_bytes": attr("nvml_process_peak_bytes"),
        "estimate_bytes": estimate.total(),
        "device_memory_env": hpo_core::executor::device_memory(),
    }))
}

/// Relative error of an f32 matrix product on the device against f64 on
/// the host, over sampled entries: ~1e-7 means plain f32 arithmetic,
/// ~1e-4..1e-3 TF32 tensor cores.
fn matmul_probe<B: Backend>(device: &B::Device) -> anyhow::Result<f64> {
    let n = 2048;
    let a = Tensor::<B, 2>::random([n, n], Distribution::Normal(0.0, 1.0), device);
    let b = Tensor::<B, 2>::random([n, n], Distribution::Normal(0.0, 1.0), device);
    let c = a.clone().matmul(b.clone());
    let host = |t: Tensor<B, 2>| -> anyhow::Result<Vec<f32>> {
        let d: TensorData = t
            .try_into_data()
            .map_err(|e| anyhow::anyhow!("reading the probe back: {e}"))?;
        d.convert::<f32>()
            .to_vec::<f32>()
            .map_err(|e| anyhow::anyhow!("probe data: {e:?}"))
    };
    let (a, b, c) = (host(a)?, host(b)?, host(c)?);
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    let (mut err, mut norm) = (0.0f64, 0.0f64);
    for _ in 0..2048 {
        let (i, j) = (rng.random_range(0..n), rng.random_range(0..n));
        let exact: f64 = (0..n)
            .map(|k| f64::from(a[i * n + k]) * f64::from(b[k * n + j]))
            .sum();
        err += (f64::from(c[i * n + j]) - exact).powi(2);
        norm += exact * exact;
    }
    Ok((err / norm).sqrt())
}

/// The products of a BERT-base 32 x 512 step (forward, and the gradients'
/// transposed views), each by hpo-burn's kernel table
/// ([`hpo_burn::model::matmul::matmul`]) and by burn's own product on the
/// same inputs: milliseconds per product (mean of 10 after 2 warm-ups) and
/// the relative difference of the two results; then one product's
/// gradients through the autodiff graph, both ways.
#[cfg(feature = "cuda")]
fn products<B: AutodiffBackend>(device: &B::Device) -> anyhow::Result<Vec<Value>> {
    use hpo_burn::model::matmul::matmul;
    type Inner<B> = <B as AutodiffBackend>::InnerBackend;
    let host = |t: Tensor<Inner<B>, 3>| -> anyhow::Result<Vec<f32>> {
        t.try_into_data()
            .map_err(|e| anyhow::anyhow!("reading a product back: {e}"))?
            .convert::<f32>()
            .to_vec::<f32>()
            .map_err(|e| anyhow::anyhow!("product data: {e:?}"))
    };
    let relative = |a: &[f32], b: &[f32]| {
        let (mut d, mut n) = (0.0f64, 0.0f64);
        for (x, y) in a.iter().zip(b) {
            d += (f64::from(*x) - f64::from(*y)).powi(2);
            n += f64::from(*y).powi(2);
        }
        (d / n.max(f64::MIN_POSITIVE)).sqrt()
    };
    let time = |f: &dyn Fn() -> Tensor<Inner<B>, 3>| -> anyhow::Result<f64> {
        for _ in 0..2 {
            drop(f());
        }
        Inner::<B>::sync(device).map_err(|e| anyhow::anyhow!("sync: {e:?}"))?;
        let t0 = std::time::Instant::now();
        for _ in 0..10 {
            drop(f());
        }
        Inner::<B>::sync(device).map_err(|e| anyhow::anyhow!("sync: {e:?}"))?;
        Ok(t0.elapsed().as_secs_f64() * 100.0)
    };
    // (what, batch, m, k, n, lhs given transposed, rhs given transposed)
    let cases: [(&str, usize, usize, usize, usize, bool, bool); 8] = [
        ("ffn in", 1, 16384, 768, 3072, false, false),
        ("ffn out", 1, 16384, 3072, 768, false, false),
        ("projection", 1, 16384, 768, 768, false, false),
        ("ffn in, weight grad", 1, 768, 16384, 3072, true, false),
        ("ffn in, input grad", 1, 16384, 3072, 768, false, true),
        ("scores q k^T", 384, 512, 64, 512, false, true),
        ("context p v", 384, 512, 512, 64, false, false),
        ("head", 1, 32, 768, 2, false, false),
    ];
    let normal = Distribution::Normal(0.0, 1.0);
    let mut rows = Vec::new();
    for (what, batch, m, k, n, lt, rt) in cases {
        let lhs = if lt {
            Tensor::<Inner<B>, 3>::random([batch, k, m], normal, device).swap_dims(1, 2)
        } else {
            Tensor::<Inner<B>, 3>::random([batch, m, k], normal, device)
        };
        let rhs = if rt {
            Tensor::<Inner<B>, 3>::random([batch, n, k], normal, device).swap_dims(1, 2)
        } else {
            Tensor::<Inner<B>, 3>::random([batch, k, n], normal, device)
        };
        let ours = host(matmul(lhs.clone(), rhs.clone()))?;
        let burns = host(lhs.clone().matmul(rhs.clone()))?;
        let ms_ours = time(&|| matmul(lhs.clone(), rhs.clone()))?;
        let ms_burn = time(&|| lhs.clone().matmul(rhs.clone()))?;
        let flops = 2.0 * (batch * m * k * n) as f64;
        let row = json!({
            "product": what, "batch": batch, "m": m, "k": k, "n": n,
            "ours": hpo_burn::model::matmul::product_kernel(),
            "ms_table": ms_ours, "ms_burn": ms_burn,
            "tflops_table": flops / ms_ours / 1e9, "tflops_burn": flops / ms_burn / 1e9,
            "relative_difference": relative(&ours, &burns),
        });
        eprintln!("gpu_training: products: {row}");
        rows.push(row);
    }
    // Gradients through the graph: hpo-burn's node against burn's.
    let a = Tensor::<Inner<B>, 3>::random([12, 128, 64], normal, device);
    let b = Tensor::<Inner<B>, 3>::random([12, 64, 128], normal, device);
    let w = Tensor::<Inner<B>, 3>::random([12, 128, 128], normal, device);
    let grads = |ours: bool| -> anyhow::Result<(Vec<f32>, Vec<f32>)> {
        let a = Tensor::<B, 3>::from_inner(a.clone()).require_grad();
        let b = Tensor::<B, 3>::from_inner(b.clone()).require_grad();
        let y = if ours {
            matmul(a.clone(), b.clone())
        } else {
            a.clone().matmul(b.clone())
        };
        let g = (y * Tensor::from_inner(w.clone())).sum().backward();
        let ga = a.grad(&g).context("a's gradient")?;
        let gb = b.grad(&g).context("b's gradient")?;
        Ok((host(ga)?, host(gb)?))
    };
    let (ours, burns) = (grads(true)?, grads(false)?);
    let row = json!({
        "product": "gradients through the graph", "batch": 12, "m": 128, "k": 64, "n": 128,
        "relative_difference_lhs_grad": relative(&ours.0, &burns.0),
        "relative_difference_rhs_grad": relative(&ours.1, &burns.1),
    });
    eprintln!("gpu_training: products: {row}");
    rows.push(row);
    Ok(rows)
}

fn bench<B: AutodiffBackend>(
    args: &Args,
    done: &mut Vec<Value>,
    device: &B::Device,
    precision: Precision,
    label: &str,
    card: Option<(f64, f64, f64)>,
) -> anyhow::Result<Vec<Value>> {
    let mut rows = Vec::new();
    for shape in &args.shapes {
        eprintln!("gpu_training: {label} {:?} ...", shape);
        let mut row = match run_shape::<B>(shape, args.steps, device, precision) {
            Ok(r) => r,
            Err(e) => json!({
                "preset": shape.preset.name(), "batch": shape.batch, "len": shape.len,
                "error": format!("{e:#}"),
            }),
        };
        row["precision"] = json!(label);
        row["fusion"] = json!(cfg!(feature = "cuda-fusion"));
        row["autotune"] = json!(cfg!(feature = "cuda-autotune"));
        row["matmul"] = json!(hpo_burn::model::matmul::product_kernel());
        if let (Some((f32_peak, tf32_peak, bf16_peak)), Some(tps), Some(fpt)) = (
            card,
            row["tokens_per_s"].as_f64(),
            row["flops_per_token"].as_f64(),
        ) {
            let achieved = tps * fpt;
            row["achieved_flops"] = json!(achieved);
            if label == "f32" {
                row["mfu_vs_f32"] = json!(achieved / f32_peak);
                row["mfu_vs_tf32"] = json!(achieved / tf32_peak);
            } else {
                row["mfu_vs_bf16"] = json!(achieved / bf16_peak);
            }
        }
        eprintln!("gpu_training: {row}");
        rows.push(row.clone());
        // Written after every row: a run cut short keeps what it measured.
        done.push(row);
        let partial = json!({ "device": args.device, "partial": true, "rows": done });
        let _ = std::fs::write(
            args.out.join("gpu_training.json"),
            serde_json::to_string_pretty(&partial).unwrap_or_default(),
        );
    }
    Ok(rows)
}

fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let args = args()?;
    if args.check_runtime {
        // What the device needs at run time, and nothing else: one line.
        if args.device == "cpu" {
            println!("runtime: the CPU backend needs no device runtime");
        } else {
            let report = hpo_burn::runtime::check_cuda()?;
            let index = args
                .device
                .trim_start_matches("cuda:")
                .parse::<u32>()
                .unwrap_or(0);
            let card = hpo_burn::nvml::report(index)?;
            println!(
                "runtime: {report}; NVML ({}) sees {} with {:.1} GiB",
                card.library,
                card.name,
                card.total as f64 / (1u64 << 30) as f64
            );
        }
        return Ok(());
    }
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("creating {}", args.out.display()))?;
    let (card_name, mut rows, probe) = match args.device.as_str() {
        "cpu" => {
            let device = Default::default();
            let mut rows = Vec::new();
            for p in &args.precisions {
                if p == "f32" {
                    rows.extend(bench::<hpo_burn::Cpu>(
                        &args,
                        &mut Vec::new(),
                        &device,
                        Precision::F32,
                        "f32",
                        None,
                    )?);
                } else {
                    eprintln!("gpu_training: `half` runs on CUDA only; skipped on the CPU");
                }
            }
            let probe = matmul_probe::<hpo_burn::CpuInference>(&device)?;
            ("cpu".to_owned(), rows, probe)
        }
        d if d.starts_with("cuda:") => cuda(&args, d)?,
        d => bail!("unknown device {d:?}; expected cpu or cuda:N"),
    };
    let probe_kind = if probe < 1e-5 { "f32" } else { "tf32 or lower" };
    for r in &mut rows {
        if r["precision"] == "f32" {
            r["matched_torch_mode"] = json!(if probe < 1e-5 { "fp32" } else { "tf32" });
        }
    }
    let out = json!({
        "device": args.device,
        "fusion": cfg!(feature = "cuda-fusion"),
        "autotune": cfg!(feature = "cuda-autotune"),
        "card": card_name,
        "matmul_f32_relative_error": probe,
        "matmul_f32_arithmetic": probe_kind,
        "rows": rows,
    });
    let json_path = args.out.join("gpu_training.json");
    std::fs::write(&json_path, serde_json::to_string_pretty(&out)?)?;
    let mut md = format!(
        "# hpo-burn GPU training ({card_name})\n\nf32 matrix products: relative error {probe:.1e} \
         against f64 ({probe_kind}).\n\n| model | batch x len | precision | tokens/s | MFU | peak \
         (cubecl) GiB | in use GiB | NVML GiB | estimate GiB |\n| --- | --- | --- | ---: | ---: | ---: | \
         ---: | ---: | ---: |\n"
    );
    let gib = |v: &Value| {
        v.as_f64()
            .map_or("-".into(), |b| format!("{:.2}", b / (1u64 << 30) as f64))
    };
    for r in &rows {
        let mfu = r["mfu_vs_bf16"].as_f64().or(if probe < 1e-5 {
            r["mfu_vs_f32"].as_f64()
        } else {
            r["mfu_vs_tf32"].as_f64()
        });
        md.push_str(&format!(
            "| {} | {} x {} | {} | {} | {} | {} | {} | {} | {} |\n",
            r["preset"].as_str().unwrap_or("?"),
            r["batch"],
            r["len"],
            r["precision"].as_str().unwrap_or("?"),
            r["tokens_per_s"].as_f64().map_or_else(
                || format!("error: {}", r["error"].as_str().unwrap_or("?")),
                |t| format!("{t:.0}")
            ),
            mfu.map_or("-".into(), |m| format!("{:.1}%", 100.0 * m)),
            gib(&r["peak_device_bytes"]),
            gib(&r["peak_in_use_bytes"]),
            gib(&r["nvml_process_peak_bytes"]),
            gib(&r["estimate_bytes"]),
        ));
    }
    std::fs::write(args.out.join("gpu_training.md"), &md)?;
    println!("{md}");
    Ok(())
}

#[cfg(feature = "cuda")]
fn cuda(args: &Args, d: &str) -> anyhow::Result<(String, Vec<Value>, f64)> {
    use hpo_burn::burn::backend::cuda::CudaDevice;
    use hpo_burn::burn::backend::{Autodiff, Cuda};
    let index: usize = d[5..]
        .parse()
        .with_context(|| format!("bad device {d:?}"))?;
    let report = hpo_burn::runtime::check_cuda()?;
    eprintln!("gpu_training: {report}");
    hpo_burn::runtime::configure_kernel_cache();
    let card = hpo_burn::nvml::report(index as u32)
        .map(|r| r.name)
        .unwrap_or_else(|e| format!("unknown ({e})"));
    let peak = peaks(&card);
    let device = CudaDevice::new(index);
    // First: it is quick, and it decides which PyTorch mode is matched.
    let probe = matmul_probe::<Cuda<f32, i32>>(&device)?;
    eprintln!("gpu_training: f32 matmul relative error {probe:.2e}");
    if args.products {
        let rows = products::<hpo_burn::Cuda>(&device)?;
        let _ = std::fs::write(
            args.out.join("gpu_products.json"),
            serde_json::to_string_pretty(&rows).unwrap_or_default(),
        );
    }
    let mut rows = Vec::new();
    let mut done = Vec::new();
    for p in &args.precisions {
        if p == "f32" {
            rows.extend(bench::<hpo_burn::Cuda>(
                args,
                &mut done,
                &device,
                Precision::F32,
                "f32",
                peak,
            )?);
        } else {
            rows.extend(bench::<Autodiff<Cuda<hpo_burn::burn::tensor::bf16, i32>>>(
                args,
                &mut done,
                &device,
                Precision::Half,
                "half",
                peak,
            )?);
        }
    }
    Ok((card, rows, probe))
}

#[cfg(not(feature = "cuda"))]
fn cuda(_: &Args, d: &str) -> anyhow::Result<(String, Vec<Value>, f64)> {
    bail!("device {d}: rebuild with `--features cuda`")
}
