//! CPU time of one GP suggestion as the history grows, hpo's `GpSampler`
//! against Optuna 5.0's `GPSampler`, measured in one run on one machine.
//!
//! Protocol (Optuna's way, the same on both sides; `bench/optuna_gp_overhead.py`
//! is the Optuna side): one study per sampler, seed 0, default settings,
//! grown with the sampler itself (ask, suggest every parameter, evaluate,
//! tell) to each size; at each size `repeats` more trials are timed, each
//! one `ask` plus its `suggest_*` calls (where the GP is fitted and the
//! acquisition maximised), with the thread's CPU clock; the evaluation and
//! the `tell` are not timed, and the timed trials count towards the next
//! size. hpo refits the kernel only every `max(1, ⌊0.05 n⌋)` trials, so a
//! median would hide the refits: each size times at least one whole refit
//! interval and the figure compared is the **mean** (Optuna refits on every
//! trial; its mean is reported too).
//!
//! Spaces (`--space`): `float`, x0..x4 in [-5, 5], the sphere; `mixed`,
//! two floats, two log floats, an int and a categorical of three (the
//! Python script's docstring has the objective).
//!
//! With `--optuna PY` (a python with Optuna 5.0, torch and scipy:
//! `bench/gp-venv.sh` prints one) the Optuna side runs right after hpo's, in
//! the same run; without it, only hpo's figures are written.
//!
//! Writes `bench/results/gp_overhead.json` and `.md` (or `--out DIR`).
//!
//! ```text
//! cargo bench -p hpo-core --bench gp_overhead -- [--sizes 10,25,50,100,300,1000] [--repeats 5]
//!     [--space float|mixed] [--optuna PY] [--optuna-sizes 10,25,50,100,300]
//!     [--optuna-max-seconds 1800] [--out DIR]
//! ```

#[path = "support/cpu_clock.rs"]
mod cpu_clock;

use anyhow::{bail, Context, Result};
use cpu_clock::thread_cpu_s;
use hpo_core::{Direction, GpSampler, Study, Trial, TrialError};
use serde_json::{json, Value};
use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::Command;
use std::time::Instant;

/// Suggests every parameter of `space`; returns the objective's value.
fn suggest(trial: &mut Trial, space: &str) -> Result<f64, TrialError> {
    if space == "float" {
        let mut s = 0.0;
        for i in 0..5 {
            let x = trial.suggest_float(&format!("x{i}"), -5.0, 5.0)?;
            s += x * x;
        }
        return Ok(s);
    }
    let x0 = trial.suggest_float("x0", -5.0, 5.0)?;
    let x1 = trial.suggest_float("x1", -5.0, 5.0)?;
    let lr_a = trial.suggest_float_log("lr_a", 1e-5, 1.0)?;
    let lr_b = trial.suggest_float_log("lr_b", 1e-4, 10.0)?;
    let n = trial.suggest_int("n", 1, 10)?;
    let kind = trial.suggest_categorical("kind", &["a", "b", "c"])?;
    let k = match kind {
        "a" => 0.0,
        "b" => 0.5,
        _ => 1.0,
    };
    Ok(x0 * x0
        + x1 * x1
        + (lr_a.log10() + 3.0).powi(2)
        + (lr_b.log10() + 1.0).powi(2)
        + 0.1 * (n as f64 - 4.0).powi(2)
        + k)
}

/// One size's timings, in seconds.
struct Row {
    n: usize,
    times: Vec<f64>,
}

fn stats(times: &[f64]) -> Value {
    let mut s = times.to_vec();
    s.sort_by(f64::total_cmp);
    json!({
        "median": s[s.len() / 2],
        "mean": s.iter().sum::<f64>() / s.len() as f64,
        "min": s[0],
        "max": s[s.len() - 1],
    })
}

fn hpo_side(space: &str, sizes: &[usize], repeats: usize) -> Result<Vec<Row>> {
    let study = Study::builder()
        .direction(Direction::Minimize)
        .sampler(GpSampler::seeded(0))
        .build()?;
    let mut done = 0usize;
    let mut rows = Vec::new();
    for &n in sizes {
        while done < n {
            let mut t = study.ask()?;
            let v = suggest(&mut t, space).map_err(|e| anyhow::anyhow!("{e}"))?;
            study.tell(t, v)?;
            done += 1;
        }
        // At least one whole refit interval.
        let k = repeats.max((n as f64 * 0.05).floor() as usize + 1);
        let mut times = Vec::with_capacity(k);
        for _ in 0..k {
            let t0 = thread_cpu_s();
            let mut t = study.ask()?;
            let v = suggest(&mut t, space).map_err(|e| anyhow::anyhow!("{e}"))?;
            times.push(thread_cpu_s() - t0);
            study.tell(t, v)?;
            done += 1;
        }
        let s = stats(&times);
        eprintln!(
            "hpo {space} {n}: mean {:.2} ms, median {:.2} ms over {k}",
            s["mean"].as_f64().unwrap_or(f64::NAN) * 1e3,
            s["median"].as_f64().unwrap_or(f64::NAN) * 1e3
        );
        rows.push(Row { n, times });
    }
    Ok(rows)
}

fn list(s: &str) -> Result<Vec<usize>> {
    s.split(',')
        .map(|x| x.trim().parse().with_context(|| format!("size `{x}`")))
        .collect()
}

