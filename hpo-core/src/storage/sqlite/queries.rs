//! Statements shared by the storage operations: loading trial records,
//! study look-ups, attribute writes and trial detail inserts.

use super::connection::{Counters, Inner, OpError, OpResult};
use crate::direction::Direction;
use crate::distribution::Distribution;
use crate::error::{Error, Result};
use crate::storage::codec;
use crate::trial::{FrozenTrial, TrialState};
use chrono::{DateTime, Utc};
use rusqlite::types::ValueRef;
use rusqlite::{params, Connection, OptionalExtension};
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};

/// One row of the `trials` table.
pub(super) struct TrialRow {
    pub(super) id: i64,
    pub(super) number: i64,
    pub(super) state: String,
    pub(super) start: Option<String>,
    pub(super) complete: Option<String>,
}

impl Inner {
    /// Why a write to `trial_id` changed nothing: the trial is missing or finished.
    pub(super) fn not_writable(&self, trial_id: u64) -> OpResult<OpError> {
        self.counters.statement();
        let row: Option<(i64, String)> = self
            .conn
            .prepare_cached("SELECT number, state FROM trials WHERE trial_id = ?1")?
            .query_row([trial_id as i64], |r| Ok((r.get(0)?, r.get(1)?)))
            .optional()?;
        Ok(match row {
            None => OpError::Hpo(Error::TrialNotFound(trial_id)),
            Some((number, state)) => {
                let state: TrialState = state.parse()?;
                OpError::Hpo(Error::TrialFinished {
                    number: number as u64,
                    state,
                })
            }
        })
    }

    /// Reads full records of the given trial rows (one statement for all details).
    pub(super) fn load(&self, rows: Vec<TrialRow>) -> OpResult<Vec<FrozenTrial>> {
        if rows.is_empty() {
            return Ok(Vec::new());
        }
        let mut trials: HashMap<i64, FrozenTrial> = HashMap::with_capacity(rows.len());
        let mut order = Vec::with_capacity(rows.len());
        for r in rows {
            let mut t = FrozenTrial::new(r.id as u64, r.number as u64, r.state.parse()?);
            t.datetime_start = r.start.as_deref().map(codec::parse_datetime).transpose()?;
            t.datetime_complete = r
                .complete
                .as_deref()
                .map(codec::parse_datetime)
                .transpose()?;
            order.push(r.id);
            trials.insert(r.id, t);
        }
        let loaded = &self.counters.trials_loaded;
        loaded.set(loaded.get() + order.len() as u64);
        let ids = order
            .iter()
            .map(i64::to_string)
            .collect::<Vec<_>>()
            .join(",");
        let sql = format!(
            "SELECT trial_id, 0, param_name, param_value, distribution_json FROM trial_params WHERE trial_id IN ({ids}) \
             UNION ALL SELECT trial_id, 1, \"key\", NULL, value_json FROM trial_user_attributes WHERE trial_id IN ({ids}) \
             UNION ALL SELECT trial_id, 2, \"key\", NULL, value_json FROM trial_system_attributes WHERE trial_id IN ({ids}) \
             UNION ALL SELECT trial_id, 3, objective, value, value_type FROM trial_values WHERE trial_id IN ({ids}) \
             UNION ALL SELECT trial_id, 4, step, intermediate_value, intermediate_value_type \
                 FROM trial_intermediate_values WHERE trial_id IN ({ids})"
        );
        self.counters.statement();
        let mut stmt = self.conn.prepare(&sql)?;
        let mut values: HashMap<i64, BTreeMap<i64, f64>> = HashMap::new();
        let mut rows = stmt.query([])?;
        while let Some(r) = rows.next()? {
            let id: i64 = r.get(0)?;
            let kind: i64 = r.get(1)?;
            let Some(t) = trials.get_mut(&id) else {
                continue;
            };
            let real: Option<f64> = match r.get_ref(3)? {
                ValueRef::Null => None,
                ValueRef::Integer(i) => Some(i as f64),
                ValueRef::Real(x) => Some(x),
                other => {
                    return Err(Error::Parse {
                        what: format!("a stored value of trial {}", t.number),
                        reason: format!("expected a number, found {:?}", other.data_type()),
                        source: None,
                    }
                    .into())
                }
            };
            let text: String = r.get(4)?;
            match kind {
                0 => {
                    let name: String = r.get(2)?;
                    let dist = Distribution::from_json(&text)?;
                    t.internal_params
                        .insert(name.clone(), real.unwrap_or(f64::NAN));
                    t.distributions.insert(name, dist);
                }
                1 | 2 => {
                    let key: String = r.get(2)?;
                    let v = codec::parse_json(
                        &format!("attribute `{key}` of trial {}", t.number),
                        &text,
                    )?;
                    let map = if kind == 1 {
                        &mut t.user_attrs
                    } else {
                        &mut t.system_attrs
                    };
                    map.insert(key, v);
                }
                3 => {
                    let objective: i64 = r.get(2)?;
                    values
                        .entry(id)
                        .or_default()
                        .insert(objective, codec::decode_float(real, &text)?);
                }
                _ => {
                    let step: i64 = r.get(2)?;
                    t.intermediate_values
                        .insert(step.max(0) as u64, codec::decode_float(real, &text)?);
                }
            }
        }
        for (id, vs) in values {
            if let Some(t) = trials.get_mut(&id) {
                t.values = Some(vs.into_values().collect());
            }
        }
        Ok(order
            .into_iter()
            .filter_map(|id| trials.remove(&id))
            .collect())
    }

