//! CPU training benchmark against PyTorch: the same fine-tune, on the same
//! padded batches, in the same sitting.
//!
//! ```text
//! cargo run --release -p hpo-burn --example cpu_training -- [OUT_DIR]
//! ```
//!
//! The job (issue 20): all-MiniLM-L6-v2 from the checkpoint cache (fetched
//! once with pip, see `hpo_burn::cache`; a from-scratch model of the same
//! shape when it cannot be had), 1,200 VADER training tweets split as
//! `criteria` splits them (seed 42), length 64, micro-batch 16, hpo-burn's
//! length-bucketed batches, AdamW (lr 8e-5, 10% warm-up then linear decay,
//! weight decay 0.01, the gradient clipped to norm 1 over all parameters,
//! as `TrainConfig` does by default), balanced loss, one
//! epoch, then the validation pass.
//!
//! 1. Plans the epoch with the trainer's own [`Trainer::epoch_plan`] and
//!    writes the exact padded batches (token ids, masks, segment ids, labels,
//!    each step's learning rate) and the validation batches to
//!    `hpo-cpu-training-batches.json` in the system's temporary directory
//!    (kept, to replay or profile PyTorch by hand).
//! 2. Runs the PyTorch reference `bench/cpu_training_torch.py` on that file
//!    (its interpreter: `$HPO_TORCH_PYTHON`, else the venv that
//!    `bench/torch-venv.sh` creates, which installs torch and transformers;
//!    `HPO_TORCH_RUNS=0` skips PyTorch).
//! 3. Trains hpo-burn's `Cpu` backend with [`Trainer::fit`] on the same
//!    examples, then PyTorch once more, so the ratio is against PyTorch
//!    runs on either side of hpo-burn's.
//! 4. Writes `cpu_training.json` (with `ratio_vs_torch`, hpo-burn's train
//!    seconds per epoch over PyTorch's mean) and `cpu_training.md` to
//!    `OUT_DIR` (default: `bench/results/`).
//!
//! CPU use comes from `/proc/self/stat` (user and system time, minor page
//! faults; Linux's fixed 100 ticks per second) before and after each phase;
//! peak RSS from `VmHWM`. hpo-burn's evaluation is timed inside `fit`; its
//! CPU use is measured by evaluating the trained model once more, and the
//! training phase's CPU use is `fit`'s minus that.

use anyhow::Context;
use hpo_burn::batch::{plan_batches, EncodedExample};
use hpo_burn::burn::module::AutodiffModule;
use hpo_burn::burn::tensor::backend::Backend;
use hpo_burn::memory::process_peak_rss;
use hpo_burn::train::{TrainData, Trainer, WarmupLinear};
use hpo_burn::{
    load_tsv, Checkpoint, ClipScope, Cpu, Dataset, ModelCache, Pooling, Preset, Recorder, RunSpec,
    TextTask, TrainConfig, TsvSpec, ALL_MINILM_L6_V2,
};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

const SEED: u64 = 42;
const TRAIN_LIMIT: usize = 1200;

/// all-MiniLM-L6-v2's shape, for the from-scratch stand-in.
const VOCAB: usize = 30522;

/// User and system CPU seconds and minor page faults of this process.
#[derive(Debug, Clone, Copy, Default)]
struct CpuTimes {
    user: f64,
    system: f64,
    minor_faults: u64,
}

impl CpuTimes {
    fn now() -> anyhow::Result<Self> {
        let stat = std::fs::read_to_string("/proc/self/stat")?;
        // Fields after the parenthesised command name, which may hold spaces.
        let rest = stat
            .rsplit_once(')')
            .map(|(_, r)| r)
            .context("unexpected /proc/self/stat")?;
        let f: Vec<&str> = rest.split_whitespace().collect();
        // rest[0] is field 3 (state): minflt is field 10, utime 14, stime 15.
        let field = |n: usize| -> anyhow::Result<u64> {
            Ok(f.get(n - 3).context("short /proc/self/stat")?.parse()?)
        };
        Ok(CpuTimes {
            minor_faults: field(10)?,
            user: field(14)? as f64 / 100.0,
            system: field(15)? as f64 / 100.0,
        })
    }