fn main() -> Result<()> {
    let root = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/.."));
    let mut sizes = vec![10usize, 25, 50, 100, 300, 1000];
    let mut optuna_sizes = vec![10usize, 25, 50, 100, 300];
    let mut repeats = 5usize;
    let mut space = "float".to_owned();
    let mut optuna: Option<String> = None;
    let mut optuna_max_s = 1800u64;
    let mut out_dir = root.join("bench/results");
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut value = || it.next().with_context(|| format!("{a} needs a value"));
        match a.as_str() {
            "--sizes" => sizes = list(value()?)?,
            "--optuna-sizes" => optuna_sizes = list(value()?)?,
            "--repeats" => repeats = value()?.parse()?,
            "--space" => space = value()?.clone(),
            "--optuna" => optuna = Some(value()?.clone()),
            "--optuna-max-seconds" => optuna_max_s = value()?.parse()?,
            "--out" => out_dir = root.join(value()?),
            other => bail!("unknown argument `{other}`"),
        }
    }
    if space != "float" && space != "mixed" {
        bail!("--space is float or mixed, not `{space}`");
    }
    let t0 = Instant::now();
    let ours = hpo_side(&space, &sizes, repeats)?;
    let hpo_wall = t0.elapsed().as_secs_f64();

    let theirs: Option<Value> = match &optuna {
        None => None,
        Some(py) => {
            let tmp = std::env::temp_dir().join(format!("gp_overhead_{}.json", std::process::id()));
            let sizes_arg = optuna_sizes
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(",");
            let status = Command::new(py)
                .arg(root.join("bench/optuna_gp_overhead.py"))
                .args(["--sizes", &sizes_arg, "--repeats", &repeats.to_string()])
                .args([
                    "--space",
                    &space,
                    "--max-seconds",
                    &optuna_max_s.to_string(),
                ])
                .arg("--out")
                .arg(&tmp)
                .stdout(std::process::Stdio::null())
                .status()
                .with_context(|| format!("running {py} bench/optuna_gp_overhead.py"))?;
            if !status.success() {
                bail!("bench/optuna_gp_overhead.py failed ({status})");
            }
            let text = std::fs::read_to_string(&tmp)?;
            let _ = std::fs::remove_file(&tmp);
            Some(serde_json::from_str(&text)?)
        }
    };
    let optuna_at = |n: usize| -> Option<&Value> {
        theirs
            .as_ref()?
            .get("sizes")?
            .as_array()?
            .iter()
            .find(|s| s["n_trials"].as_u64() == Some(n as u64) && s.get("skipped").is_none())
    };

    let mut rows_json = Vec::new();
    let mut md = String::new();
    writeln!(
        md,
        "# GP sampler overhead: CPU time of one ask + suggests ({space} space)\n"
    )?;
    writeln!(
        md,
        "`cargo bench -p hpo-core --bench gp_overhead -- {}`; one thread each; hpo's mean over at least one \
         refit interval, Optuna's GPSampler (refits every trial) on the same machine in the same \
         run. Target (issue 37): hpo's mean under 1/10 of Optuna's at 100 and 300 trials.\n",
        args.join(" ")
    )?;
    writeln!(
        md,
        "| trials | hpo mean ms | hpo median ms | hpo max ms | Optuna mean ms | Optuna median ms | Optuna / hpo (means) |"
    )?;
    writeln!(md, "|---|---|---|---|---|---|---|")?;
    for r in &ours {
        let s = stats(&r.times);
        let mean = s["mean"].as_f64().unwrap_or(f64::NAN);
        let o = optuna_at(r.n);
        let o_mean = o.and_then(|o| {
            o["cpu_s"]["mean"].as_f64().or_else(|| {
                let all = o["cpu_s_all"].as_array()?;
                Some(all.iter().filter_map(Value::as_f64).sum::<f64>() / all.len() as f64)
            })
        });
        let o_median = o.and_then(|o| o["cpu_s"]["median"].as_f64());
        let ratio = o_mean.map(|m| m / mean);
        let ms = |v: Option<f64>| v.map_or("-".to_owned(), |v| format!("{:.2}", v * 1e3));
        writeln!(
            md,
            "| {} | {:.2} | {:.2} | {:.2} | {} | {} | {} |",
            r.n,
            mean * 1e3,
            s["median"].as_f64().unwrap_or(f64::NAN) * 1e3,
            s["max"].as_f64().unwrap_or(f64::NAN) * 1e3,
            ms(o_mean),
            ms(o_median),
            ratio.map_or("-".to_owned(), |r| format!("{r:.0}x")),
        )?;
        rows_json.push(json!({
            "n_trials": r.n,
            "repeats": r.times.len(),
            "hpo_cpu_s": s,
            "hpo_cpu_s_all": r.times,
            "optuna_cpu_s_mean": o_mean,
            "optuna_cpu_s_median": o_median,
            "optuna_over_hpo_mean": ratio,
        }));
    }
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|c| {
            c.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|s| s.trim().to_owned())
        })
        .unwrap_or_default();
    let out = json!({
        "meta": {
            "command": format!("cargo bench -p hpo-core --bench gp_overhead -- {}", args.join(" ")),
            "space": space,
            "cpu": cpu,
            "cpus": std::thread::available_parallelism().map_or(1, |n| n.get()),
            "hpo_wall_s": hpo_wall,
            "optuna": theirs.as_ref().map(|t| t["meta"].clone()),
        },
        "sizes": rows_json,
        "optuna_sizes": theirs.as_ref().map(|t| t["sizes"].clone()),
    });
    std::fs::create_dir_all(&out_dir)?;
    let stem = if space == "float" {
        "gp_overhead".to_owned()
    } else {
        format!("gp_overhead_{space}")
    };
    std::fs::write(
        out_dir.join(format!("{stem}.json")),
        serde_json::to_string_pretty(&out)? + "\n",
    )?;
    std::fs::write(out_dir.join(format!("{stem}.md")), &md)?;
    print!("{md}");
    Ok(())
}