    pub(super) fn trial_row(&self, trial_id: u64) -> OpResult<Option<TrialRow>> {
        self.counters.statement();
        Ok(self
            .conn
            .prepare_cached(
                "SELECT trial_id, number, state, datetime_start, datetime_complete FROM trials WHERE trial_id = ?1",
            )?
            .query_row([trial_id as i64], read_row)
            .optional()?)
    }

    pub(super) fn study_exists(&self, study_id: u64) -> OpResult<bool> {
        self.counters.statement();
        Ok(self
            .conn
            .prepare_cached("SELECT 1 FROM studies WHERE study_id = ?1")?
            .query_row([study_id as i64], |_| Ok(()))
            .optional()?
            .is_some())
    }

    pub(super) fn directions(&self, study_id: i64) -> OpResult<Vec<Direction>> {
        self.counters.statement();
        let mut stmt = self.conn.prepare_cached(
            "SELECT direction FROM study_directions WHERE study_id = ?1 ORDER BY objective",
        )?;
        let names = stmt
            .query_map([study_id], |r| r.get::<_, String>(0))?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        Ok(names
            .iter()
            .map(|n| n.parse())
            .collect::<Result<Vec<Direction>>>()?)
    }

    pub(super) fn study_attrs(
        &self,
        table: &str,
        study_id: u64,
    ) -> OpResult<BTreeMap<String, Value>> {
        self.counters.statement();
        let mut stmt = self.conn.prepare_cached(&format!(
            "SELECT \"key\", value_json FROM {table} WHERE study_id = ?1"
        ))?;
        let rows = stmt
            .query_map([study_id as i64], |r| {
                Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?))
            })?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        let mut out = BTreeMap::new();
        for (k, v) in rows {
            let parsed = codec::parse_json(&format!("study attribute `{k}`"), &v)?;
            out.insert(k, parsed);
        }
        Ok(out)
    }

    pub(super) fn set_study_attr(
        &self,
        table: &str,
        study_id: u64,
        key: &str,
        value: &Value,
    ) -> OpResult<()> {
        if !self.study_exists(study_id)? {
            return Err(Error::StudyIdNotFound(study_id).into());
        }
        self.counters.statement();
        self.conn
            .prepare_cached(&format!(
                "INSERT INTO {table} (study_id, \"key\", value_json) VALUES (?1, ?2, ?3) \
                 ON CONFLICT (study_id, \"key\") DO UPDATE SET value_json = excluded.value_json"
            ))?
            .execute(params![study_id as i64, key, codec::python_json(value)])?;
        self.counters.commit();
        Ok(())
    }

    /// Sets a trial attribute if the trial is not finished (one autocommit statement).
    pub(super) fn set_trial_attr(
        &mut self,
        table: &str,
        trial_id: u64,
        key: &str,
        value: &Value,
    ) -> OpResult<()> {
        self.counters.statement();
        let changed = self
            .conn
            .prepare_cached(&format!(
                "INSERT INTO {table} (trial_id, \"key\", value_json) SELECT ?1, ?2, ?3 \
                 WHERE EXISTS (SELECT 1 FROM trials WHERE trial_id = ?1 AND state IN ('RUNNING', 'WAITING')) \
                 ON CONFLICT (trial_id, \"key\") DO UPDATE SET value_json = excluded.value_json"
            ))?
            .execute(params![trial_id as i64, key, codec::python_json(value)])?;
        if changed == 0 {
            return Err(self.not_writable(trial_id)?);
        }
        self.counters.commit();
        Ok(())
    }
}

