//! Python servers the tracking and dashboard tests start from the project's
//! venv (`.ci/python-venv.sh`): MLflow's tracking server and
//! optuna-dashboard, each on a free port of 127.0.0.1, ended with the test
//! (or with the test process, by a watcher, if it dies first).

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Starts the server given as arguments in its own session and ends the
/// whole session when told (SIGTERM) or when the test process is gone.
const WATCHER: &str = r#"
import os, signal, subprocess, sys, time
parent = os.getppid()
log = open(sys.argv[1], "ab")
p = subprocess.Popen(sys.argv[2:], start_new_session=True, stdout=log, stderr=log)
def stop(*_):
    try:
        os.killpg(p.pid, signal.SIGTERM)
        p.wait(15)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    sys.exit(0)
signal.signal(signal.SIGTERM, stop)
while p.poll() is None and os.getppid() == parent:
    time.sleep(0.3)
stop()
"#;

/// The venv's Python if it can import `module`; otherwise `None` with a
/// message, or a failure when `require` (an `HPO_REQUIRE_*` variable) is 1.
pub fn python_with(module: &str, require: &str) -> Option<PathBuf> {
    let candidate = std::env::var_os("HPO_PYTHON")
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/hpo-venv/bin/python"))
        })?;
    let ok = Command::new(&candidate)
        .args(["-c", &format!("import {module}")])
        .output()
        .is_ok_and(|o| o.status.success());
    if ok {
        return Some(candidate);
    }
    let msg = format!(
        "skipped: no Python with {module} at {}; run `.ci/python-venv.sh` or set HPO_PYTHON",
        candidate.display()
    );
    assert!(
        std::env::var(require).as_deref() != Ok("1"),
        "{msg} ({require}=1)"
    );
    eprintln!("{msg}");
    None
}

/// A port nobody listens on now.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A temporary folder for one test, fresh.
pub fn temp_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("hpo-it-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A server process (through [`WATCHER`]) and where it answers.
pub struct Server {
    child: Option<Child>,
    python: PathBuf,
    args: Vec<String>,
    env: Vec<(String, String)>,
    log: PathBuf,
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    health: String,
}

impl Server {
    /// Starts `python -m args...` and waits until `health` (a path) answers.
    pub fn start(
        python: &Path,
        args: Vec<String>,
        port: u16,
        health: &str,
        log: PathBuf,
    ) -> Server {
        let mut s = Server {
            child: None,
            python: python.to_owned(),
            args,
            env: Vec::new(),
            log,
            url: format!("http://127.0.0.1:{port}"),
            health: health.to_owned(),
        };
        s.restart();
        s
    }

    /// MLflow's tracking server with a SQLite backend in `dir`.
    #[cfg(feature = "mlflow")]
    pub fn mlflow(python: &Path, dir: &Path) -> Server {
        let port = free_port();
        let args = [
            "-m",
            "mlflow",
            "server",
            "--host",
            "127.0.0.1",
            "--port",
            &port.to_string(),
            "--workers",
            "1",
            "--backend-store-uri",
            &format!("sqlite:///{}", dir.join("mlflow.db").display()),
            "--default-artifact-root",
            &dir.join("artifacts").display().to_string(),
        ]
        .map(String::from)
        .to_vec();
        let mut s = Server {
            child: None,
            python: python.to_owned(),
            args,
            // Without its job runner and task queues (seven processes the
            // tracking API does not need): it starts sooner.
            env: vec![("MLFLOW_SERVER_ENABLE_JOB_EXECUTION".into(), "false".into())],
            log: dir.join("mlflow.log"),
            url: format!("http://127.0.0.1:{port}"),
            health: "/health".into(),
        };
        s.restart();
        s
    }

    /// Starts the server again (after [`Server::stop`]) on the same port.
    pub fn restart(&mut self) {
        let child = Command::new(&self.python)
            .arg("-c")
            .arg(WATCHER)
            .arg(&self.log)
            .arg(&self.python)
            .args(&self.args)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .spawn()
            .unwrap();
        self.child = Some(child);
        let t0 = Instant::now();
        let url = format!("{}{}", self.url, self.health);
        // MLflow's first start migrates its database: a minute on a busy
        // 2-core machine.
        while t0.elapsed() < Duration::from_secs(300) {
            if ureq::get(&url).call().is_ok() {
                eprintln!("{} up after {:.1?}", self.url, t0.elapsed());
                return;
            }
            if let Some(status) = self.child.as_mut().unwrap().try_wait().unwrap() {
                panic!(
                    "the server exited ({status}):\n{}",
                    std::fs::read_to_string(&self.log).unwrap_or_default()
                );
            }
            std::thread::sleep(Duration::from_millis(250));
        }
        panic!(
            "{url} did not answer in 300 s:\n{}",
            std::fs::read_to_string(&self.log).unwrap_or_default()
        );
    }

    /// Ends the server (its whole process group) and waits for it.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = Command::new("kill").arg(child.id().to_string()).status();
            let _ = child.wait();
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Headless Chromium: `HPO_CHROMIUM`, or one on the PATH; `None` with a
/// message, or a failure under `HPO_REQUIRE_CHROMIUM=1` (CI installs it
/// with `.ci/chromium.sh`).
pub fn chromium() -> Option<String> {
    let found = std::env::var("HPO_CHROMIUM").ok().or_else(|| {
        ["chromium", "chromium-browser", "google-chrome"]
            .into_iter()
            .find(|c| {
                Command::new(c)
                    .arg("--version")
                    .output()
                    .is_ok_and(|o| o.status.success())
            })
            .map(str::to_owned)
    });
    if found.is_none() {
        assert!(
            std::env::var("HPO_REQUIRE_CHROMIUM").as_deref() != Ok("1"),
            "HPO_REQUIRE_CHROMIUM=1 but no chromium found (run .ci/chromium.sh)"
        );
        eprintln!("skipped: chromium not installed (run .ci/chromium.sh)");
    }
    found
}

/// Opens `url` in headless Chromium in a window of `size` once its scripts
/// had `budget_ms` of virtual time: writes a screenshot to `png` and
/// returns the page's DOM.
pub fn browse(chrome: &str, url: &str, png: &Path, size: (u32, u32), budget_ms: u32) -> String {
    let window = format!("--window-size={},{}", size.0, size.1);
    let common = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--hide-scrollbars",
        &window,
    ];
    let budget = format!("--virtual-time-budget={budget_ms}");
    let shot = Command::new(chrome)
        .args(common)
        .arg(&budget)
        .arg(format!("--screenshot={}", png.display()))
        .arg(url)
        .output()
        .unwrap();
    assert!(
        png.exists(),
        "no screenshot of {url}: {}",
        String::from_utf8_lossy(&shot.stderr)
    );
    let dom = Command::new(chrome)
        .args(common)
        .arg(&budget)
        .arg("--dump-dom")
        .arg(url)
        .output()
        .unwrap();
    String::from_utf8_lossy(&dom.stdout).into_owned()
}
