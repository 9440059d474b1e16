//! A simulated device and a discrete-event simulation of the executor.
//!
//! The workload is read from a TOML or JSON file ([`Workload`]): devices
//! (usable memory, a CUDA context per process, fragmentation that grows with
//! the trials a process has run, compute shared between co-running trials),
//! model families (parameters and shape, a hidden factor between the true
//! peak and the executor's estimate), the search space the configurations are
//! drawn from, and training (tokens per trial, pruning). `bench/workloads/`
//! holds the shipped seed workload; its comments say how it was calibrated.
//!
//! [`simulate`] runs one [`Policy`] over a stream of configurations in
//! simulated time. The executor and the oracle policies drive the very same
//! [`Scheduler`] (admission, shrinking, correction, placement) and
//! [`shrink`] (OOM relaunch) as the real coordinator; only processes and
//! storage are replaced by events. So 5,000 trials take seconds, on any
//! machine, GPU or not.
//!
//! # The model
//!
//! * A configuration's **true peak** is `16 bytes x parameters` (fp32
//!   weights, gradients and AdamW moments) plus activations of
//!   `micro x length x layers x (c_h x hidden + c_a x attention x heads x length)`
//!   bytes; `c_h` and `c_a` are solved from two observed anchors of the file
//!   (`[[calibration]]`).
//! * The executor's **estimate** is the true peak times the family's hidden
//!   `estimate_factor` and a per-configuration noise: the executor never sees
//!   either, it only measures finished trials.
//! * A process costs `context_gib` from its start, plus fragmentation growing
//!   by `fragmentation_gib_per_trial` with every trial it has run.
//! * A trial's peak is allocated at its first step, after the process start
//!   (fresh processes) and its set-up. An **OOM** happens when the true memory
//!   of the device would exceed its usable memory: the allocating trial fails.
//! * **Compute**: a trial's work is `6 x parameters x tokens x (1 + attention x
//!   length / (6 x hidden))` FLOPs; alone it runs at `tflops x min(1, micro x
//!   length / saturation_tokens)`; co-running trials share the device, so
//!   parallelism pays only until the device is full.
//! * **Fixed PAR** runs `par` long-lived study processes per device, each
//!   one trial at a time, as the seed team did: fragmentation accumulates in
//!   each; an OOM poisons the process that allocated, which dies with its
//!   trial, and the supervisor restarts it after `restart_s` (plus the
//!   process start). Its co-runners live on.

use super::admission::{AdmissionPolicy, Candidate, QueuePolicy, Scheduler, Step, TrialEnd};
use super::devices::DeviceBudget;
use super::{shrink, Batch, GIB};
use crate::error::{Error, Result};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;
use std::path::Path;

/// A simulated machine and the workload run on it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Workload {
    /// Seed of the configuration stream.
    pub seed: u64,
    /// Configurations in the stream.
    pub trials: usize,
    /// The devices (at least one).
    pub device: Vec<SimDevice>,
    /// What the executor is told (budget, context, margin, queue).
    pub executor: SimExecutor,
    /// Two observations the activation model is solved from.
    pub calibration: Vec<Anchor>,
    /// Training length and pruning.
    pub training: Training,
    /// The search space configurations are drawn from (uniformly).
    pub space: Space,
    /// Model families.
    pub family: Vec<Family>,
}

/// One simulated device.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SimDevice {
    /// Memory trials can use, in GiB.
    pub usable_gib: f64,
    /// True cost of one process (a CUDA context), in GiB.
    pub context_gib: f64,
    /// Extra memory per trial a process has already run (allocator fragmentation), in GiB.
    pub fragmentation_gib_per_trial: f64,
    /// Cap on a process's fragmentation, in GiB.
    pub fragmentation_max_gib: f64,
    /// Training throughput of a full device, in TFLOP/s.
    pub tflops: f64,
    /// Tokens per step (micro-batch x length) a trial needs to fill the device alone.
    pub saturation_tokens: f64,
    /// Start-up of a fresh process (runtime, CUDA context), in seconds.
    pub process_start_s: f64,
    /// Set-up of a trial in a running process (model, data), in seconds.
    pub trial_setup_s: f64,
    /// Time for a supervisor to notice a crashed study and restart it, in seconds.
    pub restart_s: f64,
    /// Every trial on this device dies with a device error (to test rotation).
    #[serde(default)]
    pub faulty: bool,
}

