//! The sampler suite of issue 17 (problems, split rule and runner in
//! `benches/support/suite.rs`): hpo's default TPE, TPE with Optuna's
//! settings, random, QMC and CMA-ES on BBOB f1..f24 and the mixed spaces,
//! `--seeds` seeds each, best-so-far at 50, 100 and 200 trials (those within
//! `--budget`).
//!
//! Writes `bench/results/sampler_suite.json` (every run's best-so-far at each
//! budget, medians, the comparison) and `.md`: median [q25, q75] per
//! (problem, sampler, budget) by half, the samplers' mean ranks, and, where
//! `bench/reference/optuna/sampler_suite.json` (written by
//! `bench/optuna_suite.py`) holds Optuna's runs of a problem, Optuna's
//! medians beside ours and the paired comparison of default TPE with Optuna's
//! default TPE (Wilcoxon signed-rank, 5 %, not significant = tie).
//!
//! ```text
//! cargo bench -p hpo-core --bench sampler_suite -- [--functions 1,2] [--instances 1,2,3]
//!     [--dims 5,10] [--seeds 10] [--budget 200] [--checkpoints 25,50,100] [--mixed 1,2,...,8|none]
//!     [--samplers tpe,tpe_optuna,random,qmc,cmaes,gp] [--reference FILE] [--out DIR] [--label TEXT]
//!     [--threads N] [--in-flight K [--control]]
//! ```
//!
//! `--checkpoints` sets the budgets reported (default 50, 100, 200; those
//! within `--budget`).
//!
//! A sampler may also be a variant, `tpe:{json}`, `cmaes:{json}` or `gp:{json}`, whose
//! JSON sets config fields over the defaults (how defaults are tuned on the
//! tuning half); each sampler is compared with its Optuna counterpart.
//! Studies run on `--threads` threads (default: the CPUs available); each
//! is sequential and seeded, so results do not depend on the thread count.
//!
//! `--in-flight K` (K > 1) measures parallel proposals instead: every study
//! runs sequentially to the largest budget and again with K trials in flight
//! (the executor's pattern, `suite::drive`) to 1.25 times that; the number of
//! finished trials the in-flight runs need to match the sequential median at
//! each budget (`support/parallel.rs`) goes to `parallel_proposals.json` and
//! `.md` in `--out` (the sampler suite's own files are left alone).
//! `--control` adds the measure's noise floor: sequential runs on the next
//! seeds measured as if they were the in-flight ones.
//!
//! Defaults: the whole suite (f1..f24, instances 1-3, 5-D and 10-D, the eight
//! mixed spaces, 10 seeds, budget 200), which takes hours on a small machine; run
//! subsets with the flags, and say which in `--label`.

// Shared with the integration tests, which use other parts of it.
#[allow(dead_code)]
mod support;

use anyhow::{bail, Context, Result};
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Instant;
use support::parallel::{self, Reach, Summary};
use support::suite::{self, Half, Mixed, Record, Spec, Verdict};

/// Significance level of the paired comparison.
const ALPHA: f64 = 0.05;

/// Optuna's sampler names in the reference file, by ours.
const OPTUNA: [(&str, &str); 5] = [
    ("tpe", "tpe"),
    ("random", "random"),
    ("qmc", "qmc"),
    ("cmaes", "cmaes"),
    ("gp", "gp"),
];

fn list<T: std::str::FromStr>(s: &str, flag: &str) -> Result<Vec<T>>
where
    T::Err: std::error::Error + Send + Sync + 'static,
{
    s.split(',')
        .filter(|x| !x.is_empty())
        .map(|x| x.trim().parse::<T>().with_context(|| format!("{flag} {s}")))
        .collect()
}

/// Sampler names separated by commas outside braces, so that variants such as
/// `tpe:{"n_ei_candidates":24,"group":false}` stay whole.
fn sampler_list(s: &str) -> Vec<String> {
    let (mut out, mut cur, mut depth) = (Vec::new(), String::new(), 0i32);
    for c in s.chars() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                out.push(std::mem::take(&mut cur));
                continue;
            }
            _ => {}
        }
        cur.push(c);
    }
    out.push(cur);
    out.into_iter().filter(|x| !x.is_empty()).collect()
}

