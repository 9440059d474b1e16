//! Statements shared by the operations: loading trial records, inserting a
//! trial under the study's advisory lock, inserting a trial's details, and
//! explaining why a write changed nothing.

use super::conn::{id32, Db, OpError, OpResult};
use super::schema::LOCK_CLASS;
use crate::distribution::Distribution;
use crate::error::Error;
use crate::storage::codec;
use crate::trial::{FrozenTrial, TrialState};
use chrono::{DateTime, NaiveDateTime, Utc};
use postgres::{GenericClient, Row};
use std::collections::{BTreeMap, HashMap};

/// The columns of a `trials` row, in [`TRIAL_COLUMNS`] order.
pub(super) const TRIAL_COLUMNS: &str =
    "trial_id, number, state::text, datetime_start, datetime_complete";

/// One row of the `trials` table.
pub(super) struct TrialRow {
    pub(super) id: i32,
    pub(super) number: i64,
    pub(super) state: TrialState,
    pub(super) start: Option<DateTime<Utc>>,
    pub(super) complete: Option<DateTime<Utc>>,
}

/// Reads a row selected with [`TRIAL_COLUMNS`].
pub(super) fn trial_row(r: &Row) -> OpResult<TrialRow> {
    let state: String = r.try_get(2)?;
    let number: Option<i32> = r.try_get(1)?;
    Ok(TrialRow {
        id: r.try_get(0)?,
        number: number.map_or(-1, i64::from),
        state: state.parse()?,
        start: r
            .try_get::<_, Option<NaiveDateTime>>(3)?
            .map(|t| t.and_utc()),
        complete: r
            .try_get::<_, Option<NaiveDateTime>>(4)?
            .map(|t| t.and_utc()),
    })
}

/// Why a write to `trial_id` changed nothing: the trial is missing or finished.
pub(super) fn not_writable<C: GenericClient>(db: &mut Db<'_, C>, trial_id: u64) -> OpError {
    let id = match id32(trial_id) {
        Ok(id) => id,
        Err(e) => return OpError::Hpo(e),
    };
    match db.query_opt(
        "SELECT number, state::text FROM trials WHERE trial_id = $1",
        &[&id],
    ) {
        Err(e) => e,
        Ok(None) => OpError::Hpo(Error::TrialNotFound(trial_id)),
        Ok(Some(r)) => {
            let number: Option<i32> = r.get(0);
            let state: String = r.get(1);
            match state.parse::<TrialState>() {
                Ok(state) => OpError::Hpo(Error::TrialFinished {
                    number: number.map_or(0, |n| n.max(0) as u64),
                    state,
                }),
                Err(e) => OpError::Hpo(e),
            }
        }
    }
}