/// What the executor is configured with in the simulation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SimExecutor {
    /// Memory budget per device, in GiB (usually the device's usable memory).
    pub budget_gib: f64,
    /// Headroom kept free, in GiB.
    pub headroom_gib: f64,
    /// The per-process context cost the executor assumes, in GiB.
    pub context_gib: f64,
    /// Safety margin on corrected estimates (0.05 = 5 %).
    pub safety_margin: f64,
    /// Smallest micro-batch.
    pub min_micro_batch: u32,
    /// Backfill bound ([`QueuePolicy::Backfill`]).
    pub max_bypass: u32,
    /// Configurations sampled ahead.
    pub lookahead: usize,
    /// Whether the executor learns its correction (default true; false to
    /// see what the correction buys).
    #[serde(default = "learn_default")]
    pub learn: bool,
}

fn learn_default() -> bool {
    true
}

/// An observed peak (as `nvidia-smi` shows it: context included) the
/// activation model is solved from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Anchor {
    /// Family name.
    pub family: String,
    /// Micro-batch.
    pub micro: u32,
    /// Sequence length.
    pub length: u32,
    /// Observed process memory, in GiB.
    pub observed_gib: f64,
}

/// Training length and pruning.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Training {
    /// Training examples.
    pub examples: f64,
    /// Epochs of a trial that is not pruned.
    pub epochs: f64,
    /// Bytes per parameter for weights, gradients and optimizer state.
    pub bytes_per_param: f64,
    /// Share of trials the pruner stops.
    pub prune_share: f64,
    /// A pruned trial stops after this share of its work, at least...
    pub prune_at_min: f64,
    /// ... and at most.
    pub prune_at_max: f64,
    /// Fixed PAR (b): attempts per configuration before giving up.
    pub max_attempts: u32,
}

/// The search space.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Space {
    /// Micro-batch choices.
    pub batch: Vec<u32>,
    /// Accumulation choices.
    pub accumulation: Vec<u32>,
    /// Sequence length choices.
    pub length: Vec<u32>,
}

/// A model family.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Family {
    /// Name (`bert-large`).
    pub name: String,
    /// Parameters, in millions.
    pub params_m: f64,
    /// Encoder layers.
    pub layers: u32,
    /// Hidden width.
    pub hidden: u32,
    /// Attention heads.
    pub heads: u32,
    /// Attention memory and compute relative to BERT (DeBERTa's
    /// disentangled attention is about 2).
    pub attention: f64,
    /// Hidden from the executor: its estimate is the true peak times this.
    pub estimate_factor: f64,
    /// Hidden: per-configuration spread of that factor (0.03 = +-3 %).
    pub estimate_noise: f64,
}

