//! [`Storage`] for [`SqliteStorage`]: one method, one statement or one transaction.

use super::queries::{
    claim, insert_details, insert_trial, insert_values, new_record, read_row, set_system_attrs,
};
use super::SqliteStorage;
use crate::direction::Direction;
use crate::distribution::Distribution;
use crate::error::{Error, Result};
use crate::storage::codec;
use crate::storage::{Storage, StudySummary};
use crate::trial::{FrozenTrial, TrialSnapshot, TrialState};
use rusqlite::{params, OptionalExtension};
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

impl Storage for SqliteStorage {
    fn create_study(&self, name: &str, directions: &[Direction]) -> Result<u64> {
        self.op(|db| {
            db.write_txn(|conn, c| {
                c.statement();
                let inserted = conn
                    .prepare_cached("INSERT INTO studies (study_name) VALUES (?1) ON CONFLICT DO NOTHING RETURNING study_id")?
                    .query_row([name], |r| r.get::<_, i64>(0))
                    .optional()?;
                let Some(id) = inserted else {
                    return Err(Error::StudyExists(name.to_owned()).into());
                };
                for (objective, d) in directions.iter().enumerate() {
                    c.statement();
                    conn.prepare_cached(
                        "INSERT INTO study_directions (direction, study_id, objective) VALUES (?1, ?2, ?3)",
                    )?
                    .execute(params![d.as_str(), id, objective as i64])?;
                }
                Ok(id as u64)
            })
        })
    }

    fn find_study(&self, name: &str) -> Result<Option<StudySummary>> {
        self.op(|db| {
            db.counters.statement();
            let id: Option<i64> = db
                .conn
                .prepare_cached("SELECT study_id FROM studies WHERE study_name = ?1")?
                .query_row([name], |r| r.get(0))
                .optional()?;
            match id {
                None => Ok(None),
                Some(id) => Ok(Some(StudySummary {
                    id: id as u64,
                    name: name.to_owned(),
                    directions: db.directions(id)?,
                })),
            }
        })
    }

