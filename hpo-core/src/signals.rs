//! Ctrl-C and the scheduler's SIGTERM: a study that stops cleanly.
//!
//! A terminal's Ctrl-C sends SIGINT to every process of the foreground
//! process group; a cluster scheduler (Slurm's preemption, `scancel`, a time
//! limit with `--signal=B:TERM@N`) sends SIGTERM to every process of the job
//! step and SIGKILL after its `KillWait` (30 s by default). Left to their
//! default action both kill the study where it stands, its trials RUNNING
//! until a later run reaps them as stale. This module turns them into a
//! clean stop, with one policy for both:
//!
//! * **SIGINT** ([`StopSignal::Interrupt`], exit status 130): nothing new
//!   starts, the running trials are stopped now, each is failed as
//!   [`FailureKind::Interrupted`](crate::FailureKind::Interrupted) together
//!   with its WAITING retry copy in one transaction (so the study's next run,
//!   here or on another node, runs the configuration again), and the study's
//!   `optimize_with` returns [`Error::Interrupted`](crate::Error::Interrupted).
//!   A second SIGINT ends the process at once, from the handler.
//! * **SIGTERM** ([`StopSignal::Terminate`], exit status 143): nothing new
//!   starts, and the running trials get a grace period to finish
//!   ([`DEFAULT_TERM_GRACE`], well inside Slurm's `KillWait`; set with
//!   [`Optimize::term_grace`](crate::Optimize::term_grace)); what is still
//!   running then is stopped as after SIGINT. SIGKILL cannot be caught:
//!   heartbeats reap those trials, as before.
//!
//! The handlers only store to atomics; storage is written by the study's
//! own loops (the process executor's coordinator, or the thread that watches
//! an in-process study), never from signal context. The state is never
//! reset: once a signal has arrived every study loop of the process stops,
//! and the process is expected to exit with [`StopSignal::exit_code`].
//!
//! # Who installs the handlers
//!
//! A library does not take over a process's signals behind its user's back:
//! nothing here is installed unless [`install`] is called (idempotent). The
//! `hpo::cli` layer calls it, so every experiment built on it stops cleanly;
//! a program that drives studies itself calls it first in `main`, or leaves
//! it out and keeps the signals' default actions (or stops its studies with
//! [`Study::stop`](crate::Study::stop) from its own handler). Without
//! [`install`] the loops behave as before: [`state`] stays
//! [`State::Quiet`].
//!
//! # Worker processes
//!
//! The executor's workers leave the decision to their coordinator: they run
//! in a process group of their own (a terminal's SIGINT does not reach them)
//! and, because a scheduler signals every process of the step whatever its
//! group, a worker ignores SIGINT and SIGTERM sent by anyone but its
//! coordinator. The coordinator's own SIGTERM (trial timeout, or stopping the
//! study) ends the worker as SIGTERM always did.
//!
//! # In-process trials
//!
//! An objective running on the study's threads cannot be stopped from
//! outside. When the running trials must stop, a watcher thread fails them
//! (with their retry copies) and, if their objectives have not returned,
//! ends the process with the signal's exit status after running the hooks of
//! [`Optimize::before_exit`](crate::Optimize::before_exit): the default
//! action of the signal would have ended it too, only with the trials left
//! RUNNING.

// sigaction, clock_gettime, signal, raise and _exit: libc is the only way to
// install a signal handler and to do what a handler may do.
#![allow(unsafe_code)]

use crate::error::Result;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// How long running trials may go on after SIGTERM before they are failed
/// and re-enqueued, by default: well inside Slurm's default `KillWait` of
/// 30 s, leaving time to stop the workers and write the trials.
pub const DEFAULT_TERM_GRACE: Duration = Duration::from_secs(20);

/// The signal that stopped a study.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StopSignal {
    /// SIGINT: a terminal's Ctrl-C. Running trials stop now.
    Interrupt,
    /// SIGTERM: a scheduler's preemption, `scancel` or time limit. Running
    /// trials get the grace period first.
    Terminate,
}

