//! [`Storage`] for [`PostgresStorage`]: each method one statement, one
//! multi-statement request or one transaction.

use super::conn::{id32, Inner, OpResult};
use super::queries::{
    insert_trial, load, load_one, not_writable, set_system_attrs, trial_row, TRIAL_COLUMNS,
};
use super::schema::LOCK_CLASS;
use super::PostgresStorage;
use crate::direction::Direction;
use crate::distribution::Distribution;
use crate::error::{Error, Result};
use crate::storage::codec;
use crate::storage::{Storage, StudySummary};
use crate::trial::{FrozenTrial, TrialSnapshot, TrialState};
use postgres::Row;
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

fn study_not_found(study_id: u64) -> Error {
    Error::StudyIdNotFound(study_id)
}

/// A study summary from `study_id, study_name, directions[]`.
fn summary(r: &Row) -> OpResult<StudySummary> {
    let id: i32 = r.try_get(0)?;
    let name: String = r.try_get(1)?;
    let dirs: Vec<String> = r.try_get(2)?;
    Ok(StudySummary {
        id: id as u64,
        name,
        directions: dirs
            .iter()
            .map(|d| d.parse())
            .collect::<Result<Vec<Direction>>>()?,
    })
}

const SUMMARY_SQL: &str = "SELECT s.study_id, s.study_name::text, \
     COALESCE(array_agg(d.direction::text ORDER BY d.objective) FILTER (WHERE d.direction IS NOT NULL), '{}') \
     FROM studies s LEFT JOIN study_directions d ON d.study_id = s.study_id";

impl Inner {
    fn study_exists(&mut self, study_id: u64) -> OpResult<bool> {
        let sid = id32(study_id)?;
        Ok(self
            .db()
            .query_opt("SELECT 1 FROM studies WHERE study_id = $1", &[&sid])?
            .is_some())
    }

    fn study_attrs(&mut self, table: &str, study_id: u64) -> OpResult<BTreeMap<String, Value>> {
        let sid = id32(study_id)?;
        let rows = self.db().query(
            &format!(
                "SELECT a.key::text, a.value_json FROM studies s LEFT JOIN {table} a \
                 ON a.study_id = s.study_id WHERE s.study_id = $1"
            ),
            &[&sid],
        )?;
        if rows.is_empty() {
            return Err(study_not_found(study_id).into());
        }
        let mut out = BTreeMap::new();
        for r in rows {
            let (Some(k), v) = (
                r.try_get::<_, Option<String>>(0)?,
                r.try_get::<_, Option<String>>(1)?,
            ) else {
                continue;
            };
            let v = codec::parse_json(
                &format!("study attribute `{k}`"),
                v.as_deref().unwrap_or("null"),
            )?;
            out.insert(k, v);
        }
        Ok(out)
    }

    fn set_study_attr(
        &mut self,
        table: &str,
        study_id: u64,
        key: &str,
        value: &Value,
    ) -> OpResult<()> {
        let sid = id32(study_id)?;
        let json = codec::python_json(value);
        let n = self.db().execute(
            &format!(
                "INSERT INTO {table} (study_id, key, value_json) SELECT $1, $2, $3 \
                 WHERE EXISTS (SELECT 1 FROM studies WHERE study_id = $1) \
                 ON CONFLICT (study_id, key) DO UPDATE SET value_json = excluded.value_json"
            ),
            &[&sid, &key, &json],
        )?;
        if n == 0 {
            return Err(study_not_found(study_id).into());
        }
        self.stats.commits += 1;
        Ok(())
    }

    /// Writes one row of a RUNNING (or, for attributes, WAITING) trial in
    /// one statement: `sql` inserts with `$1` the trial id and only if the
    /// `EXISTS` fence holds.
    fn trial_write(
        &mut self,
        trial_id: u64,
        sql: &str,
        rest: &[&(dyn postgres::types::ToSql + Sync)],
    ) -> OpResult<()> {
        let id = id32(trial_id)?;
        let mut params: Vec<&(dyn postgres::types::ToSql + Sync)> = vec![&id];
        params.extend_from_slice(rest);
        let n = self.db().execute(sql, &params)?;
        if n == 0 {
            self.owned.remove(&trial_id);
            return Err(not_writable(&mut self.db(), trial_id));
        }
        self.stats.commits += 1;
        Ok(())
    }
}