impl Workload {
    /// Reads a workload from a `.toml` or `.json` file.
    pub fn from_path(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).map_err(|e| Error::Parse {
            what: format!("workload file {}", path.display()),
            reason: "it cannot be read".into(),
            source: Some(Box::new(e)),
        })?;
        let w = if path.extension().is_some_and(|e| e == "json") {
            Self::from_json_str(&text)?
        } else {
            Self::from_toml_str(&text)?
        };
        Ok(w)
    }

    /// Parses a TOML workload.
    pub fn from_toml_str(text: &str) -> Result<Self> {
        let w: Workload = toml::from_str(text).map_err(|e| Error::Parse {
            what: "TOML workload".into(),
            reason: "it is not valid TOML for a workload".into(),
            source: Some(Box::new(e)),
        })?;
        w.validate()?;
        Ok(w)
    }

    /// Parses a JSON workload.
    pub fn from_json_str(text: &str) -> Result<Self> {
        let w: Workload = serde_json::from_str(text).map_err(|e| Error::Parse {
            what: "JSON workload".into(),
            reason: "it is not valid JSON for a workload".into(),
            source: Some(Box::new(e)),
        })?;
        w.validate()?;
        Ok(w)
    }

    fn validate(&self) -> Result<()> {
        let bad = |m: String| Err(Error::InvalidConfig(format!("workload: {m}")));
        if self.device.is_empty() {
            return bad("at least one [[device]] is needed".into());
        }
        if self.family.is_empty() {
            return bad("at least one [[family]] is needed".into());
        }
        if self.space.batch.is_empty()
            || self.space.accumulation.is_empty()
            || self.space.length.is_empty()
        {
            return bad("[space] needs batch, accumulation and length choices".into());
        }
        if self.calibration.len() != 2 {
            return bad(format!(
                "[[calibration]] needs exactly two anchors to solve the activation model, got {}",
                self.calibration.len()
            ));
        }
        for a in &self.calibration {
            if self.family_named(&a.family).is_none() {
                return bad(format!(
                    "calibration anchor names unknown family `{}`",
                    a.family
                ));
            }
        }
        let (ch, ca) = self.activation_coefficients()?;
        if !(ch.is_finite() && ca.is_finite() && ch >= 0.0 && ca >= 0.0) {
            return bad(format!(
                "the calibration anchors give negative or undefined activation coefficients ({ch}, {ca}); check them"
            ));
        }
        Ok(())
    }

    fn family_named(&self, name: &str) -> Option<&Family> {
        self.family.iter().find(|f| f.name == name)
    }

    /// The activation coefficients `(c_h, c_a)` in bytes, solved from the two
    /// anchors: `observed - context - static = micro x length x layers x
    /// (c_h x hidden + c_a x attention x heads x length)`.
    pub fn activation_coefficients(&self) -> Result<(f64, f64)> {
        let ctx = self.device.first().map_or(0.0, |d| d.context_gib) * GIB as f64;
        let mut rows = Vec::new();
        for a in &self.calibration {
            let f = self
                .family_named(&a.family)
                .ok_or_else(|| Error::InvalidConfig(format!("unknown family `{}`", a.family)))?;
            let tokens_layers = f64::from(a.micro) * f64::from(a.length) * f64::from(f.layers);
            let act = a.observed_gib * GIB as f64 - ctx - self.static_bytes(f);
            rows.push((
                f64::from(f.hidden),
                f.attention * f64::from(f.heads) * f64::from(a.length),
                act / tokens_layers,
            ));
        }
        let [(a1, b1, y1), (a2, b2, y2)] = rows[..] else {
            return Err(Error::InvalidConfig(
                "two calibration anchors are needed".into(),
            ));
        };
        let det = a1 * b2 - a2 * b1;
        if det.abs() < 1e-9 {
            return Err(Error::InvalidConfig(
                "the two calibration anchors do not determine the activation model; use two different shapes".into(),
            ));
        }
        Ok(((y1 * b2 - y2 * b1) / det, (a1 * y2 - a2 * y1) / det))
    }

    fn static_bytes(&self, f: &Family) -> f64 {
        f.params_m * 1e6 * self.training.bytes_per_param
    }

    /// True peak of a configuration (context and fragmentation excluded), in bytes.
    pub fn true_peak(&self, family: &Family, micro: u32, length: u32, coef: (f64, f64)) -> u64 {
        let per = coef.0 * f64::from(family.hidden)
            + coef.1 * family.attention * f64::from(family.heads) * f64::from(length);
        let act = f64::from(micro) * f64::from(length) * f64::from(family.layers) * per;
        (self.static_bytes(family) + act) as u64
    }

    /// The stream of configurations, deterministic in the seed.
    pub fn configs(&self) -> Result<Vec<SimConfig>> {
        let coef = self.activation_coefficients()?;
        let mut rng = ChaCha8Rng::seed_from_u64(self.seed);
        let mut out = Vec::with_capacity(self.trials);
        for _ in 0..self.trials {
            let fi = rng.random_range(0..self.family.len());
            let f = &self.family[fi];
            let micro = self.space.batch[rng.random_range(0..self.space.batch.len())];
            let accumulation =
                self.space.accumulation[rng.random_range(0..self.space.accumulation.len())];
            let length = self.space.length[rng.random_range(0..self.space.length.len())];
            let noise = 1.0 + f.estimate_noise * (2.0 * rng.random::<f64>() - 1.0);
            let work_share = if rng.random::<f64>() < self.training.prune_share {
                let (lo, hi) = (self.training.prune_at_min, self.training.prune_at_max);
                lo + (hi - lo) * rng.random::<f64>()
            } else {
                1.0
            };
            let tokens = self.training.examples * self.training.epochs * f64::from(length);
            let flops = 6.0
                * f.params_m
                * 1e6
                * tokens
                * (1.0 + f.attention * f64::from(length) / (6.0 * f64::from(f.hidden)))
                * work_share;
            out.push(SimConfig {
                family: fi,
                batch: Batch::new(micro, accumulation),
                length,
                estimate_factor: f.estimate_factor * noise,
                flops,
                pruned: work_share < 1.0,
                coef,
            });
        }
        Ok(out)
    }
}

/// One configuration of the stream.
#[derive(Debug, Clone, PartialEq)]
pub struct SimConfig {
    /// Index into [`Workload::family`].
    pub family: usize,
    /// The requested batch.
    pub batch: Batch,
    /// Sequence length.
    pub length: u32,
    /// Hidden estimate factor of this configuration (family factor x noise).
    pub estimate_factor: f64,
    /// Work in FLOPs (already cut short when pruned).
    pub flops: f64,
    /// Whether the pruner stops it (it still counts as useful).
    pub pruned: bool,
    coef: (f64, f64),
}