    fn since(self, start: CpuTimes) -> CpuTimes {
        CpuTimes {
            user: self.user - start.user,
            system: self.system - start.system,
            minor_faults: self.minor_faults.saturating_sub(start.minor_faults),
        }
    }

    fn json(self, wall: f64) -> Value {
        json!({
            "user_s": self.user,
            "system_s": self.system,
            "cores_busy": (self.user + self.system) / wall.max(1e-9),
            "minor_faults": self.minor_faults,
        })
    }
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

/// The data, split as `criteria` splits it: 10% test, 10% validation, then a
/// stratified subsample of 1,200 training examples.
fn splits() -> anyhow::Result<(Dataset, Dataset)> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../data/vader/tweets.tsv");
    let data = load_tsv(path, &TsvSpec::single("text", "label").with_positive("neg"))?;
    let (rest, _test) = data.split_stratified(0.1, SEED)?;
    let (mut train, valid) = rest.split_stratified(0.1 / 0.9, SEED)?;
    if train.examples.len() > TRAIN_LIMIT {
        let frac = 1.0 - TRAIN_LIMIT as f64 / train.examples.len() as f64;
        train = train.split_stratified(frac, SEED)?.0;
    }
    Ok((train, valid))
}

/// The cached checkpoint, fetched when missing; `None` (from scratch) when
/// it cannot be had.
fn checkpoint() -> Option<(Checkpoint, PathBuf)> {
    let cache = ModelCache::from_env().ok()?;
    match cache.get(&ALL_MINILM_L6_V2, &mut |p| eprintln!("{p:?}")) {
        Ok(c) => Some((c, cache.path(&ALL_MINILM_L6_V2))),
        Err(e) => {
            eprintln!("no checkpoint ({e}); training a from-scratch model of the same shape");
            None
        }
    }
}

/// Padded batch as PyTorch takes it.
fn batch_json(examples: &[&EncodedExample], pad_id: u32) -> Value {
    let len = examples.iter().map(|e| e.len()).max().unwrap_or(1);
    let pad = |v: &[u32], fill: u32| -> Vec<u32> {
        let mut v = v.to_vec();
        v.resize(len, fill);
        v
    };
    json!({
        "input_ids": examples.iter().map(|e| pad(&e.encoded.ids, pad_id)).collect::<Vec<_>>(),
        "token_type_ids": examples.iter().map(|e| pad(&e.encoded.segments, 0)).collect::<Vec<_>>(),
        "attention_mask": examples.iter().map(|e| {
            let mut m = vec![1u8; e.len()];
            m.resize(len, 0);
            m
        }).collect::<Vec<_>>(),
        "labels": examples.iter().map(|e| e.label).collect::<Vec<_>>(),
    })
}