/// The trial-still-RUNNING fence: takes a share lock on the trial row, so a
/// reaper failing the trial waits for this write, or this write sees it failed.
const RUNNING: &str =
    "EXISTS (SELECT 1 FROM trials WHERE trial_id = $1 AND state = 'RUNNING' FOR SHARE)";
const OPEN: &str = "EXISTS (SELECT 1 FROM trials WHERE trial_id = $1 \
     AND state IN ('RUNNING', 'WAITING') FOR SHARE)";

impl Storage for PostgresStorage {
    fn create_study(&self, name: &str, directions: &[Direction]) -> Result<u64> {
        let dirs: Vec<&str> = directions.iter().map(|d| d.as_str()).collect();
        self.op(|db| {
            let row = db.db().query_opt(
                "WITH s AS (INSERT INTO studies (study_name) VALUES ($1) ON CONFLICT DO NOTHING RETURNING study_id), \
                 d AS (INSERT INTO study_directions (direction, study_id, objective) \
                     SELECT q.d::studydirection, s.study_id, (q.o - 1)::int4 FROM s, unnest($2::text[]) WITH ORDINALITY AS q(d, o)) \
                 SELECT study_id FROM s",
                &[&name, &dirs],
            )?;
            let Some(row) = row else {
                return Err(Error::StudyExists(name.to_owned()).into());
            };
            db.stats.commits += 1;
            let id: i32 = row.try_get(0)?;
            Ok(id as u64)
        })
    }

    fn find_study(&self, name: &str) -> Result<Option<StudySummary>> {
        self.op(|db| {
            db.db()
                .query_opt(
                    &format!("{SUMMARY_SQL} WHERE s.study_name = $1 GROUP BY s.study_id"),
                    &[&name],
                )?
                .map(|r| summary(&r))
                .transpose()
        })
    }

    fn studies(&self) -> Result<Vec<StudySummary>> {
        self.op(|db| {
            db.db()
                .query(
                    &format!("{SUMMARY_SQL} GROUP BY s.study_id ORDER BY s.study_id"),
                    &[],
                )?
                .iter()
                .map(summary)
                .collect()
        })
    }

    fn delete_study(&self, study_id: u64) -> Result<()> {
        let sid = id32(study_id)?;
        self.op(|db| {
            db.txn(|db| {
                let found = db.query_opt(
                    "SELECT 1 FROM studies WHERE study_id = $1 FOR UPDATE",
                    &[&sid],
                )?;
                if found.is_none() {
                    return Err(study_not_found(study_id).into());
                }
                for table in [
                    "trial_params",
                    "trial_values",
                    "trial_intermediate_values",
                    "trial_user_attributes",
                    "trial_system_attributes",
                    "trial_heartbeats",
                ] {
                    db.execute(
                        &format!("DELETE FROM {table} WHERE trial_id IN (SELECT trial_id FROM trials WHERE study_id = $1)"),
                        &[&sid],
                    )?;
                }
                for table in [
                    "trials",
                    "study_directions",
                    "study_user_attributes",
                    "study_system_attributes",
                    "studies",
                ] {
                    db.execute(&format!("DELETE FROM {table} WHERE study_id = $1"), &[&sid])?;
                }
                Ok(())
            })?;
            db.caches.remove(&study_id);
            db.claim_from.remove(&study_id);
            db.owned.retain(|_, (s, _)| *s != study_id);
            Ok(())
        })
    }

    fn set_study_user_attr(&self, study_id: u64, key: &str, value: &Value) -> Result<()> {
        self.op(|db| db.set_study_attr("study_user_attributes", study_id, key, value))
    }

    fn set_study_system_attr(&self, study_id: u64, key: &str, value: &Value) -> Result<()> {
        self.op(|db| db.set_study_attr("study_system_attributes", study_id, key, value))
    }

    fn study_user_attrs(&self, study_id: u64) -> Result<BTreeMap<String, Value>> {
        self.op(|db| db.study_attrs("study_user_attributes", study_id))
    }

    fn study_system_attrs(&self, study_id: u64) -> Result<BTreeMap<String, Value>> {
        self.op(|db| db.study_attrs("study_system_attributes", study_id))
    }

