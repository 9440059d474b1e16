//! The study's command-line flags, as a clap [`Args`](clap::Args) struct an
//! experiment flattens into its own.

use crate::sampler::SamplerConfig;
use crate::ParamValue;
use std::str::FromStr;

/// Parameter values by name, as `--enqueue` takes them.
pub type Params = Vec<(String, ParamValue)>;

/// The flags every study has: where it lives, how long it runs, how trials
/// run, what it starts with. Flatten it into an experiment's own flags:
///
/// ```
/// use clap::Parser;
///
/// /// My experiment.
/// #[derive(Parser)]
/// struct Args {
///     #[command(flatten)]
///     study: hpo::cli::StudyArgs,
///     /// The experiment's own flag.
///     #[arg(long, default_value_t = 3)]
///     epochs: usize,
/// }
///
/// let args = Args::try_parse_from(["exp", "--trials", "20", "--jobs", "2"]).unwrap();
/// assert_eq!(args.study.trials, Some(20));
/// assert_eq!(args.study.jobs, Some(hpo::cli::Jobs::Workers(2)));
/// ```
///
/// Flags left out are `None`; the experiment's defaults
/// ([`StudyRunner`](super::StudyRunner)'s `default_*` settings) fill them.
#[derive(clap::Args, Debug, Clone, Default, PartialEq)]
pub struct StudyArgs {
    /// Where the study lives: `sqlite:///study.db`, `postgresql://user@host/db`
    /// (a password in the URL is never printed). Also read from the
    /// environment variable `HPO_STORAGE`, which keeps a password off the
    /// command line (`ps` shows command lines to every user of a machine).
    #[arg(long, value_name = "URL", env = "HPO_STORAGE", hide_env_values = true)]
    pub storage: Option<String>,
    /// The study's name inside the storage; running again with the same name
    /// continues the study. Also read from `HPO_STUDY`.
    #[arg(long, value_name = "NAME", env = "HPO_STUDY")]
    pub study: Option<String>,
    /// Trials to run in this invocation (a resumed study keeps its old ones).
    #[arg(long, value_name = "N")]
    pub trials: Option<usize>,
    /// Stop starting new trials after this many seconds (running trials
    /// finish).
    #[arg(long, value_name = "SECONDS")]
    pub timeout: Option<u64>,
    /// How trials run: `auto` (worker processes, as many at once as the
    /// memory admits), `N` (worker processes, at most N at once, also
    /// admitted by memory) or `in-process` (one at a time in this process).
    #[arg(long, value_name = "auto|N|in-process")]
    pub jobs: Option<Jobs>,
    /// Memory that worker processes are admitted by, such as `24GiB`,
    /// `512MiB` or `8GB`: caps the device's total (a budget below it
    /// reproduces a smaller card), or the machine's memory on the CPU.
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub memory_budget: Option<u64>,
    /// Fail a trial whose worker process runs longer than this many seconds
    /// (SIGTERM, then SIGKILL): a worker hung on a broken device must not
    /// stall the study. Worker processes only.
    #[arg(long, value_name = "SECONDS")]
    pub trial_timeout: Option<u64>,
    /// After SIGTERM (a scheduler's preemption, `scancel`, a time limit),
    /// how many seconds running trials may go on before they are failed and
    /// re-enqueued for the next run (default 20, inside Slurm's `KillWait`
    /// of 30 s); nothing new starts meanwhile. Ctrl-C (SIGINT) stops them
    /// at once; a second Ctrl-C ends the process without cleaning up.
    #[arg(long, value_name = "SECONDS")]
    pub term_grace: Option<u64>,
    /// A configuration to run before the sampler's own (Optuna's
    /// `enqueue_trial`): a JSON object of parameter values, named as the
    /// trial lines print them, such as `{"lr": 1.5e-4}`; parameters left out
    /// are sampled. Repeatable; replaces the experiment's own warm start.
    #[arg(long, value_name = "JSON", value_parser = parse_params)]
    pub enqueue: Vec<Params>,
    /// Seed of the sampler (and of whatever else the experiment seeds).
    #[arg(long, value_name = "N", default_value_t = 42)]
    pub seed: u64,
    /// The sampler: `tpe`, `gp`, `auto`, `cmaes`, `qmc` or `random`, seeded
    /// by `--seed`; or its settings as JSON, such as
    /// `{"sampler": "tpe", "n_startup_trials": 5}`.
    #[arg(long, value_name = "NAME|JSON", value_parser = parse_sampler)]
    pub sampler: Option<SamplerArg>,
    /// Join a study that already exists (created by `--create`), as a node
    /// a scheduler started: run trials until the study's own budget
    /// (`--study-trials`, `--deadline` given at creation) is reached across
    /// every node, then exit 0. Refuses to create a study (a mistyped name
    /// must not start a new one), enqueues nothing, and, with worker
    /// processes, retries a trial whose node died (twice) on whichever node
    /// is free.
    #[arg(long, conflicts_with_all = ["create", "study_trials", "deadline", "enqueue"])]
    pub join: bool,
    /// Create the study (or update an existing one): record its search
    /// space and its budget (`--study-trials`, `--deadline`), enqueue its
    /// warm start or `--enqueue`, and exit without running a trial. Run it
    /// once, before the nodes that `--join` it.
    #[arg(long)]
    pub create: bool,
    /// The budget of the whole study, across every process and machine:
    /// it is done once this many trials ended COMPLETE or PRUNED (failed
    /// trials and their retry copies do not count). Recorded in the study.
    #[arg(long, value_name = "N", value_parser = parse_study_trials)]
    pub study_trials: Option<usize>,
    /// No trial of the study starts after this time, on any machine:
    /// RFC 3339 (`2026-12-01T18:00:00Z`) or from now (`+90m`, `+12h`,
    /// `+2d`). Recorded in the study.
    #[arg(long, value_name = "TIME", value_parser = parse_deadline)]
    pub deadline: Option<chrono::DateTime<chrono::Utc>>,
    /// Worker processes spread over every GPU the node was given
    /// (`CUDA_VISIBLE_DEVICES`, else Slurm's `SLURM_JOB_GPUS`), each with
    /// the memory budget of the experiment's device, instead of that one
    /// device alone.
    #[arg(long)]
    pub all_gpus: bool,
    /// Where trials store their files (models, predictions): a folder or a
    /// `file://` URL, on storage every machine of the study shares (default:
    /// beside a SQLite study, `<database>.artifacts`).
    #[arg(long, value_name = "PATH")]
    pub artifacts: Option<String>,
    /// Log the study and each trial to this MLflow tracking server
    /// (default: `MLFLOW_TRACKING_URI`, if set); credentials from
    /// `MLFLOW_TRACKING_TOKEN` or `MLFLOW_TRACKING_USERNAME` and
    /// `MLFLOW_TRACKING_PASSWORD`, never printed. Needs hpo's `mlflow`
    /// feature.
    #[arg(long, value_name = "URL")]
    pub mlflow: Option<String>,
    /// How worker processes start when not as this program with its own
    /// arguments (not a flag: an experiment's tests run their workers as the
    /// test binary on a harness entry this way).
    #[arg(skip)]
    pub worker_launch: Option<WorkerLaunch>,
}