    fn studies(&self) -> Result<Vec<StudySummary>> {
        self.op(|db| {
            db.counters.statement();
            let rows = db
                .conn
                .prepare_cached("SELECT study_id, study_name FROM studies ORDER BY study_id")?
                .query_map([], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?)))?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            rows.into_iter()
                .map(|(id, name)| {
                    Ok(StudySummary {
                        id: id as u64,
                        name,
                        directions: db.directions(id)?,
                    })
                })
                .collect()
        })
    }

    fn delete_study(&self, study_id: u64) -> Result<()> {
        self.op(|db| {
            db.write_txn(|conn, c| {
                let sid = study_id as i64;
                c.statement();
                let found = conn
                    .prepare_cached("SELECT 1 FROM studies WHERE study_id = ?1")?
                    .query_row([sid], |_| Ok(()))
                    .optional()?;
                if found.is_none() {
                    return Err(Error::StudyIdNotFound(study_id).into());
                }
                for table in [
                    "trial_params",
                    "trial_values",
                    "trial_intermediate_values",
                    "trial_user_attributes",
                    "trial_system_attributes",
                    "trial_heartbeats",
                ] {
                    c.statement();
                    conn.execute(
                        &format!("DELETE FROM {table} WHERE trial_id IN (SELECT trial_id FROM trials WHERE study_id = ?1)"),
                        [sid],
                    )?;
                }
                for table in ["trials", "study_directions", "study_user_attributes", "study_system_attributes", "studies"]
                {
                    c.statement();
                    conn.execute(&format!("DELETE FROM {table} WHERE study_id = ?1"), [sid])?;
                }
                Ok(())
            })?;
            db.caches.remove(&study_id);
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
        self.op(|db| {
            if !db.study_exists(study_id)? {
                return Err(Error::StudyIdNotFound(study_id).into());
            }
            db.study_attrs("study_user_attributes", study_id)
        })
    }

    fn study_system_attrs(&self, study_id: u64) -> Result<BTreeMap<String, Value>> {
        self.op(|db| {
            if !db.study_exists(study_id)? {
                return Err(Error::StudyIdNotFound(study_id).into());
            }
            db.study_attrs("study_system_attributes", study_id)
        })
    }

    fn create_trial(&self, study_id: u64, template: Option<&FrozenTrial>) -> Result<FrozenTrial> {
        let now = codec::now();
        let mut t = new_record(template, now);
        let is_bare = template.is_none_or(|tpl| {
            tpl.internal_params.is_empty()
                && tpl.values.is_none()
                && tpl.intermediate_values.is_empty()
                && tpl.user_attrs.is_empty()
                && tpl.system_attrs.is_empty()
        });
        let (id, number) = self.op(|db| {
            if is_bare {
                // One autocommit statement: the number is computed under the write lock.
                let out = insert_trial(&db.conn, &db.counters, study_id, &t)?;
                db.counters.commit();
                Ok(out)
            } else {
                db.write_txn(|conn, c| {
                    let (id, number) = insert_trial(conn, c, study_id, &t)?;
                    insert_details(conn, c, id, &t)?;
                    Ok((id, number))
                })
            }
        })?;
        t.id = id as u64;
        t.number = number as u64;
        if t.state == TrialState::Running {
            self.lock()?.owned.insert(t.id, (study_id, t.clone()));
        }
        Ok(t)
    }

    fn claim_waiting_trial(&self, study_id: u64) -> Result<Option<FrozenTrial>> {
        self.op(|db| {
            // A lock-free read first: most of the time there is nothing to claim.
            if !db.may_have_waiting(study_id)? {
                return Ok(None);
            }
            let now = codec::format_datetime(codec::now());
            let claimed = claim(
                &db.conn,
                &db.counters,
                study_id,
                db.claim_from(study_id),
                &now,
            )?;
            db.counters.commit();
            let Some(id) = claimed else { return Ok(None) };
            let t = db.load_one(id as u64)?;
            db.owned.insert(t.id, (study_id, t.clone()));
            Ok(Some(t))
        })
    }

    fn start_trial(&self, study_id: u64, heartbeat: bool) -> Result<FrozenTrial> {
        if !heartbeat {
            return match self.claim_waiting_trial(study_id)? {
                Some(t) => Ok(t),
                None => self.create_trial(study_id, None),
            };
        }
        let now = codec::now();
        let stamp = codec::format_datetime(now);
        self.op(|db| {
            let look = db.may_have_waiting(study_id)?;
            let from = db.claim_from(study_id);
            let t = db.txn(|db| {
                let (conn, c) = (&db.conn, &db.counters);
                let claimed = if look {
                    claim(conn, c, study_id, from, &stamp)?
                } else {
                    None
                };
                let t = match claimed {
                    Some(id) => db.load_one(id as u64)?,
                    None => {
                        let mut t = new_record(None, now);
                        let (id, number) = insert_trial(conn, c, study_id, &t)?;
                        t.id = id as u64;
                        t.number = number as u64;
                        t
                    }
                };
                c.statement();
                conn.prepare_cached(
                    "INSERT INTO trial_heartbeats (trial_id, heartbeat) VALUES (?1, ?2) \
                     ON CONFLICT (trial_id) DO UPDATE SET heartbeat = excluded.heartbeat",
                )?
                .execute(params![t.id as i64, stamp])?;
                Ok(t)
            })?;
            db.owned.insert(t.id, (study_id, t.clone()));
            Ok(t)
        })
    }

    fn fail_stale_trial(
        &self,
        trial_id: u64,
        system_attrs: &[(String, Value)],
        retry: &dyn Fn(&FrozenTrial) -> Option<FrozenTrial>,
    ) -> Result<(Arc<FrozenTrial>, Option<FrozenTrial>)> {
        let now = codec::now();
        let complete = codec::format_datetime(now);
        self.op(|db| {
            let out = db.txn(|db| {
                let (conn, c) = (&db.conn, &db.counters);
                c.statement();
                let study_id: Option<i64> = conn
                    .prepare_cached(
                        "UPDATE trials SET state = 'FAIL', datetime_complete = ?2 \
                         WHERE trial_id = ?1 AND state = 'RUNNING' RETURNING study_id",
                    )?
                    .query_row(params![trial_id as i64, complete], |r| r.get(0))
                    .optional()?;
                let Some(study_id) = study_id else {
                    return Err(db.not_writable(trial_id)?);
                };
                set_system_attrs(conn, c, trial_id as i64, system_attrs)?;
                let failed = db.load_one(trial_id)?;
                let copy = match retry(&failed) {
                    Some(tpl) => {
                        let mut t = new_record(Some(&tpl), now);
                        let (id, number) = insert_trial(conn, c, study_id as u64, &t)?;
                        insert_details(conn, c, id, &t)?;
                        t.id = id as u64;
                        t.number = number as u64;
                        Some(t)
                    }
                    None => None,
                };
                Ok((study_id as u64, failed, copy))
            });
            let (study_id, failed, copy) = match out {
                Ok(v) => v,
                Err(e) => {
                    db.owned.remove(&trial_id);
                    return Err(e);
                }
            };
            db.owned.remove(&trial_id);
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
            db.counters.statement();
            let changed = db
                .conn
                .prepare_cached(
                    "INSERT INTO trial_params (trial_id, param_name, param_value, distribution_json) \
                     SELECT ?1, ?2, ?3, ?4 WHERE EXISTS (SELECT 1 FROM trials WHERE trial_id = ?1 AND state = 'RUNNING') \
                     ON CONFLICT (trial_id, param_name) DO UPDATE SET param_value = excluded.param_value, \
                     distribution_json = excluded.distribution_json",
                )?
                .execute(params![trial_id as i64, name, internal, json])?;
            if changed == 0 {
                db.owned.remove(&trial_id);
                return Err(db.not_writable(trial_id)?);
            }
            db.counters.commit();
            if let Some((_, t)) = db.owned.get_mut(&trial_id) {
                t.internal_params.insert(name.to_owned(), internal);
                t.distributions.insert(name.to_owned(), dist.clone());
            }
            Ok(())
        })
    }

    fn set_trial_intermediate_value(&self, trial_id: u64, step: u64, value: f64) -> Result<()> {
        let (x, kind) = codec::encode_float(value);
        self.op(|db| {
            db.counters.statement();
            let changed = db
                .conn
                .prepare_cached(
                    "INSERT INTO trial_intermediate_values (trial_id, step, intermediate_value, intermediate_value_type) \
                     SELECT ?1, ?2, ?3, ?4 WHERE EXISTS (SELECT 1 FROM trials WHERE trial_id = ?1 AND state = 'RUNNING') \
                     ON CONFLICT (trial_id, step) DO UPDATE SET intermediate_value = excluded.intermediate_value, \
                     intermediate_value_type = excluded.intermediate_value_type",
                )?
                .execute(params![trial_id as i64, step as i64, x, kind])?;
            if changed == 0 {
                db.owned.remove(&trial_id);
                return Err(db.not_writable(trial_id)?);
            }
            db.counters.commit();
            if let Some((_, t)) = db.owned.get_mut(&trial_id) {
                t.intermediate_values.insert(step, value);
            }
            Ok(())
        })
    }

    fn set_trial_user_attr(&self, trial_id: u64, key: &str, value: &Value) -> Result<()> {
        self.op(|db| {
            db.set_trial_attr("trial_user_attributes", trial_id, key, value)?;
            if let Some((_, t)) = db.owned.get_mut(&trial_id) {
                t.user_attrs.insert(key.to_owned(), value.clone());
            }
            Ok(())
        })
    }

    fn set_trial_system_attr(&self, trial_id: u64, key: &str, value: &Value) -> Result<()> {
        self.op(|db| {
            db.set_trial_attr("trial_system_attributes", trial_id, key, value)?;
            if let Some((_, t)) = db.owned.get_mut(&trial_id) {
                t.system_attrs.insert(key.to_owned(), value.clone());
            }
            Ok(())
        })
    }

    fn finish_trial(
        &self,
        trial_id: u64,
        state: TrialState,
        values: Option<&[f64]>,
        system_attrs: &[(String, Value)],
    ) -> Result<Arc<FrozenTrial>> {
        crate::storage::require_finished(state)?;
        let now = codec::now();
        let complete = codec::format_datetime(now);
        self.op(|db| {
            let updated = db.write_txn(|conn, c| {
                c.statement();
                let changed = conn
                    .prepare_cached(
                        "UPDATE trials SET state = ?2, datetime_complete = ?3 WHERE trial_id = ?1 AND state = 'RUNNING'",
                    )?
                    .execute(params![trial_id as i64, state.as_str(), complete])?;
                if changed == 0 {
                    return Ok(false);
                }
                if let Some(vs) = values {
                    insert_values(conn, c, trial_id as i64, vs)?;
                }
                set_system_attrs(conn, c, trial_id as i64, system_attrs)?;
                Ok(true)
            })?;
            if !updated {
                db.owned.remove(&trial_id);
                return Err(db.not_writable(trial_id)?);
            }
            match db.owned.remove(&trial_id) {
                Some((study_id, mut t)) => {
                    t.state = state;
                    t.values = values.map(<[f64]>::to_vec);
                    t.datetime_complete = Some(now);
                    for (k, v) in system_attrs {
                        t.system_attrs.insert(k.clone(), v.clone());
                    }
                    // Finished trials never change: the next read need not load it.
                    let t = Arc::new(t);
                    db.caches.entry(study_id).or_default().finished.insert(Arc::clone(&t));
                    Ok(t)
                }
                None => {
                    let row = db.trial_row(trial_id)?.ok_or(Error::TrialNotFound(trial_id))?;
                    Ok(Arc::new(db.load(vec![row])?.pop().ok_or(Error::TrialNotFound(trial_id))?))
                }
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
            let row = db
                .trial_row(trial_id)?
                .ok_or(Error::TrialNotFound(trial_id))?;
            let t = db
                .load(vec![row])?
                .pop()
                .ok_or(Error::TrialNotFound(trial_id))?;
            Ok(Arc::new(t))
        })
    }

    fn trials(&self, study_id: u64) -> Result<Vec<Arc<FrozenTrial>>> {
        Ok(self.trial_snapshot(study_id)?.to_vec())
    }

    fn trial_snapshot(&self, study_id: u64) -> Result<TrialSnapshot> {
        self.op(|db| {
            if !db.caches.contains_key(&study_id) && !db.study_exists(study_id)? {
                return Err(Error::StudyIdNotFound(study_id).into());
            }
            let low_water = db.caches.get(&study_id).map_or(0, |c| c.low_water);
            db.counters.statement();
            let rows = db
                .conn
                .prepare_cached(
                    "SELECT trial_id, number, state, datetime_start, datetime_complete FROM trials \
                     WHERE study_id = ?1 AND trial_id >= ?2",
                )?
                .query_map(params![study_id as i64, low_water], read_row)?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            let cache = db.caches.get(&study_id);
            let mut current: Vec<Arc<FrozenTrial>> = Vec::new();
            let mut to_load = Vec::new();
            let mut new_low = i64::MAX;
            let mut max_id = low_water - 1;
            for row in rows {
                max_id = max_id.max(row.id);
                if cache.is_some_and(|c| c.finished.contains(row.number as u64)) {
                    continue;
                }
                let finished = row.state.parse::<TrialState>()?.is_finished();
                if !finished {
                    new_low = new_low.min(row.id);
                }
                match db.owned.get(&(row.id as u64)) {
                    Some((_, t)) if row.state == "RUNNING" => current.push(Arc::new(t.clone())),
                    _ => to_load.push(row),
                }
            }
            let loaded = db.load(to_load)?;
            let cache = db.caches.entry(study_id).or_default();
            for t in loaded {
                if t.state.is_finished() {
                    db.owned.remove(&t.id);
                    cache.finished.insert(Arc::new(t));
                } else {
                    current.push(Arc::new(t));
                }
            }
            cache.low_water = if new_low == i64::MAX {
                max_id + 1
            } else {
                new_low
            };
            Ok(cache.finished.snapshot(current))
        })
    }

    fn record_heartbeat(&self, trial_id: u64) -> Result<()> {
        let now = codec::format_datetime(codec::now());
        self.op(|db| {
            db.counters.statement();
            let changed = db
                .conn
                .prepare_cached(
                    "INSERT INTO trial_heartbeats (trial_id, heartbeat) SELECT ?1, ?2 \
                     WHERE EXISTS (SELECT 1 FROM trials WHERE trial_id = ?1 AND state = 'RUNNING') \
                     ON CONFLICT (trial_id) DO UPDATE SET heartbeat = excluded.heartbeat",
                )?
                .execute(params![trial_id as i64, now])?;
            if changed == 0 {
                return Err(db.not_writable(trial_id)?);
            }
            db.counters.commit();
            Ok(())
        })
    }

    fn stale_trials(&self, study_id: u64, grace: Duration) -> Result<Vec<u64>> {
        let now = codec::now();
        self.op(|db| {
            // Every trial below the low-water mark is finished: look above it only.
            let from = db.caches.get(&study_id).map_or(0, |c| c.low_water);
            db.counters.statement();
            let rows = db
                .conn
                .prepare_cached(
                    "SELECT t.trial_id, t.datetime_start, h.heartbeat FROM trials t \
                     LEFT JOIN trial_heartbeats h ON h.trial_id = t.trial_id \
                     WHERE t.study_id = ?1 AND t.trial_id >= ?2 AND t.state = 'RUNNING' ORDER BY t.number",
                )?
                .query_map(params![study_id as i64, from], |r| {
                    Ok((
                        r.get::<_, i64>(0)?,
                        r.get::<_, Option<String>>(1)?,
                        r.get::<_, Option<String>>(2)?,
                    ))
                })?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            let mut stale = Vec::new();
            for (id, start, beat) in rows {
                // The last heartbeat; a trial that never beat counts from its start.
                let Some(last) = beat.or(start) else { continue };
                let last = codec::parse_datetime(&last)?;
                if (now - last).to_std().is_ok_and(|age| age > grace) {
                    stale.push(id as u64);
                }
            }
            Ok(stale)
        })
    }
}