    fn create_trial(&self, study_id: u64, template: Option<&FrozenTrial>) -> Result<FrozenTrial> {
        if template.is_none() {
            return self.start(study_id, false, false);
        }
        let t = self.op(|db| db.txn(|db| insert_trial(db, study_id, template)))?;
        if t.state == TrialState::Running {
            self.lock()?.owned.insert(t.id, (study_id, t.clone()));
        }
        Ok(t)
    }

    fn claim_waiting_trial(&self, study_id: u64) -> Result<Option<FrozenTrial>> {
        let sid = id32(study_id)?;
        self.op(|db| {
            let from = db.claim_from.get(&study_id).copied().unwrap_or(0);
            let row = db.db().query_opt(
                "UPDATE trials SET state = 'RUNNING', datetime_start = timezone('UTC', now()) \
                 WHERE trial_id = (SELECT trial_id FROM trials WHERE study_id = $1 AND trial_id >= $2 \
                     AND state = 'WAITING' ORDER BY number LIMIT 1 FOR UPDATE SKIP LOCKED) \
                 AND state = 'WAITING' RETURNING trial_id",
                &[&sid, &from],
            )?;
            let Some(row) = row else { return Ok(None) };
            db.stats.commits += 1;
            let id: i32 = row.try_get(0)?;
            db.claim_from.insert(study_id, id);
            let t = load_one(&mut db.db(), id as u64)?;
            db.owned.insert(t.id, (study_id, t.clone()));
            Ok(Some(t))
        })
    }

    fn start_trial(&self, study_id: u64, heartbeat: bool) -> Result<FrozenTrial> {
        self.start(study_id, true, heartbeat)
    }

    fn fail_stale_trial(
        &self,
        trial_id: u64,
        system_attrs: &[(String, Value)],
        retry: &dyn Fn(&FrozenTrial) -> Option<FrozenTrial>,
    ) -> Result<(Arc<FrozenTrial>, Option<FrozenTrial>)> {
        let id = id32(trial_id)?;
        self.op(|db| {
            let out = db.txn(|db| {
                let row = db.query_opt(
                    "UPDATE trials SET state = 'FAIL', datetime_complete = timezone('UTC', now()) \
                     WHERE trial_id = $1 AND state = 'RUNNING' RETURNING study_id",
                    &[&id],
                )?;
                let Some(row) = row else {
                    return Err(not_writable(db, trial_id));
                };
                let study_id: i32 = row.try_get(0)?;
                set_system_attrs(db, id, system_attrs)?;
                let failed = load_one(db, trial_id)?;
                let copy = match retry(&failed) {
                    Some(tpl) => Some(insert_trial(db, study_id as u64, Some(&tpl))?),
                    None => None,
                };
                Ok((study_id as u64, failed, copy))
            });
            db.owned.remove(&trial_id);
            let (study_id, failed, copy) = out?;
            let failed = Arc::new(failed);
            db.caches
                .entry(study_id)
                .or_default()
                .finished
                .insert(Arc::clone(&failed));
            if let Some(t) = copy.as_ref().filter(|t| t.state == TrialState::Running) {
                db.owned.insert(t.id, (study_id, t.clone()));
            }
            Ok((failed, copy))
        })
    }

    fn set_trial_param(
        &self,
        trial_id: u64,
        name: &str,
        internal: f64,
        dist: &Distribution,
    ) -> Result<()> {
        crate::storage::require_in_distribution(internal, dist)?;
        let json = dist.to_json();
        self.op(|db| {
            db.trial_write(
                trial_id,
                &format!(
                    "INSERT INTO trial_params (trial_id, param_name, param_value, distribution_json) \
                     SELECT $1, $2, $3, $4 WHERE {RUNNING} \
                     ON CONFLICT (trial_id, param_name) DO UPDATE SET param_value = excluded.param_value, \
                     distribution_json = excluded.distribution_json"
                ),
                &[&name, &internal, &json],
            )?;
            if let Some((_, t)) = db.owned.get_mut(&trial_id) {
                t.internal_params.insert(name.to_owned(), internal);
                t.distributions.insert(name.to_owned(), dist.clone());
            }
            Ok(())
        })
    }