impl SimConfig {
    /// True peak at micro-batch `micro`, in bytes.
    pub fn true_peak(&self, w: &Workload, micro: u32) -> u64 {
        w.true_peak(&w.family[self.family], micro, self.length, self.coef)
    }

    /// What the executor's estimator says at micro-batch `micro`, in bytes.
    pub fn estimate(&self, w: &Workload, micro: u32) -> u64 {
        (self.true_peak(w, micro) as f64 * self.estimate_factor) as u64
    }
}

/// A scheduling policy to simulate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Policy {
    /// `par` trials as threads of one study process per device.
    Fixed {
        /// Parallel trials.
        par: usize,
        /// Retry OOM-failed configurations (up to `max_attempts`).
        retry: bool,
    },
    /// The executor: estimates, learned correction, admission, relaunch.
    Executor {
        /// Queue order.
        queue: QueuePolicy,
    },
    /// Knows every true peak; packs best-fit; never runs out of memory.
    Oracle,
}

impl Policy {
    /// A short name for tables.
    pub fn name(&self) -> String {
        match self {
            Policy::Fixed { par, retry: false } => format!("fixed PAR={par} (OOM fails)"),
            Policy::Fixed { par, retry: true } => format!("fixed PAR={par} (retry OOM)"),
            Policy::Executor {
                queue: QueuePolicy::Backfill { max_bypass },
            } => format!("executor (best-fit backfill, bypass <= {max_bypass})"),
            Policy::Executor {
                queue: QueuePolicy::Fifo,
            } => "executor (FIFO)".into(),
            Policy::Executor {
                queue: QueuePolicy::BestFit,
            } => "executor (best-fit, unbounded)".into(),
            Policy::Oracle => "oracle best-fit".into(),
        }
    }
}

/// What a simulated run measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Report {
    /// Policy name.
    pub policy: String,
    /// Configurations in the stream.
    pub configs: usize,
    /// Configurations that ended COMPLETE or PRUNED.
    pub useful: usize,
    /// Configurations that never did.
    pub never_completed: usize,
    /// Configurations with no recorded end at all (lost).
    pub lost: usize,
    /// Configurations recorded Infeasible before launch.
    pub infeasible: usize,
    /// Configurations ended as Oom (at the floor, or failed by fixed PAR).
    pub oom_failed: usize,
    /// Configurations that failed `max_attempts` times on faulty devices.
    pub device_failed: usize,
    /// Configurations that fit alone after shrinking (by their true peak) but were not useful.
    pub fit_alone_not_useful: usize,
    /// Trials launched (attempts).
    pub launches: usize,
    /// Out-of-memory events.
    pub oom_events: usize,
    /// OOM events among launches after the first 50.
    pub oom_after_50: usize,
    /// Processes that died.
    pub crashed_processes: usize,
    /// Study processes that died (fixed PAR: every OOM).
    pub crashed_studies: usize,
    /// Configurations launched with a shrunk micro-batch before any OOM.
    pub shrunk_before_launch: usize,
    /// OOM relaunches.
    pub relaunches: usize,
    /// Wall time until the last configuration ended, in hours.
    pub wall_hours: f64,
    /// Useful configurations per wall hour.
    pub useful_per_hour: f64,
    /// Work (PFLOP) of the useful configurations per wall hour: the same
    /// throughput, weighted by trial size (a policy that completes only the
    /// small configurations scores low here).
    pub useful_pflop_per_hour: f64,
    /// Time-weighted true memory in use / usable memory.
    pub memory_in_use: f64,
    /// Time-weighted share of device compute in use.
    pub gpu_busy: f64,
    /// Largest reservation ever held on a device / its budget (executor, oracle).
    pub max_reserved_share: f64,
    /// Every OOM event: launch sequence number, family, and how many
    /// trials of that family had been launched before it.
    pub oom_log: Vec<(usize, String, usize)>,
    /// Devices taken out of rotation, with the reason.
    pub retired_devices: Vec<String>,
    /// Trials launched per device.
    pub launches_per_device: Vec<usize>,
    /// Executor and oracle: the mean number of trials in flight, as a
    /// sampler sees them, when a new configuration was sampled: those
    /// queued or running then, plus the new one (the sampler suite's "K in
    /// flight"). 0 for fixed policies.
    pub in_flight_at_sampling: f64,
}