/// A results file: `meta` pretty-printed, then each section as an array with
/// one entry per line (readable diffs without a multi-megabyte file).
fn json_document(meta: &Value, sections: &[(&str, &Vec<Value>)]) -> Result<String> {
    let mut text = format!("{{\n\"meta\": {},\n", serde_json::to_string_pretty(meta)?);
    for (k, (name, items)) in sections.iter().enumerate() {
        let lines: Vec<String> = items
            .iter()
            .map(serde_json::to_string)
            .collect::<Result<_, _>>()?;
        let end = if k + 1 == sections.len() { "" } else { "," };
        writeln!(text, "\"{name}\": [\n{}\n]{end}", lines.join(",\n"))?;
    }
    text.push_str("}\n");
    Ok(text)
}

fn fmt(x: f64) -> String {
    if x >= f64::MAX {
        "-".to_owned()
    } else if x.abs() >= 1000.0 {
        format!("{x:.0}")
    } else if x.abs() >= 1.0 {
        format!("{x:.3}")
    } else {
        format!("{x:.4}")
    }
}

fn finite_or_null(x: f64) -> Value {
    if x.is_finite() && x < f64::MAX {
        json!(x)
    } else {
        Value::Null
    }
}

/// The 1, 5 and 15 minute load averages (Linux), for the table's label.
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".to_owned())
}

/// The CPU model and the number of CPUs this process may use.
fn machine() -> String {
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown CPU".to_owned());
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    format!("{model}, {cpus} CPUs")
}

/// (half, problem) -> sampler -> budget index -> best values, one per seed.
type Groups = BTreeMap<(Half, String), BTreeMap<String, Vec<Vec<f64>>>>;

