//! MLflow's REST API 2.0, the few calls a study needs, over a blocking
//! client, each retried until a deadline.

use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// Why a call failed, in words that never hold a credential.
#[derive(Debug)]
pub(crate) struct Failure {
    /// Whether trying again may help (a transport error, 429, 5xx).
    pub(crate) retryable: bool,
    /// MLflow's `error_code`, when it sent one.
    pub(crate) code: Option<String>,
    pub(crate) message: String,
}

/// A tracking server: its API root, and the `Authorization` header.
pub(crate) struct Client {
    agent: ureq::Agent,
    /// `http://host:port/prefix` with no credentials in it.
    base: String,
    auth: Option<String>,
}

impl Client {
    pub(crate) fn new(base: String, auth: Option<String>) -> Client {
        let agent = ureq::AgentBuilder::new()
            .timeout_connect(Duration::from_secs(5))
            .timeout(Duration::from_secs(30))
            .build();
        Client { agent, base, auth }
    }

    /// One call, no retry.
    fn call_once(&self, method: &str, path: &str, body: &Value) -> Result<Value, Failure> {
        let url = format!("{}/api/2.0/mlflow/{path}", self.base);
        let mut req = self.agent.request(method, &url);
        if let Some(a) = &self.auth {
            req = req.set("Authorization", a);
        }
        let sent = if method == "GET" {
            if let Some(map) = body.as_object() {
                for (k, v) in map {
                    let v = v.as_str().map_or_else(|| v.to_string(), str::to_owned);
                    req = req.query(k, &v);
                }
            }
            req.call()
        } else {
            req.send_json(body)
        };
        match sent {
            Ok(resp) => Ok(resp.into_json::<Value>().unwrap_or(Value::Null)),
            Err(ureq::Error::Status(status, resp)) => {
                let text = resp.into_string().unwrap_or_default();
                let parsed: Option<Value> = serde_json::from_str(&text).ok();
                let code = parsed
                    .as_ref()
                    .and_then(|v| v.get("error_code"))
                    .and_then(Value::as_str)
                    .map(str::to_owned);
                let detail = parsed
                    .as_ref()
                    .and_then(|v| v.get("message"))
                    .and_then(Value::as_str)
                    .map(str::to_owned)
                    .unwrap_or_else(|| text.chars().take(200).collect());
                Err(Failure {
                    retryable: status == 429 || status >= 500,
                    code,
                    message: format!("{path}: HTTP {status}: {detail}"),
                })
            }
            // The transport error's own text would repeat the URL; its kind
            // says what happened without it.
            Err(ureq::Error::Transport(t)) => Err(Failure {
                retryable: true,
                code: None,
                message: format!("{path}: {}", t.kind()),
            }),
        }
    }

    /// `call_once` retried with backoff (100 ms doubling to 5 s) while it
    /// fails retryably and `deadline` has not passed.
    pub(crate) fn call(
        &self,
        method: &str,
        path: &str,
        body: &Value,
        deadline: Instant,
    ) -> Result<Value, Failure> {
        let mut wait = Duration::from_millis(100);
        loop {
            match self.call_once(method, path, body) {
                Err(f) if f.retryable && Instant::now() + wait < deadline => {
                    tracing::debug!("MLflow: {}; retrying in {wait:?}", f.message);
                    std::thread::sleep(wait);
                    wait = (wait * 2).min(Duration::from_secs(5));
                }
                other => return other,
            }
        }
    }

    /// The id of the experiment `name`, created if missing.
    pub(crate) fn experiment(&self, name: &str, deadline: Instant) -> Result<String, Failure> {
        let found = self.call(
            "GET",
            "experiments/get-by-name",
            &json!({ "experiment_name": name }),
            deadline,
        );
        match found {
            Ok(v) => return id_in(&v, "/experiment/experiment_id"),
            Err(f) if f.code.as_deref() == Some("RESOURCE_DOES_NOT_EXIST") => {}
            Err(f) => return Err(f),
        }
        // Marked as model training, so that MLflow 3's UI opens it on its
        // runs rather than on its GenAI traces.
        let tags = json!([{ "key": "mlflow.experimentKind", "value": "custom_model_development" }]);
        match self.call(
            "POST",
            "experiments/create",
            &json!({ "name": name, "tags": tags }),
            deadline,
        ) {
            Ok(v) => id_in(&v, "/experiment_id"),
            // Created by another process meanwhile.
            Err(f) if f.code.as_deref() == Some("RESOURCE_ALREADY_EXISTS") => {
                let v = self.call(
                    "GET",
                    "experiments/get-by-name",
                    &json!({ "experiment_name": name }),
                    deadline,
                )?;
                id_in(&v, "/experiment/experiment_id")
            }
            Err(f) => Err(f),
        }
    }

    /// Creates a run; returns its id.
    pub(crate) fn create_run(
        &self,
        experiment_id: &str,
        name: &str,
        start_ms: i64,
        tags: &[(String, String)],
        deadline: Instant,
    ) -> Result<String, Failure> {
        let tags: Vec<Value> = tags
            .iter()
            .map(|(k, v)| json!({ "key": k, "value": v }))
            .collect();
        let v = self.call(
            "POST",
            "runs/create",
            &json!({
                "experiment_id": experiment_id,
                "run_name": name,
                "start_time": start_ms,
                "tags": tags,
            }),
            deadline,
        )?;
        id_in(&v, "/run/info/run_id")
    }