#[derive(Debug, Clone)]
struct Proc {
    device: usize,
    trials_run: u32,
}

#[derive(Debug, Clone, PartialEq)]
enum Phase {
    /// Process start and set-up, until this time.
    Setup(f64),
    /// Computing; FLOPs left.
    Compute(f64),
}

#[derive(Debug, Clone)]
struct Run {
    attempt: usize,
    config: usize,
    proc: usize,
    batch: Batch,
    phase: Phase,
    peak: u64,
    demand: f64,
    seq: usize,
    family_seq: usize,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Fate {
    Useful,
    Infeasible,
    Oom,
    DeviceFailed,
}

/// Runs `policy` over the workload's configuration stream.
pub fn simulate(w: &Workload, policy: Policy) -> Result<Report> {
    let configs = w.configs()?;
    Sim::new(w, &configs, policy).run()
}

struct Sim<'a> {
    w: &'a Workload,
    configs: &'a [SimConfig],
    policy: Policy,
    now: f64,
    procs: Vec<Proc>,
    /// Fixed PAR: one slot per parallel trial and device, each a study
    /// process (an index into `procs`) or, after a crash, the time it is back.
    slots: Vec<Slot>,
    runs: Vec<Run>,
    fates: Vec<Option<Fate>>,
    attempts: Vec<u32>,
    next_config: usize,
    retry_queue: VecDeque<usize>,
    attempt_config: Vec<(usize, Batch)>,
    family_launches: Vec<usize>,
    sched: Option<Scheduler<usize>>,
    report: Report,
    mem_integral: f64,
    busy_integral: f64,
    /// Sum over sampled configurations of the trials in flight then, and
    /// their count.
    in_flight_sum: f64,
    sampled: usize,
}

impl<'a> Sim<'a> {
    fn new(w: &'a Workload, configs: &'a [SimConfig], policy: Policy) -> Self {
        let sched = match policy {
            Policy::Fixed { .. } => None,
            Policy::Executor { queue } => Some(Scheduler::new(
                w.device
                    .iter()
                    .enumerate()
                    .map(|(i, _)| {
                        DeviceBudget::new(
                            format!("sim:{i}"),
                            gib(w.executor.budget_gib),
                            gib(w.executor.headroom_gib),
                            gib(w.executor.context_gib),
                        )
                    })
                    .collect(),
                AdmissionPolicy {
                    safety_margin: w.executor.safety_margin,
                    queue,
                    min_micro_batch: w.executor.min_micro_batch,
                    max_device_faults: 3,
                    learn: w.executor.learn,
                },
            )),
            Policy::Oracle => Some(Scheduler::new(
                w.device
                    .iter()
                    .enumerate()
                    .map(|(i, d)| {
                        DeviceBudget::new(
                            format!("sim:{i}"),
                            gib(d.usable_gib),
                            0,
                            gib(d.context_gib),
                        )
                    })
                    .collect(),
                AdmissionPolicy {
                    safety_margin: 0.0,
                    queue: QueuePolicy::BestFit,
                    min_micro_batch: w.executor.min_micro_batch,
                    max_device_faults: 3,
                    learn: false,
                },
            )),
        };
        let n = configs.len();
        Sim {
            w,
            configs,
            policy,
            now: 0.0,
            procs: Vec::new(),
            slots: match policy {
                Policy::Fixed { par, .. } => (0..w.device.len())
                    .flat_map(|d| {
                        (0..par).map(move |_| Slot {
                            device: d,
                            proc: None,
                            back: 0.0,
                            ready_at: 0.0,
                        })
                    })
                    .collect(),
                _ => Vec::new(),
            },
            runs: Vec::new(),
            fates: vec![None; n],
            attempts: vec![0; n],
            next_config: 0,
            retry_queue: VecDeque::new(),
            attempt_config: Vec::new(),
            family_launches: vec![0; w.family.len()],
            sched,
            report: Report {
                policy: policy.name(),
                configs: n,
                launches_per_device: vec![0; w.device.len()],
                ..Default::default()
            },
            mem_integral: 0.0,
            in_flight_sum: 0.0,
            sampled: 0,
            busy_integral: 0.0,
        }
    }

    fn run(mut self) -> Result<Report> {
        loop {
            self.schedule();
            let Some((dt, event)) = self.next_event() else {
                break;
            };
            self.advance(dt);
            self.handle(event);
        }
        self.finish()
    }