pub(super) fn read_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<TrialRow> {
    Ok(TrialRow {
        id: r.get(0)?,
        number: r.get(1)?,
        state: r.get(2)?,
        start: r.get(3)?,
        complete: r.get(4)?,
    })
}

/// Inserts a trial's params, values, intermediate values and attributes (inside a transaction).
pub(super) fn insert_details(
    conn: &Connection,
    c: &Counters,
    id: i64,
    t: &FrozenTrial,
) -> OpResult<()> {
    for (name, x) in &t.internal_params {
        let dist = t.distributions.get(name).ok_or_else(|| {
            Error::InvalidOperation(format!("template parameter `{name}` has no distribution"))
        })?;
        c.statement();
        conn.prepare_cached(
            "INSERT INTO trial_params (trial_id, param_name, param_value, distribution_json) VALUES (?1, ?2, ?3, ?4)",
        )?
        .execute(params![id, name, x, dist.to_json()])?;
    }
    if let Some(values) = &t.values {
        insert_values(conn, c, id, values)?;
    }
    for (step, v) in &t.intermediate_values {
        let (x, kind) = codec::encode_float(*v);
        c.statement();
        conn.prepare_cached(
            "INSERT INTO trial_intermediate_values (trial_id, step, intermediate_value, intermediate_value_type) \
             VALUES (?1, ?2, ?3, ?4)",
        )?
        .execute(params![id, *step as i64, x, kind])?;
    }
    for (table, attrs) in [
        ("trial_user_attributes", &t.user_attrs),
        ("trial_system_attributes", &t.system_attrs),
    ] {
        for (k, v) in attrs {
            c.statement();
            conn.prepare_cached(&format!(
                "INSERT INTO {table} (trial_id, \"key\", value_json) VALUES (?1, ?2, ?3)"
            ))?
            .execute(params![id, k, codec::python_json(v)])?;
        }
    }
    Ok(())
}

pub(super) fn insert_values(
    conn: &Connection,
    c: &Counters,
    id: i64,
    values: &[f64],
) -> OpResult<()> {
    for (objective, v) in values.iter().enumerate() {
        let (x, kind) = codec::encode_float(*v);
        c.statement();
        conn.prepare_cached("INSERT INTO trial_values (trial_id, objective, value, value_type) VALUES (?1, ?2, ?3, ?4)")?
            .execute(params![id, objective as i64, x, kind])?;
    }
    Ok(())
}

/// The record [`Storage::create_trial`](crate::storage::Storage::create_trial)
/// stores for `template` (a bare RUNNING trial without one); id and number are
/// filled in by [`insert_trial`].
pub(super) fn new_record(template: Option<&FrozenTrial>, now: DateTime<Utc>) -> FrozenTrial {
    match template {
        Some(tpl) => {
            let mut t = tpl.clone();
            match t.state {
                TrialState::Running => t.datetime_start = Some(now),
                TrialState::Waiting => t.datetime_start = None,
                _ => {}
            }
            if t.state.is_finished() && t.datetime_complete.is_none() {
                t.datetime_complete = Some(now);
            }
            t
        }
        None => {
            let mut t = FrozenTrial::new(0, 0, TrialState::Running);
            t.datetime_start = Some(now);
            t
        }
    }
}