impl StudyArgs {
    /// Whether this process is one node of a study that others run too
    /// (`--create`, `--join`): work after the study, such as scoring the
    /// best trial on a test split or saving its model, belongs to one
    /// process after every node has finished, not to each node.
    pub fn is_node(&self) -> bool {
        self.create || self.join
    }
}

/// How worker processes start, for an experiment's tests
/// ([`StudyArgs::worker_launch`]): the program stays this one (the test
/// binary), with other arguments and extra environment variables.
///
/// ```
/// use hpo::cli::{StudyArgs, WorkerLaunch};
/// let mut args = StudyArgs::default();
/// args.worker_launch = Some(WorkerLaunch::test_entry("tests::worker_entry").env("MY_FAULT", "oom"));
/// let launch = args.worker_launch.unwrap();
/// assert_eq!(launch.args[..3], ["tests::worker_entry", "--exact", "--ignored"]);
/// assert_eq!(launch.env, [("MY_FAULT".to_owned(), "oom".to_owned())]);
/// ```
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WorkerLaunch {
    /// The arguments workers start with.
    pub args: Vec<String>,
    /// Environment variables set in the workers only.
    pub env: Vec<(String, String)>,
}

impl WorkerLaunch {
    /// Workers as this test binary running only its ignored test `entry`
    /// (libtest's `entry --exact --ignored --nocapture --test-threads=1`).
    pub fn test_entry(entry: &str) -> Self {
        let args = [
            entry,
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ];
        WorkerLaunch {
            args: args.map(String::from).to_vec(),
            env: Vec::new(),
        }
    }

    /// The same, with `key=value` set in the workers.
    pub fn env(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.env.push((key.into(), value.into()));
        self
    }
}