    /// True memory in use on device `d`.
    fn in_use(&self, d: usize) -> u64 {
        let dev = &self.w.device[d];
        let mut total = 0u64;
        for (i, p) in self.procs.iter().enumerate() {
            if p.device != d || !self.proc_alive(i) {
                continue;
            }
            let frag = (dev.fragmentation_gib_per_trial * f64::from(p.trials_run))
                .min(dev.fragmentation_max_gib);
            total += gib(dev.context_gib) + gib(frag);
        }
        for r in &self.runs {
            if self.procs[r.proc].device == d && matches!(r.phase, Phase::Compute(_)) {
                total += r.peak;
            }
        }
        total
    }

    fn proc_alive(&self, i: usize) -> bool {
        match self.policy {
            Policy::Fixed { .. } => self.slots.iter().any(|s| s.proc == Some(i)),
            _ => self.runs.iter().any(|r| r.proc == i),
        }
    }

    fn rates(&self) -> Vec<f64> {
        let mut demand = vec![0.0; self.w.device.len()];
        for r in &self.runs {
            if matches!(r.phase, Phase::Compute(_)) {
                demand[self.procs[r.proc].device] += r.demand;
            }
        }
        self.runs
            .iter()
            .map(|r| {
                let d = self.procs[r.proc].device;
                let scale = if demand[d] > 1.0 {
                    1.0 / demand[d]
                } else {
                    1.0
                };
                self.w.device[d].tflops * 1e12 * r.demand * scale
            })
            .collect()
    }

    fn next_event(&self) -> Option<(f64, Event)> {
        let rates = self.rates();
        let mut best: Option<(f64, Event)> = None;
        let mut consider = |t: f64, e: Event| {
            if best.as_ref().is_none_or(|(b, _)| t < *b) {
                best = Some((t, e));
            }
        };
        for (i, r) in self.runs.iter().enumerate() {
            match r.phase {
                Phase::Setup(until) => consider((until - self.now).max(0.0), Event::Setup(i)),
                Phase::Compute(left) => consider(left / rates[i].max(1.0), Event::Done(i)),
            }
        }
        for s in &self.slots {
            if s.proc.is_none() && s.back > self.now && self.has_work() {
                consider(s.back - self.now, Event::Restart);
            }
        }
        best
    }

    fn has_work(&self) -> bool {
        self.next_config < self.configs.len() || !self.retry_queue.is_empty()
    }

    fn advance(&mut self, dt: f64) {
        let rates = self.rates();
        let mut busy = 0.0;
        let mut mem = 0.0;
        for d in 0..self.w.device.len() {
            mem += self.in_use(d) as f64 / gib(self.w.device[d].usable_gib) as f64;
            let demand: f64 = self
                .runs
                .iter()
                .filter(|r| self.procs[r.proc].device == d && matches!(r.phase, Phase::Compute(_)))
                .map(|r| r.demand)
                .sum();
            busy += demand.min(1.0);
        }
        let n = self.w.device.len() as f64;
        self.mem_integral += dt * mem / n;
        self.busy_integral += dt * busy / n;
        for (r, rate) in self.runs.iter_mut().zip(rates) {
            if let Phase::Compute(left) = &mut r.phase {
                *left = (*left - rate * dt).max(0.0);
            }
        }
        self.now += dt;
    }

    fn handle(&mut self, e: Event) {
        match e {
            Event::Restart => {}
            Event::Setup(i) => self.first_step(i),
            Event::Done(i) => {
                let r = self.runs.swap_remove(i);
                let c = r.config;
                self.fates[c] = Some(Fate::Useful);
                self.procs[r.proc].trials_run += 1;
                if let Some(s) = self.sched.as_mut() {
                    s.end(
                        &r.attempt,
                        &TrialEnd {
                            measured: Some(r.peak),
                            ..Default::default()
                        },
                    );
                }
            }
        }
    }