impl StopSignal {
    /// The exit status of a process ended by this signal, as a shell reports
    /// it: 128 + the signal's number (130 for SIGINT, 143 for SIGTERM).
    pub fn exit_code(self) -> i32 {
        match self {
            StopSignal::Interrupt => 130,
            StopSignal::Terminate => 143,
        }
    }

    /// `SIGINT` or `SIGTERM`.
    pub fn name(self) -> &'static str {
        match self {
            StopSignal::Interrupt => "SIGINT",
            StopSignal::Terminate => "SIGTERM",
        }
    }
}

impl fmt::Display for StopSignal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What the signals asked of this process so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// No SIGINT or SIGTERM has arrived (or no handler is installed).
    Quiet,
    /// SIGTERM arrived at `at` (the first one; a repeated SIGTERM does not
    /// shorten the grace): nothing new starts, and the running trials have
    /// the grace period to finish.
    Terminated {
        /// When the first SIGTERM arrived.
        at: Instant,
    },
    /// SIGINT arrived (after a SIGTERM too: it wins): nothing new starts,
    /// and the running trials are stopped now.
    Interrupted,
}

impl State {
    /// The signal that stops the study, if one arrived.
    pub fn signal(self) -> Option<StopSignal> {
        match self {
            State::Quiet => None,
            State::Terminated { .. } => Some(StopSignal::Terminate),
            State::Interrupted => Some(StopSignal::Interrupt),
        }
    }

    /// Whether new trials may start.
    pub fn admits(self) -> bool {
        self == State::Quiet
    }

    /// Whether the running trials must be stopped now: after SIGINT at once,
    /// after SIGTERM once `grace` has passed since it arrived.
    pub fn stops_running(self, grace: Duration) -> bool {
        match self {
            State::Quiet => false,
            State::Terminated { at } => at.elapsed() >= grace,
            State::Interrupted => true,
        }
    }
}

/// The state machine the handlers drive, with nothing but atomics so that a
/// handler may touch it.
struct Flags {
    /// SIGINTs received.
    interrupts: AtomicU32,
    /// When the first SIGTERM arrived, in nanoseconds of [`monotonic_nanos`]
    /// plus one; 0 while none has.
    terminated: AtomicU64,
}

impl Flags {
    const fn new() -> Self {
        Flags {
            interrupts: AtomicU32::new(0),
            terminated: AtomicU64::new(0),
        }
    }

    /// Records a SIGINT; true when it is a repeat, after which the process
    /// ends at once.
    fn interrupt(&self) -> bool {
        self.interrupts.fetch_add(1, Ordering::SeqCst) > 0
    }

    /// Records a SIGTERM that arrived at `now` (monotonic nanoseconds); a
    /// later one keeps the first one's time.
    fn terminate(&self, now: u64) {
        let _ = self.terminated.compare_exchange(
            0,
            now.saturating_add(1),
            Ordering::SeqCst,
            Ordering::SeqCst,
        );
    }

    /// The state at `now` (monotonic nanoseconds).
    fn state(&self, now: u64) -> State {
        if self.interrupts.load(Ordering::SeqCst) > 0 {
            return State::Interrupted;
        }
        match self.terminated.load(Ordering::SeqCst) {
            0 => State::Quiet,
            stamp => {
                let ago = Duration::from_nanos(now.saturating_sub(stamp - 1));
                let at = Instant::now().checked_sub(ago).unwrap_or_else(Instant::now);
                State::Terminated { at }
            }
        }
    }
}

static FLAGS: Flags = Flags::new();
/// Whether [`install`] installed the study's handlers.
static INSTALLED: AtomicBool = AtomicBool::new(false);
/// In a worker process, its coordinator's pid (0: not a worker).
static COORDINATOR: AtomicI32 = AtomicI32::new(0);
/// Signals a worker received from someone other than its coordinator.
static IGNORED: AtomicU32 = AtomicU32::new(0);