/// How trials run (`--jobs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Jobs {
    /// Worker processes, as many as the memory admits.
    Auto,
    /// Worker processes, at most this many at once.
    Workers(usize),
    /// One trial at a time in this process.
    InProcess,
}

impl FromStr for Jobs {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim() {
            "auto" => Ok(Jobs::Auto),
            "in-process" => Ok(Jobs::InProcess),
            n => match n.parse::<usize>() {
                Ok(0) => Err("0 worker processes cannot run a trial; give 1 or more, \
                     `auto`, or `in-process`"
                    .into()),
                Ok(n) => Ok(Jobs::Workers(n)),
                Err(_) => Err(format!(
                    "`{n}` is not a number of worker processes; expected `auto`, \
                     a positive number, or `in-process`"
                )),
            },
        }
    }
}

/// `--sampler`: a sampler's name, or its settings.
#[derive(Debug, Clone, PartialEq)]
pub enum SamplerArg {
    /// A name (`tpe`, `gp`, ...): the sampler's defaults, seeded by `--seed`.
    Named(String),
    /// Settings as JSON; seeded by `--seed` unless they give a seed.
    Config(serde_json::Value),
}

/// The samplers `--sampler` knows by name (a grid needs its values: give
/// it as JSON).
pub const SAMPLER_NAMES: [&str; 6] = ["tpe", "gp", "auto", "cmaes", "qmc", "random"];

impl SamplerArg {
    /// The sampler's settings, seeded with `seed` unless they carry one.
    pub fn config(&self, seed: u64) -> Result<SamplerConfig, String> {
        let mut value = match self {
            SamplerArg::Named(name) => {
                let tag = if name == "cmaes" { "cma_es" } else { name };
                serde_json::json!({ "sampler": tag })
            }
            SamplerArg::Config(v) => v.clone(),
        };
        if let Some(fields) = value.as_object_mut() {
            let grid = fields.get("sampler").and_then(|s| s.as_str()) == Some("grid");
            if !grid && !fields.contains_key("seed") {
                fields.insert("seed".into(), seed.into());
            }
        }
        serde_json::from_value(value.clone()).map_err(|e| format!("--sampler: {e} (in {value})"))
    }
}

/// Parses `--sampler`.
pub fn parse_sampler(text: &str) -> Result<SamplerArg, String> {
    let t = text.trim();
    if t.starts_with('{') {
        let value: serde_json::Value =
            serde_json::from_str(t).map_err(|e| format!("not JSON ({e}): `{text}`"))?;
        let arg = SamplerArg::Config(value);
        arg.config(0)?;
        return Ok(arg);
    }
    let name = t.to_ascii_lowercase().replace(['-', '_'], "");
    if SAMPLER_NAMES.contains(&name.as_str()) {
        Ok(SamplerArg::Named(name))
    } else {
        Err(format!(
            "unknown sampler `{text}`; expected one of {} or a JSON object of settings \
             such as {{\"sampler\": \"tpe\", \"n_startup_trials\": 5}}",
            SAMPLER_NAMES.join(", ")
        ))
    }
}

/// Parses `--study-trials`: a positive number.
pub fn parse_study_trials(text: &str) -> Result<usize, String> {
    match text.trim().parse::<usize>() {
        Ok(0) => Err("a study of 0 trials is done before it starts; give 1 or more".into()),
        Ok(n) => Ok(n),
        Err(_) => Err(format!("`{text}` is not a number of trials")),
    }
}

/// Parses `--deadline`: an RFC 3339 time (`2026-12-01T18:00:00Z`,
/// `2026-12-01T19:00:00+01:00`), or a time from now, `+` a number and a unit
/// (`s`, `m`, `h`, `d`: `+90m`, `+12h`).
pub fn parse_deadline(text: &str) -> Result<chrono::DateTime<chrono::Utc>, String> {
    let t = text.trim();
    if let Some(after) = t.strip_prefix('+') {
        let digits = after.trim_end_matches(|c: char| c.is_ascii_alphabetic());
        let unit = &after[digits.len()..];
        let seconds = match unit {
            "s" => 1,
            "m" => 60,
            "h" => 3600,
            "d" => 86_400,
            _ => {
                return Err(format!(
                    "`{text}`: expected `+` a number and a unit s, m, h or d, such as +12h"
                ))
            }
        };
        let n: i64 = digits
            .parse()
            .map_err(|_| format!("`{text}`: `{digits}` is not a whole number"))?;
        let delta = n
            .checked_mul(seconds)
            .and_then(chrono::TimeDelta::try_seconds)
            .ok_or_else(|| format!("`{text}` is too far in the future"))?;
        return chrono::Utc::now()
            .checked_add_signed(delta)
            .ok_or_else(|| format!("`{text}` is too far in the future"));
    }
    chrono::DateTime::parse_from_rfc3339(t)
        .map(|d| d.with_timezone(&chrono::Utc))
        .map_err(|e| {
            format!(
                "`{text}` is not a time ({e}); expected RFC 3339 such as 2026-12-01T18:00:00Z, \
                 or a time from now such as +12h"
            )
        })
}