    fn set_trial_intermediate_value(&self, trial_id: u64, step: u64, value: f64) -> Result<()> {
        let step32 = i32::try_from(step).map_err(|_| {
            Error::InvalidOperation(format!(
                "step {step} is beyond the schema's 32-bit INTEGER steps"
            ))
        })?;
        let (x, kind) = codec::encode_float(value);
        self.op(|db| {
            db.trial_write(
                trial_id,
                &format!(
                    "INSERT INTO trial_intermediate_values (trial_id, step, intermediate_value, intermediate_value_type) \
                     SELECT $1, $2, $3, $4::text::trialintermediatevaluetype WHERE {RUNNING} \
                     ON CONFLICT (trial_id, step) DO UPDATE SET intermediate_value = excluded.intermediate_value, \
                     intermediate_value_type = excluded.intermediate_value_type"
                ),
                &[&step32, &x, &kind],
            )?;
            if let Some((_, t)) = db.owned.get_mut(&trial_id) {
                t.intermediate_values.insert(step, value);
            }
            Ok(())
        })
    }

    fn set_trial_user_attr(&self, trial_id: u64, key: &str, value: &Value) -> Result<()> {
        self.set_trial_attr("trial_user_attributes", trial_id, key, value, false)
    }

    fn set_trial_system_attr(&self, trial_id: u64, key: &str, value: &Value) -> Result<()> {
        self.set_trial_attr("trial_system_attributes", trial_id, key, value, true)
    }

    fn finish_trial(
        &self,
        trial_id: u64,
        state: TrialState,
        values: Option<&[f64]>,
        system_attrs: &[(String, Value)],
    ) -> Result<Arc<FrozenTrial>> {
        crate::storage::require_finished(state)?;
        let id = id32(trial_id)?;
        let (v_values, v_types): (Vec<Option<f64>>, Vec<&str>) = values
            .unwrap_or_default()
            .iter()
            .map(|v| codec::encode_float(*v))
            .unzip();
        let last: BTreeMap<&str, &Value> =
            system_attrs.iter().map(|(k, v)| (k.as_str(), v)).collect();
        let (keys, json): (Vec<&str>, Vec<String>) = last
            .into_iter()
            .map(|(k, v)| (k, codec::python_json(v)))
            .unzip();
        self.op(|db| {
            let row = db.db().query_opt(
                "WITH u AS (UPDATE trials SET state = $2::text::trialstate, datetime_complete = timezone('UTC', now()) \
                     WHERE trial_id = $1 AND state = 'RUNNING' RETURNING trial_id, datetime_complete), \
                 v AS (INSERT INTO trial_values (trial_id, objective, value, value_type) \
                     SELECT u.trial_id, (q.o - 1)::int4, q.x, q.k::trialvaluetype \
                     FROM u, unnest($3::float8[], $4::text[]) WITH ORDINALITY AS q(x, k, o)), \
                 a AS (INSERT INTO trial_system_attributes (trial_id, key, value_json) \
                     SELECT u.trial_id, q.k, q.j FROM u, unnest($5::text[], $6::text[]) AS q(k, j) \
                     ON CONFLICT (trial_id, key) DO UPDATE SET value_json = excluded.value_json) \
                 SELECT datetime_complete FROM u",
                &[&id, &state.as_str(), &v_values, &v_types, &keys, &json],
            )?;
            let Some(row) = row else {
                db.owned.remove(&trial_id);
                return Err(not_writable(&mut db.db(), trial_id));
            };
            db.stats.commits += 1;
            let complete: chrono::NaiveDateTime = row.try_get(0)?;
            match db.owned.remove(&trial_id) {
                Some((study_id, mut t)) => {
                    t.state = state;
                    t.values = values.map(<[f64]>::to_vec);
                    t.datetime_complete = Some(complete.and_utc());
                    for (k, v) in system_attrs {
                        t.system_attrs.insert(k.clone(), v.clone());
                    }
                    // Finished trials never change: the next read need not load it.
                    let t = Arc::new(t);
                    db.caches
                        .entry(study_id)
                        .or_default()
                        .finished
                        .insert(Arc::clone(&t));
                    Ok(t)
                }
                None => Ok(Arc::new(load_one(&mut db.db(), trial_id)?)),
            }
        })
    }