fn torch_python(root: &Path) -> anyhow::Result<String> {
    if let Some(p) = std::env::var_os("HPO_TORCH_PYTHON").filter(|p| !p.is_empty()) {
        return Ok(p.to_string_lossy().into_owned());
    }
    let out = Command::new(root.join("bench/torch-venv.sh"))
        .output()
        .context("running bench/torch-venv.sh")?;
    anyhow::ensure!(
        out.status.success(),
        "bench/torch-venv.sh failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(String::from_utf8(out.stdout)?.trim().to_string())
}

fn run_torch(python: &str, root: &Path, batches: &Path, out: &Path) -> anyhow::Result<Value> {
    eprintln!("PyTorch reference ...");
    let status = Command::new(python)
        .arg(root.join("bench/cpu_training_torch.py"))
        .arg(batches)
        .arg(out)
        .status()
        .context("running the PyTorch reference")?;
    anyhow::ensure!(status.success(), "the PyTorch reference failed ({status})");
    let v: Value = serde_json::from_str(&std::fs::read_to_string(out)?)?;
    eprintln!("{v}");
    Ok(v)
}

fn main() -> anyhow::Result<()> {
    let root = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/.."));
    let out_dir = std::env::args()
        .nth(1)
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("bench/results"));
    std::fs::create_dir_all(&out_dir)?;
    let torch_runs: usize = std::env::var("HPO_TORCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2);
    let load_start = load_average();

    let (train, valid) = splits()?;
    let ckpt = checkpoint();
    let checkpoint_dir = ckpt.as_ref().map(|(_, d)| d.display().to_string());
    let task = TextTask::new(
        train,
        valid,
        ckpt.map(|(c, _)| c),
        hpo_burn::DEFAULT_TRAINED_VOCAB,
    )?;
    let spec = RunSpec {
        preset: Preset::Mini,
        head_layers: 0,
        head_width: 128,
        dropout: 0.1,
        pooling: Pooling::Mean,
        train: TrainConfig {
            epochs: 1,
            learning_rate: 8e-5,
            micro_batch: 16,
            accumulation: 1,
            max_len: 64,
            warmup_ratio: 0.1,
            weight_decay: 0.01,
            grad_clip: Some(1.0),
            // `HPO_CLIP_SCOPE=per_parameter` clips as burn does, to
            // compare with the default (global) on both sides.
            grad_clip_scope: match std::env::var("HPO_CLIP_SCOPE").as_deref() {
                Ok("per_parameter") => ClipScope::PerParameter,
                Ok("global") | Err(_) => ClipScope::Global,
                Ok(other) => anyhow::bail!("HPO_CLIP_SCOPE={other}: not global or per_parameter"),
            },
            balanced_loss: true,
            eval_batch: 64,
            // `HPO_TRAIN_SEED` varies the training seed (batch order,
            // dropout) to see the run-to-run spread; the splits keep SEED.
            seed: std::env::var("HPO_TRAIN_SEED")
                .ok()
                .and_then(|s| s.parse().ok())
                .unwrap_or(SEED),
            ..TrainConfig::default()
        },
    };
    let mut model_config = spec.model_config(&task);
    if task.checkpoint.is_none() {
        // all-MiniLM-L6-v2's dimensions, with the trained vocabulary's ids.
        model_config.vocab_size = VOCAB;
        model_config.hidden = 384;
        model_config.layers = 6;
        model_config.heads = 12;
        model_config.intermediate = 1536;
        model_config.max_position = 512;
    }
    let device = Default::default();
    let (train_ex, valid_ex) = task.encode(spec.train.max_len.min(model_config.max_position))?;
    let pad_id = task.tokenizer.pad_id();
    let classes = task.train.classes.len();
    let trainer = Trainer::<Cpu>::new(spec.train.clone(), model_config.clone(), "bench", device);

    // The exact batches, for PyTorch.
    let plan = trainer.epoch_plan(&train_ex, 1);
    let schedule = WarmupLinear::new(
        spec.train.learning_rate,
        spec.train.warmup_ratio,
        plan.len(),
    );
    let steps: Vec<Value> = plan
        .iter()
        .enumerate()
        .map(|(k, step)| {
            let exs: Vec<&EncodedExample> = step.iter().map(|&i| &train_ex[i]).collect();
            json!({"lr": schedule.lr(k), "batch": batch_json(&exs, pad_id)})
        })
        .collect();
    let valid_lengths: Vec<usize> = valid_ex.iter().map(EncodedExample::len).collect();
    let valid_batches: Vec<Value> = plan_batches(&valid_lengths, spec.train.eval_batch, None, true)
        .iter()
        .map(|b| batch_json(&b.iter().map(|&i| &valid_ex[i]).collect::<Vec<_>>(), pad_id))
        .collect();
    let mut counts = vec![0usize; classes];
    for e in &train_ex {
        counts[e.label] += 1;
    }
    let n = train_ex.len() as f64;
    let class_weights: Vec<f64> = counts
        .iter()
        .map(|&c| n / (classes as f64 * c as f64))
        .collect();
    let padded: usize = plan
        .iter()
        .map(|s| s.len() * s.iter().map(|&i| train_ex[i].len()).max().unwrap_or(0))
        .sum();
    let real: usize = train_ex.iter().map(EncodedExample::len).sum();
    let batches_path = std::env::temp_dir().join("hpo-cpu-training-batches.json");
    let batches = json!({
        "checkpoint": checkpoint_dir,
        "model": {
            "vocab_size": model_config.vocab_size,
            "hidden": model_config.hidden,
            "layers": model_config.layers,
            "heads": model_config.heads,
            "intermediate": model_config.intermediate,
            "max_position": model_config.max_position,
            "dropout": spec.dropout,
        },
        "classes": classes,
        "class_weights": class_weights,
        "seed": SEED,
        "optimizer": {
            "name": "AdamW",
            "betas": [0.9, 0.999],
            "eps": spec.train.adam_epsilon,
            "weight_decay": spec.train.weight_decay,
            "clip_norm": spec.train.grad_clip,
            "clip_scope": spec.train.grad_clip_scope,
        },
        "steps": steps,
        "valid_batches": valid_batches,
    });
    std::fs::write(&batches_path, serde_json::to_string(&batches)?)?;
    eprintln!(
        "{} steps, {} examples, {real} real tokens, {padded} padded; checkpoint {:?}; load {}; batches in {}",
        plan.len(),
        train_ex.len(),
        checkpoint_dir,
        load_start,
        batches_path.display()
    );

    let python = if torch_runs > 0 {
        Some(torch_python(&root)?)
    } else {
        None
    };
    let mut torch = Vec::new();
    let torch_out = std::env::temp_dir().join("hpo-cpu-training-torch.json");
    if let Some(py) = &python {
        torch.push(run_torch(py, &root, &batches_path, &torch_out)?);
    }

    // hpo-burn: build the model as `run_with_model` does, then `fit`.
    eprintln!("hpo-burn ...");
    Cpu::seed(&device, spec.train.seed);
    let mut model = model_config.init::<Cpu>(&device)?;
    if let Some(c) = &task.checkpoint {
        model = c.load_into(model)?.0;
    }
    let data = TrainData {
        train: &train_ex,
        valid: &valid_ex,
        pad_id,
        classes,
    };
    let load_burn = load_average();
    let cpu0 = CpuTimes::now()?;
    let started = Instant::now();
    let (model, report) = trainer.fit(model, data, &mut Recorder::new())?;
    let fit_wall = started.elapsed().as_secs_f64();
    let fit_cpu = CpuTimes::now()?.since(cpu0);
    let epoch = report.history.first().context("no epoch")?;
    // The evaluation once more, for its CPU use.
    let inference = model.valid();
    let cpu1 = CpuTimes::now()?;
    let started = Instant::now();
    let again = trainer.evaluate(&inference, data)?;
    let eval_wall = started.elapsed().as_secs_f64();
    let eval_cpu = CpuTimes::now()?.since(cpu1);
    let train_cpu = CpuTimes {
        user: fit_cpu.user - eval_cpu.user,
        system: fit_cpu.system - eval_cpu.system,
        minor_faults: fit_cpu.minor_faults.saturating_sub(eval_cpu.minor_faults),
    };
    let burn = json!({
        "backend": std::any::type_name::<Cpu>(),
        "train_s": epoch.train_seconds,
        "eval_s": epoch.eval_seconds,
        "eval_again_s": eval_wall,
        "fit_wall_s": fit_wall,
        "train_tokens": epoch.tokens,
        "train_padded_tokens": epoch.padded_tokens,
        "tokens_per_s": epoch.padded_tokens as f64 / epoch.train_seconds,
        "train_cpu": train_cpu.json(epoch.train_seconds),
        "eval_cpu": eval_cpu.json(eval_wall),
        "peak_rss_bytes": process_peak_rss(),
        "train_loss": epoch.train_loss,
        "macro_f1": epoch.valid.macro_f1,
        "accuracy": epoch.valid.accuracy,
        "macro_f1_again": again.macro_f1,
        "threads": std::thread::available_parallelism().map_or(1, |n| n.get()),
        "load_average": load_burn,
    });
    eprintln!("{burn}");

    for _ in 1..torch_runs {
        if let Some(py) = &python {
            torch.push(run_torch(py, &root, &batches_path, &torch_out)?);
        }
    }
    let _ = std::fs::remove_file(&torch_out);

    let mean = |key: &str| -> Option<f64> {
        let v: Vec<f64> = torch.iter().filter_map(|t| t[key].as_f64()).collect();
        (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
    };
    let torch_train = mean("train_s");
    let torch_eval = mean("eval_s");
    let ratio = torch_train.map(|t| epoch.train_seconds / t);
    let eval_ratio = torch_eval.map(|t| epoch.eval_seconds / t);
    let cpu_model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_default();
    let report = json!({
        "benchmark": "CPU fine-tune of all-MiniLM-L6-v2 on 1,200 VADER tweets, hpo-burn against PyTorch on the same batches (issue 20)",
        "machine": {
            "cpu": cpu_model,
            "cores": std::thread::available_parallelism().map_or(1, |n| n.get()),
            "load_average_start": load_start,
            "load_average_end": load_average(),
        },
        "job": {
            "checkpoint": checkpoint_dir.is_some(),
            "train_examples": train_ex.len(),
            "valid_examples": valid_ex.len(),
            "steps": plan.len(),
            "micro_batch": spec.train.micro_batch,
            "max_len": spec.train.max_len,
            "real_tokens": real,
            "padded_tokens": padded,
        },
        "ratio_vs_torch": ratio,
        "eval_ratio_vs_torch": eval_ratio,
        "hpo_burn": burn,
        "torch": torch,
    });
    std::fs::write(
        out_dir.join("cpu_training.json"),
        serde_json::to_string_pretty(&report)? + "\n",
    )?;
    let md = markdown(&report);
    std::fs::write(out_dir.join("cpu_training.md"), &md)?;
    print!("{md}");
    Ok(())
}

fn markdown(r: &Value) -> String {
    let mut md = String::from(
        "| run | train s/epoch | eval s | padded tokens/s | user s | system s | cores busy | minor faults | peak RSS | macro-F1 | vs PyTorch |\n| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n",
    );
    let row = |name: &str, v: &Value, ratio: &Value| -> String {
        let f = |k: &str| v[k].as_f64().unwrap_or(f64::NAN);
        let c = |k: &str| v["train_cpu"][k].as_f64().unwrap_or(f64::NAN);
        format!(
            "| {name} | {:.1} | {:.1} | {:.0} | {:.1} | {:.1} | {:.0}% | {:.1} M | {:.0} MiB | {:.3} | {} |\n",
            f("train_s"),
            f("eval_s"),
            f("tokens_per_s"),
            c("user_s"),
            c("system_s"),
            100.0 * c("cores_busy"),
            c("minor_faults") / 1e6,
            f("peak_rss_bytes") / 1048576.0,
            f("macro_f1"),
            ratio.as_f64().map_or("-".into(), |x| format!("{x:.2}x")),
        )
    };
    md.push_str(&row(
        "hpo-burn (`Cpu`)",
        &r["hpo_burn"],
        &r["ratio_vs_torch"],
    ));
    if let Some(runs) = r["torch"].as_array() {
        for (i, t) in runs.iter().enumerate() {
            let name = format!(
                "PyTorch {} run {} ({} threads)",
                t["torch_version"].as_str().unwrap_or("?"),
                i + 1,
                t["threads"]
            );
            md.push_str(&row(&name, t, &json!(1.0)));
        }
    }
    let m = &r["machine"];
    md.push_str(&format!(
        "\nOne epoch, {} steps of micro-batch {}, {} padded tokens ({} real), {}; eval ratio {}. Machine: {} ({} cores), load average {} at the start, {} at the end.\n",
        r["job"]["steps"],
        r["job"]["micro_batch"],
        r["job"]["padded_tokens"],
        r["job"]["real_tokens"],
        if r["job"]["checkpoint"].as_bool() == Some(true) { "pretrained all-MiniLM-L6-v2" } else { "from scratch (same shape)" },
        r["eval_ratio_vs_torch"].as_f64().map_or("-".into(), |x| format!("{x:.2}x")),
        m["cpu"].as_str().unwrap_or("?"),
        m["cores"],
        m["load_average_start"].as_str().unwrap_or("?"),
        m["load_average_end"].as_str().unwrap_or("?"),
    ));
    let cores = m["cores"].as_f64().unwrap_or(1.0);
    let busiest = ["load_average_start", "load_average_end"]
        .iter()
        .filter_map(|k| {
            m[*k]
                .as_str()?
                .split_whitespace()
                .next()?
                .parse::<f64>()
                .ok()
        })
        .fold(0.0, f64::max);
    if busiest > cores {
        md.push_str(&format!(
            "\n**Not a fair comparison:** the load average ({busiest:.1}) was above the core count ({cores}). PyTorch's OpenMP threads spin while they wait for descheduled peers, so its times inflate far more than hpo-burn's under contention and the ratio flatters hpo-burn; measure on an otherwise idle machine.\n"
        ));
    }
    md
}