/// Parses `--enqueue`'s JSON object of parameter values.
pub fn parse_params(text: &str) -> Result<Params, String> {
    let value: serde_json::Value =
        serde_json::from_str(text).map_err(|e| format!("not JSON ({e}): `{text}`"))?;
    let serde_json::Value::Object(fields) = value else {
        return Err(format!(
            "expected a JSON object of parameter values, such as {{\"lr\": 1e-4}}, not `{text}`"
        ));
    };
    fields
        .into_iter()
        .map(|(name, v)| match ParamValue::from_json_value(&v) {
            Some(p) => Ok((name, p)),
            None => Err(format!(
                "`{name}`: {v} is not a parameter value (a number, string, boolean or null)"
            )),
        })
        .collect()
}

/// Parses a size in bytes with [`bytesize`]: a number and a unit, `B`,
/// `KiB`, `MiB`, `GiB`, `TiB` (powers of 1024) or `KB`, `MB`, `GB`, `TB`
/// (powers of 1000); fractions allowed (`1.5GiB`). A bare `G` or `M` is
/// refused as ambiguous (Docker reads `24g` as GiB, SI as GB).
pub fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let unit: String = t
        .trim_start_matches(|c: char| c.is_ascii_digit() || c == '.' || c.is_whitespace())
        .to_owned();
    if matches!(
        unit.to_ascii_lowercase().as_str(),
        "k" | "m" | "g" | "t" | "p"
    ) {
        let n = &t[..t.len() - unit.len()].trim();
        return Err(format!(
            "`{text}` is ambiguous: write {n}{unit}iB (powers of 1024) or {n}{unit}B \
             (powers of 1000), for example 24GiB"
        ));
    }
    let size: bytesize::ByteSize = t.parse().map_err(|_| {
        format!(
            "`{text}` is not a size; expected a number and a unit (B, KiB, MiB, GiB, TiB, \
             KB, MB, GB or TB), such as 24GiB"
        )
    })?;
    match size.as_u64() {
        0 => Err(format!(
            "`{text}` is not a usable memory size: it must be at least 1 byte"
        )),
        bytes => Ok(bytes),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::executor::GIB;
    use clap::Parser;

    #[derive(Parser, Debug)]
    struct Cmd {
        #[command(flatten)]
        study: StudyArgs,
    }

    fn parse(extra: &[&str]) -> Result<StudyArgs, String> {
        Cmd::try_parse_from(["exp"].iter().chain(extra))
            .map(|c| c.study)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn jobs_parse_with_clear_errors() {
        assert_eq!("auto".parse::<Jobs>(), Ok(Jobs::Auto));
        assert_eq!(" 3 ".parse::<Jobs>(), Ok(Jobs::Workers(3)));
        assert_eq!("in-process".parse::<Jobs>(), Ok(Jobs::InProcess));
        let e = parse(&["--jobs", "0"]).unwrap_err();
        assert!(e.contains("0 worker processes cannot run a trial"), "{e}");
        let e = parse(&["--jobs", "many"]).unwrap_err();
        assert!(
            e.contains("`many` is not a number of worker processes"),
            "{e}"
        );
    }

    #[test]
    fn sizes_parse_through_bytesize_with_clear_errors() {
        assert_eq!(parse_size("24GiB"), Ok(24 * GIB));
        assert_eq!(parse_size("1.5 GiB"), Ok(3 * GIB / 2));
        assert_eq!(parse_size("512MiB"), Ok(512 << 20));
        assert_eq!(parse_size("8GB"), Ok(8_000_000_000));
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size(" 24gib "), Ok(24 * GIB));
        for (text, says) in [
            ("24 gigs", "`24 gigs` is not a size"),
            ("GiB", "`GiB` is not a size"),
            ("-1GiB", "is not a size"),
            ("0GiB", "at least 1 byte"),
            (
                "24G",
                "`24G` is ambiguous: write 24GiB (powers of 1024) or 24GB",
            ),
            ("512m", "write 512miB"),
        ] {
            let e = parse_size(text).unwrap_err();
            assert!(e.contains(says), "{text}: {e}");
        }
        let e = parse(&["--memory-budget", "lots"]).unwrap_err();
        assert!(e.contains("`lots` is not a size"), "{e}");
        assert_eq!(
            parse(&["--memory-budget", "24GiB"]).unwrap().memory_budget,
            Some(24 * GIB)
        );
    }

    #[test]
    fn enqueued_parameters_parse_with_clear_errors() {
        assert!(parse_params("[1]").unwrap_err().contains("JSON object"));
        assert!(parse_params("{lr: 1}").unwrap_err().contains("not JSON"));
        assert!(parse_params(r#"{"lr": [1]}"#).unwrap_err().contains("`lr`"));
        let args = parse(&[
            "--enqueue",
            r#"{"lr": 1e-4, "model": "base"}"#,
            "--enqueue",
            "{}",
        ])
        .unwrap();
        assert_eq!(args.enqueue.len(), 2);
        assert_eq!(
            args.enqueue[0],
            vec![
                ("lr".to_owned(), ParamValue::Float(1e-4)),
                (
                    "model".to_owned(),
                    ParamValue::Choice(crate::Choice::Str("base".into()))
                )
            ]
        );
    }

    #[test]
    fn samplers_by_name_or_settings_are_seeded() {
        let args = parse(&["--sampler", "GP", "--seed", "7"]).unwrap();
        let config = args.sampler.unwrap().config(args.seed).unwrap();
        assert!(
            matches!(&config, SamplerConfig::Gp(c) if c.seed == Some(7)),
            "{config:?}"
        );
        for name in SAMPLER_NAMES {
            let arg = parse_sampler(name).unwrap();
            arg.config(1).unwrap().init().unwrap();
        }
        let arg = parse_sampler(r#"{"sampler": "tpe", "n_startup_trials": 5}"#).unwrap();
        let SamplerConfig::Tpe(tpe) = arg.config(3).unwrap() else {
            panic!("a TPE config")
        };
        assert_eq!((tpe.n_startup_trials, tpe.seed), (5, Some(3)));
        let e = parse(&["--sampler", "bayes"]).unwrap_err();
        assert!(e.contains("unknown sampler `bayes`"), "{e}");
        let e = parse(&["--sampler", r#"{"sampler": "tpe", "n_startup": 5}"#]).unwrap_err();
        assert!(e.contains("n_startup"), "{e}");
    }

    #[test]
    fn the_scheduler_flags_parse_with_clear_errors() {
        let args = parse(&["--join"]).unwrap();
        assert!(args.join && !args.create && args.study_trials.is_none());
        let args = parse(&["--create", "--study-trials", "200", "--deadline", "+2h"]).unwrap();
        assert!(args.create);
        assert_eq!(args.study_trials, Some(200));
        let left = args.deadline.unwrap() - chrono::Utc::now();
        assert!(
            left > chrono::TimeDelta::minutes(119) && left <= chrono::TimeDelta::hours(2),
            "{left}"
        );
        assert_eq!(
            parse_deadline("2026-12-01T19:00:00+01:00").unwrap(),
            "2026-12-01T18:00:00Z"
                .parse::<chrono::DateTime<chrono::Utc>>()
                .unwrap()
        );
        for (text, says) in [
            ("tomorrow", "`tomorrow` is not a time"),
            ("+12", "a unit s, m, h or d"),
            ("+1.5h", "`1.5` is not a whole number"),
            ("+99999999999999d", "too far in the future"),
        ] {
            let e = parse_deadline(text).unwrap_err();
            assert!(e.contains(says), "{text}: {e}");
        }
        let e = parse(&["--study-trials", "0"]).unwrap_err();
        assert!(e.contains("0 trials is done before it starts"), "{e}");
        // A joining node takes the study's budget; it does not set one.
        let e = parse(&["--join", "--study-trials", "5"]).unwrap_err();
        assert!(e.contains("--study-trials"), "{e}");
        let e = parse(&["--join", "--create"]).unwrap_err();
        assert!(e.contains("--create"), "{e}");
    }

    #[test]
    fn defaults_are_left_to_the_experiment() {
        let args = parse(&[]).unwrap();
        assert_eq!(
            args,
            StudyArgs {
                seed: 42,
                ..StudyArgs::default()
            }
        );
    }
}