    fn release_trial(&self, trial_id: u64) -> Result<()> {
        self.lock()?.owned.remove(&trial_id);
        Ok(())
    }

    fn trial(&self, trial_id: u64) -> Result<Arc<FrozenTrial>> {
        self.op(|db| {
            if let Some((_, t)) = db.owned.get(&trial_id) {
                return Ok(Arc::new(t.clone()));
            }
            Ok(Arc::new(load_one(&mut db.db(), trial_id)?))
        })
    }

    fn trials(&self, study_id: u64) -> Result<Vec<Arc<FrozenTrial>>> {
        Ok(self.trial_snapshot(study_id)?.to_vec())
    }

    fn trial_snapshot(&self, study_id: u64) -> Result<TrialSnapshot> {
        let sid = id32(study_id)?;
        self.op(|db| {
            if !db.caches.contains_key(&study_id) && !db.study_exists(study_id)? {
                return Err(study_not_found(study_id).into());
            }
            let low_water = db.caches.get(&study_id).map_or(0, |c| c.low_water);
            let rows = db.db().query(
                &format!(
                    "SELECT {TRIAL_COLUMNS} FROM trials WHERE study_id = $1 AND trial_id >= $2"
                ),
                &[&sid, &low_water],
            )?;
            let cache = db.caches.get(&study_id);
            let mut current: Vec<Arc<FrozenTrial>> = Vec::new();
            let mut to_load = Vec::new();
            let mut new_low = i32::MAX;
            let mut max_id = low_water - 1;
            for row in &rows {
                let row = trial_row(row)?;
                max_id = max_id.max(row.id);
                if cache.is_some_and(|c| c.finished.contains(row.number.max(0) as u64)) {
                    continue;
                }
                if !row.state.is_finished() {
                    new_low = new_low.min(row.id);
                }
                match db.owned.get(&(row.id as u64)) {
                    Some((_, t)) if row.state == TrialState::Running => {
                        current.push(Arc::new(t.clone()))
                    }
                    _ => to_load.push(row),
                }
            }
            let loaded = load(&mut db.db(), to_load)?;
            let cache = db.caches.entry(study_id).or_default();
            for t in loaded {
                if t.state.is_finished() {
                    db.owned.remove(&t.id);
                    cache.finished.insert(Arc::new(t));
                } else {
                    current.push(Arc::new(t));
                }
            }
            cache.low_water = if new_low == i32::MAX {
                max_id + 1
            } else {
                new_low
            };
            Ok(cache.finished.snapshot(current))
        })
    }

    fn record_heartbeat(&self, trial_id: u64) -> Result<()> {
        self.op(|db| {
            db.trial_write(
                trial_id,
                &format!(
                    "INSERT INTO trial_heartbeats (trial_id, heartbeat) \
                     SELECT $1, timezone('UTC', now()) WHERE {RUNNING} \
                     ON CONFLICT (trial_id) DO UPDATE SET heartbeat = excluded.heartbeat"
                ),
                &[],
            )
        })
    }

    fn stale_trials(&self, study_id: u64, grace: Duration) -> Result<Vec<u64>> {
        let sid = id32(study_id)?;
        let secs = grace.as_secs_f64();
        self.op(|db| {
            let from = db.caches.get(&study_id).map_or(0, |c| c.low_water);
            let rows = db.db().query(
                "SELECT t.trial_id FROM trials t LEFT JOIN trial_heartbeats h ON h.trial_id = t.trial_id \
                 WHERE t.study_id = $1 AND t.trial_id >= $2 AND t.state = 'RUNNING' \
                 AND COALESCE(h.heartbeat, t.datetime_start) < timezone('UTC', now()) - make_interval(secs => $3) \
                 ORDER BY t.number",
                &[&sid, &from, &secs],
            )?;
            rows.iter()
                .map(|r| Ok(r.try_get::<_, i32>(0)? as u64))
                .collect()
        })
    }
}