fn main() -> Result<()> {
    let mut spec = Spec {
        functions: (1..=24).collect(),
        instances: vec![1, 2, 3],
        dims: vec![5, 10],
        mixed: Mixed::ALL.to_vec(),
        samplers: suite::SAMPLERS.iter().map(|s| s.to_string()).collect(),
        seeds: 0..10,
        checkpoints: Vec::new(),
        in_flight: 1,
    };
    let mut in_flight = 1usize;
    let mut control = false;
    let mut budget = 200usize;
    let mut checkpoints: Option<Vec<usize>> = None;
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut reference_path = root.join("bench/reference/optuna/sampler_suite.json");
    let mut out_dir = root.join("bench/results");
    let mut label = String::new();
    let mut threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let command: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    // The arguments as a shell would take them back.
    let shell_command = command
        .iter()
        .map(|a| {
            if a.chars()
                .all(|c| c.is_ascii_alphanumeric() || ",.-_/=".contains(c))
            {
                a.clone()
            } else {
                format!("'{}'", a.replace('\'', "'\\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ");
    let mut args = command.iter();
    while let Some(a) = args.next() {
        let mut value = || args.next().with_context(|| format!("{a} needs a value"));
        match a.as_str() {
            "--functions" => spec.functions = list(value()?, a)?,
            "--instances" => spec.instances = list(value()?, a)?,
            "--dims" => spec.dims = list(value()?, a)?,
            "--seeds" => spec.seeds = 0..value()?.parse()?,
            "--budget" => budget = value()?.parse()?,
            "--checkpoints" => checkpoints = Some(list(value()?, a)?),
            "--samplers" => spec.samplers = sampler_list(value()?),
            "--mixed" => {
                let v = value()?;
                spec.mixed = if v == "none" {
                    Vec::new()
                } else {
                    list::<u8>(v, a)?
                        .into_iter()
                        .map(|n| {
                            Mixed::ALL
                                .into_iter()
                                .find(|m| m.number() == n)
                                .with_context(|| {
                                    format!("no mixed space {n} (1 to {})", Mixed::ALL.len())
                                })
                        })
                        .collect::<Result<_>>()?
                };
            }
            // Relative to the repository root: cargo runs benches in the package's directory.
            "--reference" => reference_path = root.join(value()?),
            "--out" => out_dir = root.join(value()?),
            "--label" => label = value()?.clone(),
            "--threads" => threads = value()?.parse()?,
            "--in-flight" => in_flight = value()?.parse()?,
            "--control" => control = true,
            other => bail!("unknown argument `{other}`"),
        }
    }
    spec.checkpoints = checkpoints
        .unwrap_or_else(|| suite::BUDGETS.to_vec())
        .into_iter()
        .filter(|b| *b <= budget)
        .collect();
    if spec.checkpoints.is_empty() {
        spec.checkpoints.push(budget);
    }
    for s in &spec.samplers {
        suite::make_sampler(s, 0)?;
    }
    if in_flight == 0 {
        bail!("--in-flight must be at least 1");
    }
    if in_flight > 1 {
        let run = Run {
            label,
            command: format!("cargo bench -p hpo-core --bench sampler_suite -- {shell_command}"),
            out_dir,
            threads,
            control,
        };
        return parallel_proposals(&spec, in_flight, &run);
    }
    let (reference, reference_meta) = suite::read_reference(&reference_path)?;

    let load_start = load_average();
    let t0 = Instant::now();
    let records = suite::run_suite(&spec, threads, |line| eprintln!("{line}"))?;
    let wall_s = t0.elapsed().as_secs_f64();
    let load_end = load_average();
    let machine = machine();

    // Group: (half, problem) -> sampler -> budget index -> values by seed.
    let mut groups = Groups::new();
    let mut optimum: BTreeMap<String, f64> = BTreeMap::new();
    for r in &records {
        optimum.insert(r.problem.clone(), r.optimum);
        let per = groups
            .entry((r.half, r.problem.clone()))
            .or_default()
            .entry(r.sampler.clone())
            .or_insert_with(|| vec![Vec::new(); spec.checkpoints.len()]);
        for (k, v) in r.best.iter().enumerate() {
            per[k].push(suite::or_worst(*v));
        }
    }
    let stats = |values: &[f64]| {
        let mut s = values.to_vec();
        s.sort_by(f64::total_cmp);
        (
            suite::percentile(&s, 50.0),
            suite::percentile(&s, 25.0),
            suite::percentile(&s, 75.0),
        )
    };
    let reference_values = |problem: &str, sampler: &str, budget: usize| -> Option<Vec<f64>> {
        reference
            .get(&(problem.to_owned(), sampler.to_owned(), budget))
            .map(|m| m.values().copied().collect())
    };

    let mut md = String::new();
    let mut medians = Vec::new();
    let mut comparisons = Vec::new();
    writeln!(
        md,
        "# Sampler suite (sequential: 1 trial in flight)\n\n{}`cargo bench -p hpo-core --bench sampler_suite -- {}`\n",
        if label.is_empty() {
            String::new()
        } else {
            format!("{label}\n\n")
        },
        shell_command
    )?;
    writeln!(
        md,
        "{} problems x {} samplers x {} seeds, budgets {:?}; {:.0} s. Median [q25, q75] of the \
         best feasible value so far (minimisation; `-`: no feasible trial yet). Split: odd BBOB \
         function numbers (and odd mixed spaces) are the tuning half, even ones (and even mixed \
         spaces) the held-out half. Machine: {machine}; load average (1, 5, 15 min) {load_start} at \
         the start, {load_end} at the end (niced runs share the machine).\n",
        groups.len(),
        spec.samplers.len(),
        spec.seeds.end - spec.seeds.start,
        spec.checkpoints,
        wall_s
    )?;
    if !reference.is_empty() {
        writeln!(
            md,
            "Optuna's columns: `{}` ({}).\n",
            reference_path
                .strip_prefix(&root)
                .unwrap_or(&reference_path)
                .display(),
            reference_meta["label"].as_str().unwrap_or("no label")
        )?;
    }
    let optuna_cols: Vec<(&str, &str)> = OPTUNA
        .iter()
        .copied()
        .filter(|(_, theirs)| reference.keys().any(|(_, s, _)| s == theirs))
        .collect();
    for half in [Half::Tuning, Half::HeldOut] {
        writeln!(md, "## {} half\n", half.as_str())?;
        write!(md, "| problem | optimum | budget |")?;
        for s in &spec.samplers {
            write!(md, " {s} |")?;
        }
        for (_, theirs) in &optuna_cols {
            write!(md, " Optuna {theirs} |")?;
        }
        writeln!(md)?;
        writeln!(
            md,
            "|---|---|---|{}",
            "---|".repeat(spec.samplers.len() + optuna_cols.len())
        )?;
        for ((h, problem), per) in groups.iter().filter(|((h, _), _)| *h == half) {
            for (k, budget) in spec.checkpoints.iter().enumerate() {
                write!(md, "| {problem} | {} | {budget} |", fmt(optimum[problem]))?;
                for s in &spec.samplers {
                    let (m, a, b) = stats(&per[s][k]);
                    write!(md, " {} [{}, {}] |", fmt(m), fmt(a), fmt(b))?;
                    medians.push(json!({"problem": problem, "half": h.as_str(), "sampler": s,
                        "budget": budget, "median": finite_or_null(m), "q25": finite_or_null(a),
                        "q75": finite_or_null(b)}));
                }
                for (_, theirs) in &optuna_cols {
                    match reference_values(problem, theirs, *budget) {
                        Some(v) => {
                            let (m, a, b) = stats(&v);
                            write!(md, " {} [{}, {}] |", fmt(m), fmt(a), fmt(b))?;
                        }
                        None => write!(md, " |")?,
                    }
                }
                writeln!(md)?;
            }
        }
        writeln!(md)?;
    }

    // Mean rank of each sampler's median per (half, budget), average ranks for ties.
    writeln!(
        md,
        "## Mean rank of the median (1 = best), hpo's samplers\n"
    )?;
    writeln!(
        md,
        "| half | budget | problems |{}",
        spec.samplers
            .iter()
            .map(|s| format!(" {s} |"))
            .collect::<String>()
    )?;
    writeln!(md, "|---|---|---|{}", "---|".repeat(spec.samplers.len()))?;
    let mut ranks_json = Vec::new();
    for half in [Half::Tuning, Half::HeldOut] {
        for (k, budget) in spec.checkpoints.iter().enumerate() {
            let mut sum = vec![0.0; spec.samplers.len()];
            let mut n = 0usize;
            for per in groups
                .iter()
                .filter(|((h, _), _)| *h == half)
                .map(|(_, p)| p)
            {
                let meds: Vec<f64> = spec
                    .samplers
                    .iter()
                    .map(|s| suite::median(&per[s][k]))
                    .collect();
                for (i, m) in meds.iter().enumerate() {
                    let below = meds.iter().filter(|x| *x < m).count() as f64;
                    let equal = meds.iter().filter(|x| *x == m).count() as f64;
                    sum[i] += below + (equal + 1.0) / 2.0;
                }
                n += 1;
            }
            if n == 0 {
                continue;
            }
            write!(md, "| {} | {budget} | {n} |", half.as_str())?;
            for (i, s) in spec.samplers.iter().enumerate() {
                let r = sum[i] / n as f64;
                write!(md, " {r:.2} |")?;
                ranks_json.push(json!({"half": half.as_str(), "budget": budget, "sampler": s, "mean_rank": r, "problems": n}));
            }
            writeln!(md)?;
        }
    }
    writeln!(md)?;

    // hpo's samplers against Optuna's, where the reference has the problem:
    // default TPE against Optuna's default TPE is the issue's target; the
    // other pairs check the pipeline (hpo's random search against Optuna's
    // should tie: same problems, same protocol).
    let pairs: Vec<(&str, &str)> = spec
        .samplers
        .iter()
        .map(|s| (s.as_str(), suite::optuna_counterpart(s)))
        .filter(|(_, theirs)| reference.keys().any(|(_, s, _)| s == theirs))
        .collect();
    if !pairs.is_empty() {
        writeln!(
            md,
            "## hpo against Optuna 5.0\n\nPer problem, paired by seed index (independent \
             random streams), Wilcoxon signed-rank, exact, two-sided, 5 %; not significant = \
             tie (with fewer than 6 seeds nothing can be significant). The target is the first \
             pair, hpo's default TPE against Optuna's default TPE; `tpe_optuna` (Optuna's \
             settings) and random search should tie with Optuna's.\n"
        )?;
        writeln!(
            md,
            "| hpo | Optuna | half | budget | problems | no worse | strictly better | worse |"
        )?;
        writeln!(md, "|---|---|---|---|---|---|---|---|")?;
        let mut detail = String::new();
        for (ours_name, theirs_name) in &pairs {
            for half in [Half::Tuning, Half::HeldOut] {
                for (k, budget) in spec.checkpoints.iter().enumerate() {
                    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
                    let mut n = 0;
                    for ((_, problem), per) in groups.iter().filter(|((h, _), _)| *h == half) {
                        let key = (problem.clone(), theirs_name.to_string(), *budget);
                        let Some(theirs) = reference.get(&key) else {
                            continue;
                        };
                        let paired: Vec<(f64, f64)> = records
                            .iter()
                            .filter(|r: &&Record| r.problem == *problem && r.sampler == *ours_name)
                            .filter_map(|r| {
                                theirs
                                    .get(&r.seed)
                                    .map(|t| (suite::or_worst(r.best[k]), *t))
                            })
                            .collect();
                        if paired.is_empty() {
                            continue;
                        }
                        let (a, b): (Vec<f64>, Vec<f64>) = paired.into_iter().unzip();
                        let (verdict, p) = suite::compare(&a, &b, ALPHA);
                        n += 1;
                        *counts.entry(verdict.as_str()).or_default() += 1;
                        writeln!(
                            detail,
                            "| {ours_name} | {theirs_name} | {problem} | {budget} | {} | {} | {} | {:.3} | {} |",
                            a.len(),
                            fmt(suite::median(&per[*ours_name][k])),
                            fmt(suite::median(&b)),
                            p,
                            verdict.as_str()
                        )?;
                        comparisons.push(json!({"ours": ours_name, "theirs": theirs_name,
                            "problem": problem, "half": half.as_str(), "budget": budget,
                            "pairs": a.len(), "p": p, "verdict": verdict.as_str()}));
                    }
                    if n == 0 {
                        continue;
                    }
                    let c = |v: Verdict| counts.get(v.as_str()).copied().unwrap_or(0);
                    let share =
                        |x: usize| format!("{x}/{n} ({:.0} %)", 100.0 * x as f64 / n as f64);
                    writeln!(
                        md,
                        "| {ours_name} | {theirs_name} | {} | {budget} | {n} | {} | {} | {} |",
                        half.as_str(),
                        share(c(Verdict::Better) + c(Verdict::Tie)),
                        share(c(Verdict::Better)),
                        share(c(Verdict::Worse))
                    )?;
                }
            }
        }
        writeln!(
            md,
            "\n| hpo | Optuna | problem | budget | pairs | hpo median | Optuna median | p | verdict |"
        )?;
        writeln!(md, "|---|---|---|---|---|---|---|---|---|")?;
        md.push_str(&detail);
    }

    print!("{md}");
    std::fs::create_dir_all(&out_dir)?;
    let problems: BTreeSet<&String> = records.iter().map(|r| &r.problem).collect();
    let runs: Vec<Value> = records
        .iter()
        .map(|r| {
            let best: serde_json::Map<String, Value> = spec
                .checkpoints
                .iter()
                .zip(&r.best)
                .map(|(c, v)| (c.to_string(), v.map_or(Value::Null, |x| json!(x))))
                .collect();
            json!({"problem": r.problem, "half": r.half.as_str(), "sampler": r.sampler, "seed": r.seed, "best": best})
        })
        .collect();
    let meta = json!({
        "label": label,
        "command": format!("cargo bench -p hpo-core --bench sampler_suite -- {}", shell_command),
        "functions": spec.functions, "instances": spec.instances, "dims": spec.dims,
        "mixed": spec.mixed.iter().map(|m| m.name()).collect::<Vec<_>>(),
        "samplers": spec.samplers, "seeds": spec.seeds.clone().collect::<Vec<_>>(),
        "in_flight": spec.in_flight,
        "budgets": spec.checkpoints, "problems": problems.len(), "wall_s": wall_s,
        "machine": machine, "load_start": load_start, "load_end": load_end,
        "split": "odd BBOB function numbers and odd mixed spaces: tuning; even ones: held out",
        "comparison": "hpo tpe vs Optuna tpe per problem, paired by seed index, exact two-sided Wilcoxon signed-rank at 5 %, not significant = tie",
        "reference": if reference.is_empty() { Value::Null } else { reference_meta },
    });
    let text = json_document(
        &meta,
        &[
            ("medians", &medians),
            ("mean_ranks", &ranks_json),
            ("comparison", &comparisons),
            ("runs", &runs),
        ],
    )?;
    std::fs::write(out_dir.join("sampler_suite.json"), text)?;
    std::fs::write(out_dir.join("sampler_suite.md"), &md)?;
    Ok(())
}

/// Where and how a report is written.
struct Run {
    label: String,
    /// The command line that reproduces it.
    command: String,
    out_dir: PathBuf,
    threads: usize,
    /// Also measure sequential runs with other seeds against the
    /// sequential runs: the measure's noise floor.
    control: bool,
}

/// A ratio `T / B` for the tables: `> 1.25` where the target was not reached.
fn fmt_ratio(x: f64) -> String {
    if x.is_infinite() {
        format!("> {}", parallel::OVERRUN)
    } else {
        format!("{x:.2}")
    }
}

fn half_name(h: Option<Half>) -> &'static str {
    h.map_or("all", Half::as_str)
}

/// `--in-flight K`: every (problem, sampler, seed) sequentially to the
/// largest budget, then with `in_flight` trials in flight to
/// [`parallel::OVERRUN`] times it; writes `parallel_proposals.{json,md}`.
fn parallel_proposals(spec: &Spec, in_flight: usize, run: &Run) -> Result<()> {
    let budgets = spec.checkpoints.clone();
    let largest = *budgets.last().context("no budgets")?;
    let horizon = parallel::overrun_trials(largest);
    let load_start = load_average();
    let t0 = Instant::now();
    let sequential = suite::run_suite(spec, run.threads, |l| eprintln!("{l}"))?;
    let sequential_s = t0.elapsed().as_secs_f64();
    let mut checkpoints = budgets.clone();
    if horizon > largest {
        checkpoints.push(horizon);
    }
    let parallel_spec = Spec {
        checkpoints,
        in_flight,
        ..spec.clone()
    };
    let t1 = Instant::now();
    let in_flight_runs = suite::run_suite(&parallel_spec, run.threads, |l| eprintln!("{l}"))?;
    let parallel_s = t1.elapsed().as_secs_f64();
    // The noise floor: sequential runs with the next seeds, renumbered to
    // pair with the first ones, measured the same way.
    let n_seeds = spec.seeds.end - spec.seeds.start;
    let control = if run.control {
        let other = Spec {
            seeds: spec.seeds.end..spec.seeds.end + n_seeds,
            in_flight: 1,
            ..parallel_spec.clone()
        };
        let mut records = suite::run_suite(&other, run.threads, |l| eprintln!("{l}"))?;
        for r in &mut records {
            r.seed -= n_seeds;
        }
        parallel::summarize(&parallel::reaches(&sequential, &records, &budgets)?)
    } else {
        Vec::new()
    };
    let load_end = load_average();
    let machine = machine();

    let reaches = parallel::reaches(&sequential, &in_flight_runs, &budgets)?;
    let summaries = parallel::summarize(&reaches);

    let mut md = String::new();
    writeln!(
        md,
        "# Parallel proposals: {in_flight} trials in flight against sequential\n\n{}`{}`\n",
        if run.label.is_empty() {
            String::new()
        } else {
            format!("{}\n\n", run.label)
        },
        run.command
    )?;
    writeln!(
        md,
        "{} problems x {} samplers x {} seeds. Each study ran sequentially (1 trial in flight) \
         to {largest} finished trials ({sequential_s:.0} s) and with {in_flight} trials in \
         flight to {horizon} ({parallel_s:.0} s): asked until {in_flight} are running, each \
         trial's parameters suggested at its ask, the oldest told first (equal trial times), \
         as the executor runs them; TPE's constant liar sees the running trials. Machine: \
         {machine}; load average (1, 5, 15 min) {load_start} at the start, {load_end} at the \
         end; {} threads.\n",
        reaches
            .iter()
            .map(|r| &r.problem)
            .collect::<BTreeSet<_>>()
            .len(),
        spec.samplers.len(),
        spec.seeds.end - spec.seeds.start,
        run.threads
    )?;
    writeln!(
        md,
        "**Measure.** Per problem, sampler and budget B: the target is the sequential median \
         (over seeds) best-so-far at B finished trials; T is the fewest finished trials at \
         which the {in_flight}-in-flight median best-so-far reaches the target (not reached \
         within {horizon}: counted as more than {}·B); the efficiency ratio is T/B. Per \
         budget: the median ratio over problems and the share of problems with T/B <= {}. \
         **Target:** the median T/B at most {} at every budget (the whole suite).\n",
        parallel::OVERRUN,
        parallel::TOLERANCE,
        parallel::TOLERANCE
    )?;
    writeln!(
        md,
        "T/B leans below 1 where the sequential median curve is flat before B (it had reached \
         the target earlier), so the tables also give T/T_seq, with T_seq the sequential \
         curve's own first count at the target: trials to the same level, in flight against \
         sequential, exactly 1 for identical runs (random and QMC, whose draws do not depend on \
         the other trials).\n"
    )?;
    for s in &spec.samplers {
        let verdict = |paired: bool| {
            let met = parallel::target_met(&summaries, s, paired);
            let medians = summaries
                .iter()
                .filter(|x| x.sampler == *s && x.half.is_none())
                .map(|x| {
                    fmt_ratio(if paired {
                        x.median_paired_ratio
                    } else {
                        x.median_ratio
                    })
                })
                .collect::<Vec<_>>()
                .join(", ");
            format!("{} ({medians})", if met { "met" } else { "MISSED" })
        };
        writeln!(
            md,
            "- `{s}`: median T/B at budgets {budgets:?}: target {}; median T/T_seq: {}.",
            verdict(false),
            verdict(true)
        )?;
    }
    let table = |md: &mut String, rows: &[Summary]| -> std::fmt::Result {
        writeln!(
            md,
            "\n| sampler | half | budget | problems | median T/B | T/B <= {tol} | median \
             T/T_seq | T/T_seq <= {tol} | not reached |\n|---|---|---|---|---|---|---|---|---|",
            tol = parallel::TOLERANCE
        )?;
        let share =
            |k: usize, n: usize| format!("{k}/{n} ({:.0} %)", 100.0 * k as f64 / n.max(1) as f64);
        for x in rows {
            writeln!(
                md,
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                x.sampler,
                half_name(x.half),
                x.budget,
                x.problems,
                fmt_ratio(x.median_ratio),
                share(x.within, x.problems),
                fmt_ratio(x.median_paired_ratio),
                share(x.paired_within, x.problems),
                x.not_reached,
            )?;
        }
        Ok(())
    };
    table(&mut md, &summaries)?;
    if !control.is_empty() {
        writeln!(
            md,
            "\n### Noise floor\n\nThe same measure with sequential runs on seeds {}..{} in \
             place of the in-flight runs (to {horizon} trials): what seed noise alone gives.",
            spec.seeds.end,
            spec.seeds.end + n_seeds
        )?;
        table(&mut md, &control)?;
    }
    writeln!(
        md,
        "\n## Per problem\n\n| sampler | problem | half | B | target (sequential median at B) | \
         in-flight median at B | T_seq | T | T/B | T/T_seq |\n|---|---|---|---|---|---|---|---|---|---|"
    )?;
    for r in &reaches {
        writeln!(
            md,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            r.sampler,
            r.problem,
            r.half.as_str(),
            r.budget,
            fmt(r.target),
            fmt(r.parallel_at_budget),
            r.sequential_reached_at,
            r.reached_at
                .map_or_else(|| format!("> {}", r.horizon), |t| t.to_string()),
            fmt_ratio(r.ratio()),
            fmt_ratio(r.paired_ratio())
        )?;
    }
    print!("{md}");

    let summary_row = |x: &Summary| {
        json!({"sampler": x.sampler, "half": half_name(x.half), "budget": x.budget,
                "problems": x.problems, "median_ratio": finite_or_null(x.median_ratio),
                "within": x.within, "median_paired_ratio": finite_or_null(x.median_paired_ratio),
                "paired_within": x.paired_within, "not_reached": x.not_reached,
                "met": x.met(), "paired_met": x.paired_met()})
    };
    let summary_json: Vec<Value> = summaries.iter().map(summary_row).collect();
    let reach_json: Vec<Value> = reaches
        .iter()
        .map(|r: &Reach| {
            json!({"sampler": r.sampler, "problem": r.problem, "half": r.half.as_str(),
                "budget": r.budget, "target": finite_or_null(r.target),
                "in_flight_at_budget": finite_or_null(r.parallel_at_budget),
                "sequential_reached_at": r.sequential_reached_at,
                "reached_at": r.reached_at, "ratio": finite_or_null(r.ratio()),
                "paired_ratio": finite_or_null(r.paired_ratio())})
        })
        .collect();
    let meta = json!({
        "label": run.label,
        "command": run.command,
        "in_flight": [1, in_flight],
        "functions": spec.functions, "instances": spec.instances, "dims": spec.dims,
        "mixed": spec.mixed.iter().map(|m| m.name()).collect::<Vec<_>>(),
        "samplers": spec.samplers, "seeds": spec.seeds.clone().collect::<Vec<_>>(),
        "budgets": budgets, "in_flight_trials": horizon,
        "measure": format!("per problem, sampler and budget B: target = median over seeds of the \
            sequential best-so-far at B finished trials; T = fewest finished trials at which the \
            median over seeds of the {in_flight}-in-flight best-so-far is <= target (null: not \
            within {horizon}); ratio = T/B; paired ratio = T/T_seq with T_seq the fewest \
            finished trials at which the sequential median is <= target"),
        "target": format!("median over problems of T/B <= {} at every budget", parallel::TOLERANCE),
        "protocol": format!("{in_flight} trials RUNNING at once: ask until {in_flight} run, \
            parameters suggested at ask, tell the oldest first (equal trial times)"),
        "control": run.control.then(|| format!("sequential runs on seeds {}..{} measured as the in-flight ones", spec.seeds.end, spec.seeds.end + n_seeds)),
        "sequential_s": sequential_s, "in_flight_s": parallel_s, "threads": run.threads,
        "machine": machine, "load_start": load_start, "load_end": load_end,
    });
    let control_json: Vec<Value> = control.iter().map(summary_row).collect();
    let text = json_document(
        &meta,
        &[
            ("summary", &summary_json),
            ("control", &control_json),
            // Per problem, not per seed: per-seed trajectories would take
            // megabytes, and the command reproduces them exactly.
            ("reaches", &reach_json),
        ],
    )?;
    std::fs::create_dir_all(&run.out_dir)?;
    std::fs::write(run.out_dir.join("parallel_proposals.json"), text)?;
    std::fs::write(run.out_dir.join("parallel_proposals.md"), &md)?;
    Ok(())
}