/// Full records of the given trial rows: one statement for all their details.
pub(super) fn load<C: GenericClient>(
    db: &mut Db<'_, C>,
    rows: Vec<TrialRow>,
) -> OpResult<Vec<FrozenTrial>> {
    if rows.is_empty() {
        return Ok(Vec::new());
    }
    let mut trials: HashMap<i32, FrozenTrial> = HashMap::with_capacity(rows.len());
    let mut order = Vec::with_capacity(rows.len());
    for r in rows {
        let mut t = FrozenTrial::new(r.id as u64, r.number.max(0) as u64, r.state);
        t.datetime_start = r.start;
        t.datetime_complete = r.complete;
        order.push(r.id);
        trials.insert(r.id, t);
    }
    db.stats.trials_loaded += order.len() as u64;
    let details = db.query(
        "SELECT trial_id, 0, param_name::text, param_value, distribution_json FROM trial_params WHERE trial_id = ANY($1) \
         UNION ALL SELECT trial_id, 1, key::text, NULL::float8, value_json FROM trial_user_attributes WHERE trial_id = ANY($1) \
         UNION ALL SELECT trial_id, 2, key::text, NULL::float8, value_json FROM trial_system_attributes WHERE trial_id = ANY($1) \
         UNION ALL SELECT trial_id, 3, objective::text, value, value_type::text FROM trial_values WHERE trial_id = ANY($1) \
         UNION ALL SELECT trial_id, 4, step::text, intermediate_value, intermediate_value_type::text \
             FROM trial_intermediate_values WHERE trial_id = ANY($1)",
        &[&order],
    )?;
    let mut values: HashMap<i32, BTreeMap<i64, f64>> = HashMap::new();
    for r in details {
        let id: i32 = r.try_get(0)?;
        let kind: i32 = r.try_get(1)?;
        let Some(t) = trials.get_mut(&id) else {
            continue;
        };
        let name: String = r.try_get::<_, Option<String>>(2)?.unwrap_or_default();
        let real: Option<f64> = r.try_get(3)?;
        let text: String = r.try_get::<_, Option<String>>(4)?.unwrap_or_default();
        let number = |what: &str| -> OpResult<i64> {
            name.parse().map_err(|_| {
                OpError::Hpo(Error::Parse {
                    what: format!("{what} of trial {}", t.number),
                    reason: format!("`{name}` is not an integer"),
                    source: None,
                })
            })
        };
        match kind {
            0 => {
                let dist = Distribution::from_json(&text)?;
                t.internal_params
                    .insert(name.clone(), real.unwrap_or(f64::NAN));
                t.distributions.insert(name, dist);
            }
            1 | 2 => {
                let v =
                    codec::parse_json(&format!("attribute `{name}` of trial {}", t.number), &text)?;
                let map = if kind == 1 {
                    &mut t.user_attrs
                } else {
                    &mut t.system_attrs
                };
                map.insert(name, v);
            }
            3 => {
                let objective = number("objective")?;
                values
                    .entry(id)
                    .or_default()
                    .insert(objective, codec::decode_float(real, &text)?);
            }
            _ => {
                let step = number("step")?;
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

/// The full record of one trial.
pub(super) fn load_one<C: GenericClient>(
    db: &mut Db<'_, C>,
    trial_id: u64,
) -> OpResult<FrozenTrial> {
    let id = id32(trial_id)?;
    let row = db
        .query_opt(
            &format!("SELECT {TRIAL_COLUMNS} FROM trials WHERE trial_id = $1"),
            &[&id],
        )?
        .ok_or(Error::TrialNotFound(trial_id))?;
    let row = trial_row(&row)?;
    Ok(load(db, vec![row])?
        .pop()
        .ok_or(Error::TrialNotFound(trial_id))?)
}

/// Inserts the trial row of a copy of `template` (a bare RUNNING trial
/// without one) with the study's next number, under the study's advisory
/// lock (inside the caller's transaction), and its details; returns the
/// stored record.
///
/// A RUNNING trial starts now, a WAITING one has no start, a finished one
/// keeps its times (completion now if it has none); times are the server's.
pub(super) fn insert_trial<C: GenericClient>(
    db: &mut Db<'_, C>,
    study_id: u64,
    template: Option<&FrozenTrial>,
) -> OpResult<FrozenTrial> {
    let sid = id32(study_id)?;
    let mut t = match template {
        Some(tpl) => tpl.clone(),
        None => FrozenTrial::new(0, 0, TrialState::Running),
    };
    let start_now = t.state == TrialState::Running;
    let start = match t.state {
        TrialState::Running | TrialState::Waiting => None,
        _ => t.datetime_start.map(|d| d.naive_utc()),
    };
    let complete_now = t.state.is_finished() && t.datetime_complete.is_none();
    let complete = if t.state.is_finished() {
        t.datetime_complete.map(|d| d.naive_utc())
    } else {
        None
    };
    db.execute("SELECT pg_advisory_xact_lock($1, $2)", &[&LOCK_CLASS, &sid])?;
    let row = db
        .query_opt(
            "INSERT INTO trials (number, study_id, state, datetime_start, datetime_complete) \
             SELECT COALESCE((SELECT MAX(number) FROM trials WHERE study_id = $1), -1) + 1, $1, \
             $2::text::trialstate, \
             CASE WHEN $5 THEN timezone('UTC', now()) ELSE $3 END, \
             CASE WHEN $6 THEN timezone('UTC', now()) ELSE $4 END \
             WHERE EXISTS (SELECT 1 FROM studies WHERE study_id = $1) \
             RETURNING trial_id, number, datetime_start, datetime_complete",
            &[
                &sid,
                &t.state.as_str(),
                &start,
                &complete,
                &start_now,
                &complete_now,
            ],
        )?
        .ok_or_else(|| Error::StudyIdNotFound(study_id))?;
    let id: i32 = row.try_get(0)?;
    let number: i32 = row.try_get(1)?;
    t.id = id as u64;
    t.number = number as u64;
    t.datetime_start = row
        .try_get::<_, Option<NaiveDateTime>>(2)?
        .map(|d| d.and_utc());
    t.datetime_complete = row
        .try_get::<_, Option<NaiveDateTime>>(3)?
        .map(|d| d.and_utc());
    if template.is_some() {
        insert_details(db, id, &t)?;
    }
    Ok(t)
}

/// Inserts a trial's params, values, intermediate values and attributes:
/// one statement whatever their number.
fn insert_details<C: GenericClient>(db: &mut Db<'_, C>, id: i32, t: &FrozenTrial) -> OpResult<()> {
    let empty = t.internal_params.is_empty()
        && t.values.is_none()
        && t.intermediate_values.is_empty()
        && t.user_attrs.is_empty()
        && t.system_attrs.is_empty();
    if empty {
        return Ok(());
    }
    let mut p_names = Vec::new();
    let mut p_values = Vec::new();
    let mut p_dists = Vec::new();
    for (name, x) in &t.internal_params {
        let dist = t.distributions.get(name).ok_or_else(|| {
            Error::InvalidOperation(format!("template parameter `{name}` has no distribution"))
        })?;
        p_names.push(name.as_str());
        p_values.push(*x);
        p_dists.push(dist.to_json());
    }
    let (v_values, v_types): (Vec<Option<f64>>, Vec<&str>) = t
        .values
        .iter()
        .flatten()
        .map(|v| codec::encode_float(*v))
        .unzip();
    let mut i_steps = Vec::new();
    let mut i_values = Vec::new();
    let mut i_types = Vec::new();
    for (step, v) in &t.intermediate_values {
        let step = i32::try_from(*step).map_err(|_| {
            Error::InvalidOperation(format!("step {step} is beyond the schema's 32-bit INTEGER"))
        })?;
        let (x, kind) = codec::encode_float(*v);
        i_steps.push(step);
        i_values.push(x);
        i_types.push(kind);
    }
    let attrs = |m: &BTreeMap<String, serde_json::Value>| -> (Vec<String>, Vec<String>) {
        m.iter()
            .map(|(k, v)| (k.clone(), codec::python_json(v)))
            .unzip()
    };
    let (u_keys, u_json) = attrs(&t.user_attrs);
    let (s_keys, s_json) = attrs(&t.system_attrs);
    db.execute(
        "WITH p AS (INSERT INTO trial_params (trial_id, param_name, param_value, distribution_json) \
             SELECT $1::int4, n, x, d FROM unnest($2::text[], $3::float8[], $4::text[]) AS q(n, x, d)), \
         v AS (INSERT INTO trial_values (trial_id, objective, value, value_type) \
             SELECT $1::int4, (o - 1)::int4, x, k::trialvaluetype \
             FROM unnest($5::float8[], $6::text[]) WITH ORDINALITY AS q(x, k, o)), \
         i AS (INSERT INTO trial_intermediate_values (trial_id, step, intermediate_value, intermediate_value_type) \
             SELECT $1::int4, s, x, k::trialintermediatevaluetype \
             FROM unnest($7::int4[], $8::float8[], $9::text[]) AS q(s, x, k)), \
         ua AS (INSERT INTO trial_user_attributes (trial_id, key, value_json) \
             SELECT $1::int4, k, j FROM unnest($10::text[], $11::text[]) AS q(k, j)), \
         sa AS (INSERT INTO trial_system_attributes (trial_id, key, value_json) \
             SELECT $1::int4, k, j FROM unnest($12::text[], $13::text[]) AS q(k, j)) \
         SELECT 1",
        &[
            &id, &p_names, &p_values, &p_dists, &v_values, &v_types, &i_steps, &i_values,
            &i_types, &u_keys, &u_json, &s_keys, &s_json,
        ],
    )?;
    Ok(())
}

/// Upserts system attributes of a trial: one statement.
pub(super) fn set_system_attrs<C: GenericClient>(
    db: &mut Db<'_, C>,
    trial_id: i32,
    attrs: &[(String, serde_json::Value)],
) -> OpResult<()> {
    if attrs.is_empty() {
        return Ok(());
    }
    // One row per key (the last value wins): an upsert may not touch a row twice.
    let last: BTreeMap<&str, &serde_json::Value> =
        attrs.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let (keys, json): (Vec<&str>, Vec<String>) = last
        .into_iter()
        .map(|(k, v)| (k, codec::python_json(v)))
        .unzip();
    db.execute(
        "INSERT INTO trial_system_attributes (trial_id, key, value_json) \
         SELECT $1, k, j FROM unnest($2::text[], $3::text[]) AS q(k, j) \
         ON CONFLICT (trial_id, key) DO UPDATE SET value_json = excluded.value_json",
        &[&trial_id, &keys, &json],
    )?;
    Ok(())
}