impl PostgresStorage {
    fn set_trial_attr(
        &self,
        table: &str,
        trial_id: u64,
        key: &str,
        value: &Value,
        system: bool,
    ) -> Result<()> {
        let json = codec::python_json(value);
        self.op(|db| {
            db.trial_write(
                trial_id,
                &format!(
                    "INSERT INTO {table} (trial_id, key, value_json) SELECT $1, $2, $3 WHERE {OPEN} \
                     ON CONFLICT (trial_id, key) DO UPDATE SET value_json = excluded.value_json"
                ),
                &[&key, &json],
            )?;
            if let Some((_, t)) = db.owned.get_mut(&trial_id) {
                let map = if system {
                    &mut t.system_attrs
                } else {
                    &mut t.user_attrs
                };
                map.insert(key.to_owned(), value.clone());
            }
            Ok(())
        })
    }

    /// Starts a trial in one request: under the study's advisory lock,
    /// claims the oldest WAITING trial (when `claim`) or else inserts a new
    /// RUNNING one, and with `heartbeat` records its first heartbeat. The SQL
    /// holds only numbers and constants (no user strings), so it goes as one
    /// multi-statement request: one round trip, one transaction.
    fn start(&self, study_id: u64, claim: bool, heartbeat: bool) -> Result<FrozenTrial> {
        let sid = id32(study_id)?;
        self.op(|db| {
            let from = db.claim_from.get(&study_id).copied().unwrap_or(0);
            let claimed = if claim {
                format!(
                    "UPDATE trials SET state = 'RUNNING', datetime_start = timezone('UTC', now()) \
                     WHERE trial_id = (SELECT trial_id FROM trials WHERE study_id = {sid} AND trial_id >= {from} \
                         AND state = 'WAITING' ORDER BY number LIMIT 1 FOR UPDATE SKIP LOCKED) \
                     AND state = 'WAITING' RETURNING trial_id, number, datetime_start"
                )
            } else {
                "SELECT trial_id, number, datetime_start FROM trials WHERE false".to_owned()
            };
            let sql = format!(
                "SELECT pg_advisory_xact_lock({LOCK_CLASS}, {sid}); \
                 WITH c AS ({claimed}), \
                 n AS (INSERT INTO trials (number, study_id, state, datetime_start) \
                     SELECT COALESCE((SELECT MAX(number) FROM trials WHERE study_id = {sid}), -1) + 1, \
                     {sid}, 'RUNNING', timezone('UTC', now()) \
                     WHERE NOT EXISTS (SELECT 1 FROM c) AND EXISTS (SELECT 1 FROM studies WHERE study_id = {sid}) \
                     RETURNING trial_id, number, datetime_start), \
                 a AS (SELECT trial_id, number, datetime_start, true AS claimed FROM c \
                     UNION ALL SELECT trial_id, number, datetime_start, false FROM n), \
                 h AS (INSERT INTO trial_heartbeats (trial_id, heartbeat) \
                     SELECT trial_id, timezone('UTC', now()) FROM a WHERE {heartbeat} \
                     ON CONFLICT (trial_id) DO UPDATE SET heartbeat = excluded.heartbeat) \
                 SELECT trial_id, number, datetime_start, claimed FROM a"
            );
            let rows = db.db().batch(&sql, 2)?;
            let Some(row) = rows.into_iter().next() else {
                return Err(study_not_found(study_id).into());
            };
            db.stats.commits += 1;
            let field = |i: usize| row.get(i).map(String::as_str).unwrap_or_default();
            let parse_int = |i: usize| -> OpResult<i32> {
                field(i).parse().map_err(|_| {
                    Error::Parse {
                        what: "a new trial's id or number".into(),
                        reason: format!("`{}` is not an integer", field(i)),
                        source: None,
                    }
                    .into()
                })
            };
            let id = parse_int(0)?;
            let t = if field(3) == "t" {
                load_one(&mut db.db(), id as u64)?
            } else {
                let mut t = FrozenTrial::new(id as u64, parse_int(1)?.max(0) as u64, TrialState::Running);
                t.datetime_start = Some(codec::parse_datetime(field(2))?);
                t
            };
            // Only a start that looked for a WAITING trial may move the
            // claim mark: without the look (`create_trial`), a trial enqueued
            // before this one, with a smaller id, may still be WAITING.
            if claim {
                db.claim_from.insert(study_id, id);
            }
            db.owned.insert(t.id, (study_id, t.clone()));
            Ok(t)
        })
    }
}