    /// Run `i` allocates its peak: it fits, or it runs out of memory.
    fn first_step(&mut self, i: usize) {
        let p = self.runs[i].proc;
        let d = self.procs[p].device;
        if self.w.device[d].faulty {
            let r = self.runs.swap_remove(i);
            self.report.crashed_processes += 1;
            if let Some(s) = self.sched.as_mut() {
                s.end(
                    &r.attempt,
                    &TrialEnd {
                        device_fault: Some("device error (simulated faulty device)".into()),
                        ..Default::default()
                    },
                );
            }
            // The configuration goes back to the queue, as a WAITING retry,
            // up to the attempt limit.
            if self.attempts[r.config] < self.w.training.max_attempts {
                self.requeue(r.config, r.batch);
            } else {
                self.fates[r.config] = Some(Fate::DeviceFailed);
            }
            return;
        }
        let need = self.in_use(d) + self.runs[i].peak;
        let c = self.runs[i].config;
        let flops = self.configs[c].flops;
        if need <= gib(self.w.device[d].usable_gib) {
            self.runs[i].phase = Phase::Compute(flops);
            return;
        }
        // Out of memory.
        self.report.oom_events += 1;
        let seq = self.runs[i].seq;
        if seq >= 50 {
            self.report.oom_after_50 += 1;
        }
        let family_seq = self.runs[i].family_seq;
        self.report.oom_log.push((
            seq,
            self.w.family[self.configs[c].family].name.clone(),
            family_seq,
        ));
        match self.policy {
            Policy::Fixed { retry, .. } => {
                // The study process that allocated is poisoned and dies; the
                // supervisor restarts it. Its co-runners in other processes live on.
                let r = self.runs.swap_remove(i);
                self.report.crashed_processes += 1;
                self.report.crashed_studies += 1;
                if let Some(slot) = self.slots.iter_mut().find(|s| s.proc == Some(p)) {
                    slot.proc = None;
                    slot.back = self.now + self.w.device[d].restart_s;
                }
                if retry && self.attempts[r.config] < self.w.training.max_attempts {
                    self.retry_queue.push_back(r.config);
                } else {
                    self.fates[r.config] = Some(Fate::Oom);
                }
            }
            Policy::Executor { .. } | Policy::Oracle => {
                let r = self.runs.swap_remove(i);
                self.report.crashed_processes += 1;
                if let Some(s) = self.sched.as_mut() {
                    s.end(
                        &r.attempt,
                        &TrialEnd {
                            oom: true,
                            ..Default::default()
                        },
                    );
                }
                match shrink(r.batch, self.w.executor.min_micro_batch) {
                    Some(smaller) => {
                        self.report.relaunches += 1;
                        self.requeue(r.config, smaller);
                    }
                    None => self.fates[r.config] = Some(Fate::Oom),
                }
            }
        }
    }

    fn requeue(&mut self, config: usize, batch: Batch) {
        if let Some(s) = self.sched.as_mut() {
            let attempt = self.attempt_config.len();
            self.attempt_config.push((config, batch));
            let c = &self.configs[config];
            let w = self.w;
            let oracle = matches!(self.policy, Policy::Oracle);
            s.push(Candidate::new(
                attempt,
                w.family[c.family].name.clone(),
                batch,
                w.executor.min_micro_batch,
                |b| {
                    if oracle {
                        c.true_peak(w, b.micro)
                    } else {
                        c.estimate(w, b.micro)
                    }
                },
            ));
        } else {
            self.retry_queue.push_back(config);
        }
    }

    fn schedule(&mut self) {
        match self.policy {
            Policy::Fixed { .. } => self.schedule_fixed(),
            _ => self.schedule_managed(),
        }
    }

    fn schedule_fixed(&mut self) {
        for k in 0..self.slots.len() {
            let d = self.slots[k].device;
            let dev = &self.w.device[d];
            let proc = match self.slots[k].proc {
                Some(p) => p,
                None if self.slots[k].back <= self.now && self.has_work() => {
                    self.procs.push(Proc {
                        device: d,
                        trials_run: 0,
                    });
                    let p = self.procs.len() - 1;
                    self.slots[k].proc = Some(p);
                    self.slots[k].ready_at = self.now + dev.process_start_s;
                    p
                }
                None => continue,
            };
            if self.runs.iter().any(|r| r.proc == proc) {
                continue;
            }
            let config = match self.retry_queue.pop_front() {
                Some(c) => c,
                None if self.next_config < self.configs.len() => {
                    self.next_config += 1;
                    self.next_config - 1
                }
                None => continue,
            };
            let batch = self.configs[config].batch;
            let at = self.slots[k].ready_at.max(self.now) + dev.trial_setup_s;
            self.start_run(config, proc, batch, at, usize::MAX);
        }
    }

