//! Executor benchmark: parallel trials on one 24 GB GPU, honestly scored.
//!
//! Run: `cargo bench -p hpo-core --bench executor [-- --workload FILE]`.
//! Writes `bench/results/executor.json` and `bench/results/executor.md` at
//! the workspace root and prints the table.
//!
//! Every policy runs the same stream of configurations (the workload's
//! `trials`, 5,000 for the shipped `bench/workloads/seed_24gb.toml`) on the
//! simulated device of `hpo_core::executor::simulated`, a discrete-event
//! simulation. The executor and the oracle go through the executor's own
//! `Scheduler` (admission, shrinking, learned correction, placement) and
//! `shrink` (OOM relaunch): the code the real coordinator runs, not a copy.
//! No GPU is involved: the figures are the model's, not a measurement.
//!
//! Score: useful trials per wall hour (configurations that ended COMPLETE or
//! PRUNED, divided by the time until the last configuration ended), so a
//! policy that fails big trials quickly does not look fast.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use hpo_core::executor::simulated::{simulate, Policy, Report, Workload};
use hpo_core::executor::QueuePolicy;
use serde_json::json;
use std::path::PathBuf;
use std::time::Instant;

fn main() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut workload_path = root.join("bench/workloads/seed_24gb.toml");
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--workload" => workload_path = PathBuf::from(args.next().expect("--workload FILE")),
            "--bench" => {}
            other => eprintln!("ignoring argument `{other}`"),
        }
    }
    let shipped = workload_path.ends_with("bench/workloads/seed_24gb.toml");
    let w = Workload::from_path(&workload_path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", workload_path.display()));
    let (ch, ca) = w.activation_coefficients().unwrap();
    println!(
        "workload {}: {} configurations, activation model c_h = {ch:.2} B, c_a = {ca:.3} B",
        workload_path.display(),
        w.trials
    );

    let max_bypass = w.executor.max_bypass;
    let chosen = Policy::Executor {
        queue: QueuePolicy::Backfill { max_bypass },
    };
    let mut policies = Vec::new();
    for par in 1..=4 {
        policies.push(Policy::Fixed { par, retry: false });
        policies.push(Policy::Fixed { par, retry: true });
    }
    policies.push(Policy::Oracle);
    policies.push(chosen);
    policies.push(Policy::Executor {
        queue: QueuePolicy::Fifo,
    });
    policies.push(Policy::Executor {
        queue: QueuePolicy::BestFit,
    });

    let t0 = Instant::now();
    let reports: Vec<Report> = policies
        .iter()
        .map(|&p| {
            let t = Instant::now();
            let r = simulate(&w, p).unwrap();
            eprintln!(
                "{:<40} {:>8.1} useful/h  ({:.2} s)",
                r.policy,
                r.useful_per_hour,
                t.elapsed().as_secs_f64()
            );
            r
        })
        .collect();
    let elapsed = t0.elapsed().as_secs_f64();

    let by = |p: Policy| &reports[policies.iter().position(|&q| q == p).unwrap()];
    let exec = by(chosen);
    let oracle = by(Policy::Oracle);
    let best_fixed = reports
        .iter()
        .zip(&policies)
        .filter(|(_, p)| matches!(p, Policy::Fixed { .. }))
        .map(|(r, _)| r)
        .max_by(|a, b| a.useful_per_hour.total_cmp(&b.useful_per_hour))
        .unwrap();
    let after = exec.launches.saturating_sub(50).max(1);
    let oom_relaunch_share_after_50 = exec.oom_after_50 as f64 / after as f64;
    let ratio_vs_oracle = exec.useful_per_hour / oracle.useful_per_hour;
    let ratio_vs_best_fixed = exec.useful_per_hour / best_fixed.useful_per_hour;
    let best_fixed_work = reports
        .iter()
        .zip(&policies)
        .filter(|(_, p)| matches!(p, Policy::Fixed { .. }))
        .map(|(r, _)| r)
        .max_by(|a, b| a.useful_pflop_per_hour.total_cmp(&b.useful_pflop_per_hour))
        .unwrap();
    let work_ratio_vs_oracle = exec.useful_pflop_per_hour / oracle.useful_pflop_per_hour;
    let work_ratio_vs_best_fixed =
        exec.useful_pflop_per_hour / best_fixed_work.useful_pflop_per_hour;

    // Lookahead: packing choice against the sampler's information. The
    // same executor on the same stream with 1, 2, 4 and 8 trials sampled
    // ahead, each against the oracle with the same lookahead and against
    // the shipped figure above, with the trials in flight the sampler saw.
    // The workload's own lookahead was simulated above.
    let lookahead_rows: Vec<(usize, Report, Report)> = [1, 2, 4, 8]
        .into_iter()
        .map(|l| {
            if l == w.executor.lookahead {
                return (l, exec.clone(), oracle.clone());
            }
            let mut wl = w.clone();
            wl.executor.lookahead = l;
            let e = simulate(&wl, chosen).unwrap();
            let o = simulate(&wl, Policy::Oracle).unwrap();
            (l, e, o)
        })
        .collect();
    let lookahead_json: Vec<_> = lookahead_rows
        .iter()
        .map(|(l, e, o)| {
            json!({
                "lookahead": l,
                "useful_per_hour": e.useful_per_hour,
                "oracle_useful_per_hour": o.useful_per_hour,
                "ratio_vs_same_lookahead_oracle": e.useful_per_hour / o.useful_per_hour,
                "ratio_vs_shipped_executor": e.useful_per_hour / exec.useful_per_hour,
                "in_flight_at_sampling": e.in_flight_at_sampling,
                "never_completed": e.never_completed,
            })
        })
        .collect();

    let slim = |r: &Report| {
        let mut r = r.clone();
        r.oom_log.clear();
        r
    };
    let doc = json!({
        "benchmark": "executor",
        "workload": if shipped { "bench/workloads/seed_24gb.toml".to_string() } else { workload_path.display().to_string() },
        "device": "simulated (discrete-event model; no GPU was used)",
        "configs": w.trials,
        "activation_model": {"c_h_bytes": ch, "c_a_bytes": ca},
        "simulation_seconds": elapsed,
        "executor": {
            "policy": exec.policy,
            "useful_per_hour": exec.useful_per_hour,
            "ratio_vs_oracle": ratio_vs_oracle,
            "ratio_vs_best_fixed": ratio_vs_best_fixed,
            "best_fixed": best_fixed.policy,
            "useful_pflop_per_hour": exec.useful_pflop_per_hour,
            "work_ratio_vs_oracle": work_ratio_vs_oracle,
            "work_ratio_vs_best_fixed": work_ratio_vs_best_fixed,
            "best_fixed_by_work": best_fixed_work.policy,
            "oom_events": exec.oom_events,
            "oom_relaunch_share_after_50": oom_relaunch_share_after_50,
            "crashed_processes": exec.crashed_processes,
            "crashed_studies": exec.crashed_studies,
            "memory_in_use": exec.memory_in_use,
            "gpu_busy": exec.gpu_busy,
            "lost": exec.lost,
            "infeasible": exec.infeasible,
            "oom_failed": exec.oom_failed,
            "fit_alone_not_useful": exec.fit_alone_not_useful,
            "shrunk_before_launch": exec.shrunk_before_launch,
            "max_reserved_share": exec.max_reserved_share,
            "targets": {
                "ratio_vs_oracle_at_least_0_9": ratio_vs_oracle >= 0.9,
                "zero_crashed_studies": exec.crashed_studies == 0,
                "nothing_lost": exec.lost == 0,
                "oom_relaunches_after_50_below_1_percent": oom_relaunch_share_after_50 < 0.01,
                "every_config_that_fits_alone_completes": exec.fit_alone_not_useful == 0,
            },
        },
        "policies": reports.iter().map(slim).collect::<Vec<_>>(),
        "lookahead": lookahead_json,
    });
    let out = root.join("bench/results");
    std::fs::create_dir_all(&out).unwrap();
    std::fs::write(
        out.join("executor.json"),
        serde_json::to_string_pretty(&doc).unwrap() + "\n",
    )
    .unwrap();

    let mut md = String::new();
    md.push_str(&format!(
        "# Executor benchmark\n\n`cargo bench -p hpo-core --bench executor` on `{}`: {} configurations, \
         the same stream for every policy, on the **simulated** 24 GB device (a discrete-event model; \
         no GPU was used). Useful = COMPLETE or PRUNED; useful/h = useful configurations per wall hour \
         until the last one ended.\n\n",
        if shipped { "bench/workloads/seed_24gb.toml".to_string() } else { workload_path.display().to_string() },
        w.trials
    ));
    md.push_str("| policy | useful/h | useful PFLOP/h | useful | never completed | OOM events | crashed processes | crashed studies | memory in use | GPU busy | wall h |\n");
    md.push_str("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
    for r in &reports {
        md.push_str(&format!(
            "| {} | {:.1} | {:.0} | {} | {} | {} | {} | {} | {:.0} % | {:.0} % | {:.1} |\n",
            r.policy,
            r.useful_per_hour,
            r.useful_pflop_per_hour,
            r.useful,
            r.never_completed,
            r.oom_events,
            r.crashed_processes,
            r.crashed_studies,
            100.0 * r.memory_in_use,
            100.0 * r.gpu_busy,
            r.wall_hours
        ));
    }
    md.push_str(&format!(
        "\nExecutor ({}) against its targets:\n\n\
         | target | measured | met |\n| --- | --- | --- |\n\
         | useful/h >= 0.9 x oracle | {:.3} x | {} |\n\
         | zero crashed studies | {} | {} |\n\
         | nothing lost | {} lost | {} |\n\
         | OOM relaunches < 1 % of trials after the first 50 | {:.2} % ({} of {}) | {} |\n\
         | every configuration that fits alone after shrinking completes | {} did not | {} |\n\
         \nAgainst the best fixed policy by useful/h ({}): {:.2} x. By useful work per hour: {:.2} x the oracle, \
         {:.2} x the best fixed policy ({}). Infeasible before launch: {}; shrunk before launch: {}; \
         largest reservation: {:.1} % of the budget.\n",
        exec.policy,
        ratio_vs_oracle,
        yes(ratio_vs_oracle >= 0.9),
        exec.crashed_studies,
        yes(exec.crashed_studies == 0),
        exec.lost,
        yes(exec.lost == 0),
        100.0 * oom_relaunch_share_after_50,
        exec.oom_after_50,
        after,
        yes(oom_relaunch_share_after_50 < 0.01),
        exec.fit_alone_not_useful,
        yes(exec.fit_alone_not_useful == 0),
        best_fixed.policy,
        ratio_vs_best_fixed,
        work_ratio_vs_oracle,
        work_ratio_vs_best_fixed,
        best_fixed_work.policy,
        exec.infeasible,
        exec.shrunk_before_launch,
        100.0 * exec.max_reserved_share,
    ));
    md.push_str(&format!(
        "\n## Lookahead: packing against the sampler's information\n\n\
         The executor above (lookahead {}, the workload's) with other numbers of trials sampled \
         ahead. In flight = trials queued or running when a configuration was sampled, plus it: \
         what a sampler sees (the sampler suite's K; TPE's cost of K is in the book's Performance \
         chapter). hpo's default is {} for samplers that learn from results (TPE, CMA-ES) and {} \
         for the others (random, QMC, grid).\n\n\
         | lookahead | useful/h | x oracle (same lookahead) | x the executor above | in flight at sampling | never completed |\n\
         | ---: | ---: | ---: | ---: | ---: | ---: |\n",
        w.executor.lookahead,
        hpo_core::executor::LOOKAHEAD_LEARNING,
        hpo_core::executor::LOOKAHEAD_INDEPENDENT,
    ));
    for (l, e, o) in &lookahead_rows {
        md.push_str(&format!(
            "| {l} | {:.1} | {:.3} | {:.3} | {:.2} | {} |\n",
            e.useful_per_hour,
            e.useful_per_hour / o.useful_per_hour,
            e.useful_per_hour / exec.useful_per_hour,
            e.in_flight_at_sampling,
            e.never_completed
        ));
    }
    std::fs::write(out.join("executor.md"), &md).unwrap();
    println!("{md}");
}

fn yes(b: bool) -> &'static str {
    if b {
        "yes"
    } else {
        "**no**"
    }
}