/// Inserts the trial row of `t` with the study's next number; returns its id
/// and number.
///
/// The number is the number of the study's newest trial (largest id) plus
/// one, read through the `(study_id, rowid)` index under the write lock: one
/// index look-up whatever the study's size (a `COUNT(*)` of the study's
/// trials made every insert scan the whole study), and unique and contiguous
/// whatever the number of processes, since numbers only ever grow with ids.
pub(super) fn insert_trial(
    conn: &Connection,
    c: &Counters,
    study_id: u64,
    t: &FrozenTrial,
) -> OpResult<(i64, i64)> {
    let start = t.datetime_start.map(codec::format_datetime);
    let complete = t.datetime_complete.map(codec::format_datetime);
    c.statement();
    conn.prepare_cached(
        "INSERT INTO trials (number, study_id, state, datetime_start, datetime_complete) \
         SELECT COALESCE((SELECT number FROM trials WHERE study_id = ?1 ORDER BY trial_id DESC LIMIT 1) + 1, 0), \
         ?1, ?2, ?3, ?4 \
         WHERE EXISTS (SELECT 1 FROM studies WHERE study_id = ?1) \
         RETURNING trial_id, number",
    )?
    .query_row(
        params![study_id as i64, t.state.as_str(), start, complete],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )
    .optional()?
    .ok_or_else(|| Error::StudyIdNotFound(study_id).into())
}

/// Moves the oldest WAITING trial of the study with an id from `from` on to
/// RUNNING, in one statement; returns its id.
pub(super) fn claim(
    conn: &Connection,
    c: &Counters,
    study_id: u64,
    from: i64,
    now: &str,
) -> OpResult<Option<i64>> {
    c.statement();
    Ok(conn
        .prepare_cached(
            "UPDATE trials SET state = 'RUNNING', datetime_start = ?2 WHERE trial_id = \
             (SELECT trial_id FROM trials WHERE study_id = ?1 AND trial_id >= ?3 AND state = 'WAITING' \
              ORDER BY number LIMIT 1) \
             AND state = 'WAITING' RETURNING trial_id",
        )?
        .query_row(params![study_id as i64, now, from], |r| r.get(0))
        .optional()?)
}

/// Upserts system attributes of a trial (inside a transaction).
pub(super) fn set_system_attrs(
    conn: &Connection,
    c: &Counters,
    trial_id: i64,
    attrs: &[(String, Value)],
) -> OpResult<()> {
    for (k, v) in attrs {
        c.statement();
        conn.prepare_cached(
            "INSERT INTO trial_system_attributes (trial_id, \"key\", value_json) VALUES (?1, ?2, ?3) \
             ON CONFLICT (trial_id, \"key\") DO UPDATE SET value_json = excluded.value_json",
        )?
        .execute(params![trial_id, k, codec::python_json(v)])?;
    }
    Ok(())
}

impl Inner {
    /// The first trial id of the study that may still be WAITING.
    pub(super) fn claim_from(&self, study_id: u64) -> i64 {
        self.claim_from.get(&study_id).copied().unwrap_or(0)
    }

    /// Whether the study may hold a WAITING trial (a lock-free read of the
    /// trials added since the last look), moving the claim mark past every
    /// trial that is not WAITING now and so never will be.
    pub(super) fn may_have_waiting(&mut self, study_id: u64) -> OpResult<bool> {
        let from = self.claim_from(study_id);
        self.counters.statement();
        let (waiting, newest): (Option<i64>, Option<i64>) = self
            .conn
            .prepare_cached(
                "SELECT MIN(CASE WHEN state = 'WAITING' THEN trial_id END), MAX(trial_id) \
                 FROM trials WHERE study_id = ?1 AND trial_id >= ?2",
            )?
            .query_row(params![study_id as i64, from], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })?;
        let mark = match (waiting, newest) {
            (Some(w), _) => w,
            (None, Some(n)) => n + 1,
            (None, None) => from,
        };
        self.claim_from.insert(study_id, mark);
        Ok(waiting.is_some())
    }

    /// The full record of one trial.
    pub(super) fn load_one(&self, trial_id: u64) -> OpResult<FrozenTrial> {
        let row = self
            .trial_row(trial_id)?
            .ok_or(Error::TrialNotFound(trial_id))?;
        Ok(self
            .load(vec![row])?
            .pop()
            .ok_or(Error::TrialNotFound(trial_id))?)
    }
}