/// Installs the SIGINT and SIGTERM handlers of this module, once per process
/// (later calls do nothing). In a worker process the executor started, the
/// worker's own handlers replace them when it starts its trial: workers
/// leave signals to their coordinator. Errors when the operating system
/// refuses a handler. Does nothing where there are no Unix signals.
pub fn install() -> Result<()> {
    #[cfg(unix)]
    {
        if INSTALLED.swap(true, Ordering::SeqCst) {
            return Ok(());
        }
        for sig in [libc::SIGINT, libc::SIGTERM] {
            if let Err(e) = sys::set_handler(sig, sys::Handler::Study) {
                INSTALLED.store(false, Ordering::SeqCst);
                return Err(e);
            }
        }
    }
    Ok(())
}

/// Whether [`install`] has installed the handlers in this process.
pub fn installed() -> bool {
    INSTALLED.load(Ordering::SeqCst)
}

/// What the signals asked of this process so far ([`State::Quiet`] unless
/// [`install`] was called and a signal arrived).
pub fn state() -> State {
    FLAGS.state(monotonic_nanos())
}

/// In a worker process: SIGINT and SIGTERM from anyone but `coordinator`
/// are noted and ignored; SIGTERM from `coordinator` ends the worker as its
/// default action does.
pub(crate) fn install_for_worker(coordinator: u32) -> Result<()> {
    #[cfg(unix)]
    {
        let pid = i32::try_from(coordinator).unwrap_or(0);
        COORDINATOR.store(pid, Ordering::SeqCst);
        for sig in [libc::SIGINT, libc::SIGTERM] {
            sys::set_handler(sig, sys::Handler::Worker)?;
        }
    }
    #[cfg(not(unix))]
    let _ = coordinator;
    Ok(())
}

/// How many SIGINTs and SIGTERMs this worker process received from anyone
/// but its coordinator, and ignored.
pub(crate) fn ignored_in_worker() -> u32 {
    IGNORED.load(Ordering::SeqCst)
}

/// Nanoseconds of a monotonic clock (async-signal-safe on Unix:
/// `clock_gettime` is on POSIX's list).
fn monotonic_nanos() -> u64 {
    #[cfg(unix)]
    {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `ts` is a valid, writable timespec.
        unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
        let secs = u64::try_from(ts.tv_sec).unwrap_or(0);
        let nanos = u64::try_from(ts.tv_nsec).unwrap_or(0);
        secs.saturating_mul(1_000_000_000).saturating_add(nanos)
    }
    #[cfg(not(unix))]
    {
        static START: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
        let elapsed = START.get_or_init(Instant::now).elapsed();
        u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX)
    }
}

#[cfg(unix)]
mod sys {
    use super::{monotonic_nanos, StopSignal, COORDINATOR, FLAGS, IGNORED};
    use crate::error::{Error, Result};
    use std::sync::atomic::Ordering;

    /// Which handler a signal gets.
    pub(super) enum Handler {
        /// The study's: record the signal (a second SIGINT exits).
        Study,
        /// A worker's: act on the coordinator's SIGTERM only.
        Worker,
    }

