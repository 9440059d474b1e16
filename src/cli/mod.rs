//! A study from the command line (feature `cli`): the flags every study has
//! ([`StudyArgs`], flattened into an experiment's own clap parser) and one
//! call that runs it ([`StudyRunner::run`]): the study opened or resumed,
//! `--enqueue`d configurations checked against the space, trials in this
//! process or in worker processes admitted by memory, a line per trial with
//! parameters to 4 significant digits, the progress bar, and the
//! [`Summary`].

mod args;
mod runner;
mod summary;

pub use self::args::{
    parse_deadline, parse_params, parse_sampler, parse_size, parse_study_trials, Jobs, Params,
    SamplerArg, StudyArgs, WorkerLaunch, SAMPLER_NAMES,
};
pub use self::runner::{
    check_enqueued, cpu_cores, cpu_share, trial_line, Finished, StudyRunner, SPACE_ATTR,
};
pub use self::summary::{state_label, Peak, Summary, PROCESS_PEAK_RSS_KEY};