    /// Whether the run exists (and is not deleted).
    pub(crate) fn run_exists(&self, run_id: &str, deadline: Instant) -> Result<bool, Failure> {
        match self.call("GET", "runs/get", &json!({ "run_id": run_id }), deadline) {
            Ok(v) => Ok(v
                .pointer("/run/info/lifecycle_stage")
                .and_then(Value::as_str)
                != Some("deleted")),
            Err(f) if f.code.as_deref() == Some("RESOURCE_DOES_NOT_EXIST") => Ok(false),
            Err(f) => Err(f),
        }
    }

    pub(crate) fn delete_run(&self, run_id: &str, deadline: Instant) -> Result<(), Failure> {
        self.call(
            "POST",
            "runs/delete",
            &json!({ "run_id": run_id }),
            deadline,
        )
        .map(drop)
    }

    /// Logs a batch (at most [`BATCH`] entries, params at most 100).
    pub(crate) fn log_batch(
        &self,
        run_id: &str,
        batch: &Batch,
        deadline: Instant,
    ) -> Result<(), Failure> {
        let metrics: Vec<Value> = batch
            .metrics
            .iter()
            .map(|m| json!({ "key": m.key, "value": m.value, "timestamp": m.timestamp, "step": m.step }))
            .collect();
        let params: Vec<Value> = batch
            .params
            .iter()
            .map(|(k, v)| json!({ "key": k, "value": v }))
            .collect();
        let tags: Vec<Value> = batch
            .tags
            .iter()
            .map(|(k, v)| json!({ "key": k, "value": v }))
            .collect();
        self.call(
            "POST",
            "runs/log-batch",
            &json!({ "run_id": run_id, "metrics": metrics, "params": params, "tags": tags }),
            deadline,
        )
        .map(drop)
    }

    /// Sets a run's status (`RUNNING`, `FINISHED`, `FAILED`, `KILLED`) and end time.
    pub(crate) fn update_run(
        &self,
        run_id: &str,
        status: &str,
        end_ms: Option<i64>,
        deadline: Instant,
    ) -> Result<(), Failure> {
        let mut body = json!({ "run_id": run_id, "status": status });
        if let Some(end) = end_ms {
            body["end_time"] = Value::from(end);
        }
        self.call("POST", "runs/update", &body, deadline).map(drop)
    }
}

/// At most this many entries per `log-batch` call (MLflow allows 1000 in
/// all, of which at most 100 params and 100 tags).
pub(crate) const BATCH: usize = 1000;

/// A metric point.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Metric {
    pub(crate) key: String,
    pub(crate) value: f64,
    pub(crate) timestamp: i64,
    pub(crate) step: u64,
}

/// What one `log-batch` call sends.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Batch {
    pub(crate) metrics: Vec<Metric>,
    pub(crate) params: Vec<(String, String)>,
    pub(crate) tags: Vec<(String, String)>,
}

impl Batch {
    /// This batch cut into batches within MLflow's limits.
    pub(crate) fn split(self) -> Vec<Batch> {
        let mut out = Vec::new();
        let mut params = self.params.into_iter().peekable();
        let mut tags = self.tags.into_iter().peekable();
        let mut metrics = self.metrics.into_iter().peekable();
        while params.peek().is_some() || tags.peek().is_some() || metrics.peek().is_some() {
            let mut b = Batch::default();
            b.params.extend(params.by_ref().take(100));
            b.tags.extend(tags.by_ref().take(100));
            let room = BATCH - b.params.len() - b.tags.len();
            b.metrics.extend(metrics.by_ref().take(room));
            out.push(b);
        }
        out
    }
}

fn id_in(v: &Value, pointer: &str) -> Result<String, Failure> {
    v.pointer(pointer)
        .and_then(Value::as_str)
        .map(str::to_owned)
        .ok_or_else(|| Failure {
            retryable: false,
            code: None,
            message: format!("MLflow's answer has no `{pointer}`: {v}"),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_stay_within_mlflows_limits() {
        let big = Batch {
            metrics: (0..2500)
                .map(|i| Metric {
                    key: "m".into(),
                    value: i as f64,
                    timestamp: 0,
                    step: i,
                })
                .collect(),
            params: (0..150).map(|i| (format!("p{i}"), "v".into())).collect(),
            tags: (0..5).map(|i| (format!("t{i}"), "v".into())).collect(),
        };
        let parts = big.clone().split();
        for p in &parts {
            assert!(p.params.len() <= 100 && p.tags.len() <= 100, "{p:?}");
            assert!(p.metrics.len() + p.params.len() + p.tags.len() <= BATCH);
        }
        let metrics: Vec<_> = parts.iter().flat_map(|p| p.metrics.clone()).collect();
        assert_eq!(metrics, big.metrics, "every point, in order");
        assert_eq!(parts.iter().map(|p| p.params.len()).sum::<usize>(), 150);
        assert_eq!(parts.len(), 3);
        assert!(Batch::default().split().is_empty());
    }
}