    fn schedule_managed(&mut self) {
        let lookahead = self.w.executor.lookahead.max(1);
        loop {
            let queued = self.sched.as_ref().map_or(0, Scheduler::queued);
            if queued >= lookahead || self.next_config >= self.configs.len() {
                break;
            }
            let c = self.next_config;
            self.next_config += 1;
            let running = self.sched.as_ref().map_or(0, Scheduler::running);
            self.in_flight_sum += (queued + running + 1) as f64;
            self.sampled += 1;
            let batch = self.configs[c].batch;
            self.requeue(c, batch);
        }
        while let Some(step) = self.sched.as_mut().and_then(Scheduler::decide) {
            match step {
                Step::Infeasible { key, .. } => {
                    let (c, _) = self.attempt_config[key];
                    self.fates[c] = Some(Fate::Infeasible);
                }
                Step::Launch(l) => {
                    let (c, requested) = self.attempt_config[l.key];
                    if l.shrunk && requested == self.configs[c].batch {
                        self.report.shrunk_before_launch += 1;
                    }
                    let d = l.device;
                    self.procs.push(Proc {
                        device: d,
                        trials_run: 0,
                    });
                    let p = self.procs.len() - 1;
                    let dev = &self.w.device[d];
                    let at = self.now + dev.process_start_s + dev.trial_setup_s;
                    self.start_run(c, p, l.batch, at, l.key);
                }
            }
        }
        if let Some(s) = &self.sched {
            if !s.devices().any_in_rotation() {
                // Nothing can run any more: the rest is never completed.
                let _ = self.sched.as_mut().map(Scheduler::drop_queued);
                self.next_config = self.configs.len();
            }
        }
    }

    fn start_run(
        &mut self,
        config: usize,
        proc: usize,
        batch: Batch,
        setup_until: f64,
        key: usize,
    ) {
        let c = &self.configs[config];
        let d = self.procs[proc].device;
        let dev = &self.w.device[d];
        self.attempts[config] += 1;
        let seq = self.report.launches;
        self.report.launches += 1;
        self.report.launches_per_device[d] += 1;
        let attempt = if key == usize::MAX { seq } else { key };
        let family_seq = self.family_launches[c.family];
        self.family_launches[c.family] += 1;
        self.runs.push(Run {
            attempt,
            config,
            proc,
            batch,
            phase: Phase::Setup(setup_until),
            peak: c.true_peak(self.w, batch.micro),
            demand: (f64::from(batch.micro) * f64::from(c.length) / dev.saturation_tokens).min(1.0),
            seq,
            family_seq,
        });
    }

    fn finish(mut self) -> Result<Report> {
        let w = self.w;
        let r = &mut self.report;
        r.wall_hours = self.now / 3600.0;
        let mut useful_flops = 0.0;
        for (i, fate) in self.fates.iter().enumerate() {
            match fate {
                Some(Fate::Useful) => r.useful += 1,
                Some(Fate::Infeasible) => r.infeasible += 1,
                Some(Fate::Oom) => r.oom_failed += 1,
                Some(Fate::DeviceFailed) => r.device_failed += 1,
                None => r.lost += 1,
            }
            if *fate == Some(Fate::Useful) {
                useful_flops += self.configs[i].flops;
            } else {
                r.never_completed += 1;
                let c = &self.configs[i];
                let floor = super::shrink_ladder(c.batch, w.executor.min_micro_batch)
                    .last()
                    .map_or(c.batch.micro, |b| b.micro);
                let fits = w.device.iter().any(|d| {
                    !d.faulty && c.true_peak(w, floor) + gib(d.context_gib) <= gib(d.usable_gib)
                });
                if fits {
                    r.fit_alone_not_useful += 1;
                }
            }
        }
        if r.wall_hours > 0.0 {
            r.useful_per_hour = r.useful as f64 / r.wall_hours;
            r.useful_pflop_per_hour = useful_flops / 1e15 / r.wall_hours;
        }
        if self.sampled > 0 {
            r.in_flight_at_sampling = self.in_flight_sum / self.sampled as f64;
        }
        if self.now > 0.0 {
            r.memory_in_use = self.mem_integral / self.now;
            r.gpu_busy = self.busy_integral / self.now;
        }
        if let Some(s) = &self.sched {
            for d in 0..s.devices().len() {
                if let Some(b) = s.devices().budget(d) {
                    if b.usable > 0 {
                        r.max_reserved_share = r
                            .max_reserved_share
                            .max(s.peak_reserved(d) as f64 / b.usable as f64);
                    }
                }
                if let Some(why) = s.devices().out_of_rotation(d) {
                    r.retired_devices.push(format!("sim:{d}: {why}"));
                }
            }
        }
        Ok(self.report)
    }
}

#[derive(Debug, Clone)]
struct Slot {
    device: usize,
    proc: Option<usize>,
    back: f64,
    ready_at: f64,
}

#[derive(Debug, Clone, Copy)]
enum Event {
    Setup(usize),
    Done(usize),
    Restart,
}

fn gib(x: f64) -> u64 {
    (x * GIB as f64).max(0.0) as u64
}