    pub(super) fn set_handler(sig: libc::c_int, handler: Handler) -> Result<()> {
        let (action, flags) = match handler {
            Handler::Study => (on_study_signal as *const () as libc::sighandler_t, 0),
            Handler::Worker => (
                on_worker_signal as *const () as libc::sighandler_t,
                libc::SA_SIGINFO,
            ),
        };
        // SAFETY: a zeroed sigaction is a valid value (empty mask, no
        // flags); the handlers only touch atomics and async-signal-safe
        // functions.
        let rc = unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = action;
            sa.sa_flags = flags | libc::SA_RESTART;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, std::ptr::null_mut())
        };
        if rc == 0 {
            Ok(())
        } else {
            let name = if sig == libc::SIGINT {
                "SIGINT"
            } else {
                "SIGTERM"
            };
            Err(Error::Signals {
                message: format!("cannot install the {name} handler"),
                source: std::io::Error::last_os_error(),
            })
        }
    }

    extern "C" fn on_study_signal(sig: libc::c_int) {
        if sig == libc::SIGINT {
            if FLAGS.interrupt() {
                // SAFETY: `_exit` is async-signal-safe; a second Ctrl-C
                // means "now", without the cleanup the first one started.
                unsafe { libc::_exit(StopSignal::Interrupt.exit_code()) };
            }
        } else if sig == libc::SIGTERM {
            FLAGS.terminate(monotonic_nanos());
        }
    }

    extern "C" fn on_worker_signal(
        sig: libc::c_int,
        info: *mut libc::siginfo_t,
        _context: *mut libc::c_void,
    ) {
        let coordinator = COORDINATOR.load(Ordering::SeqCst);
        if sig == libc::SIGTERM && coordinator != 0 && sender(info) == coordinator {
            // SAFETY: `signal` and `raise` are async-signal-safe. SIGTERM is
            // blocked while this handler runs, so the raised one is
            // delivered, with its default action, when the handler returns:
            // the worker ends "killed by SIGTERM", as before.
            unsafe {
                libc::signal(libc::SIGTERM, libc::SIG_DFL);
                libc::raise(libc::SIGTERM);
            }
            return;
        }
        IGNORED.fetch_add(1, Ordering::SeqCst);
    }

    /// The pid of the process that sent a signal (0 for the kernel, a
    /// terminal, or where the platform does not say).
    fn sender(info: *const libc::siginfo_t) -> libc::pid_t {
        if info.is_null() {
            return 0;
        }
        #[cfg(any(target_os = "linux", target_os = "android"))]
        {
            // SAFETY: the kernel passes a valid siginfo with SA_SIGINFO; for
            // SIGTERM and SIGINT sent by kill(2) it holds the sender's pid.
            unsafe { (*info).si_pid() }
        }
        #[cfg(any(target_os = "macos", target_os = "ios"))]
        {
            // SAFETY: as above.
            unsafe { (*info).si_pid }
        }
        #[cfg(not(any(
            target_os = "linux",
            target_os = "android",
            target_os = "macos",
            target_os = "ios"
        )))]
        {
            0
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SEC: u64 = 1_000_000_000;

    #[test]
    fn quiet_until_a_signal_arrives() {
        let f = Flags::new();
        assert_eq!(f.state(5 * SEC), State::Quiet);
        assert!(f.state(5 * SEC).admits());
        assert_eq!(f.state(5 * SEC).signal(), None);
        assert!(!f.state(5 * SEC).stops_running(Duration::ZERO));
    }

    #[test]
    fn sigterm_stops_admitting_and_keeps_its_first_arrival_for_the_grace() {
        let f = Flags::new();
        f.terminate(10 * SEC);
        // A second SIGTERM 5 s later does not restart the grace.
        f.terminate(15 * SEC);
        let s = f.state(18 * SEC);
        assert_eq!(s.signal(), Some(StopSignal::Terminate));
        assert!(!s.admits());
        let State::Terminated { at } = s else {
            panic!("{s:?}")
        };
        let ago = at.elapsed();
        assert!(
            ago >= Duration::from_secs(8) && ago < Duration::from_secs(9),
            "{ago:?}"
        );
        assert!(s.stops_running(Duration::from_secs(7)));
        assert!(!s.stops_running(Duration::from_secs(20)));
    }

    #[test]
    fn sigint_stops_now_and_a_second_one_is_a_repeat() {
        let f = Flags::new();
        f.terminate(SEC);
        assert!(!f.interrupt(), "the first SIGINT is handled by the loops");
        let s = f.state(2 * SEC);
        assert_eq!(s, State::Interrupted, "SIGINT wins over SIGTERM");
        assert!(s.stops_running(Duration::from_secs(3600)));
        assert!(f.interrupt(), "the second one ends the process");
        // A SIGTERM after SIGINT changes nothing.
        f.terminate(3 * SEC);
        assert_eq!(f.state(4 * SEC), State::Interrupted);
    }

    #[test]
    fn exit_codes_are_the_shells() {
        assert_eq!(StopSignal::Interrupt.exit_code(), 130);
        assert_eq!(StopSignal::Terminate.exit_code(), 143);
        assert_eq!(StopSignal::Terminate.to_string(), "SIGTERM");
    }

    #[test]
    fn the_monotonic_clock_moves_forward() {
        let a = monotonic_nanos();
        std::thread::sleep(Duration::from_millis(2));
        assert!(monotonic_nanos() > a);
    }
}
