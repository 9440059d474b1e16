//! The suite's fine-tuning spaces (mixed spaces 3 to 8, issue 37 item 7):
//! spaces of the seed study's shape, a transformer classifier fine-tuned on
//! one GPU. Each has a categorical model family (BERT / RoBERTa / DeBERTa,
//! base and large, as one choice or as family x size) whose configurations
//! that do not fit the card's memory are infeasible (weights and optimiser
//! states plus activations growing with batch x length, against a budget in
//! GB), a log-scaled learning rate whose optimum moves with the model and the
//! effective batch, batch size, maximum length, gradient accumulation,
//! dropout, warm-up and weight decay; conditional parameters; and regions
//! that fail (divergence, overflow, positions past the model's limit).
//!
//! They differ where real studies differ: the card (8 to 24 GB), which
//! model wins (large models overfit a small data set unless regularised;
//! long documents need a model without a 512-token limit; a small card needs
//! fp16 and accumulation), what is conditional (size-specific parameters, an
//! optimiser's own parameters, a schedule's), and how the learning rate
//! interacts with the rest (with the effective batch, with the number of
//! epochs, or not at all). Every objective is a deterministic sum of the
//! best model's base error and non-negative penalties, each zero at one
//! feasible configuration, so the stated optimum is the minimum and is
//! reached (`tests/it/sampler_suite.rs` checks both).
//!
//! Written line for line the same in `bench/optuna_suite.py`.

use hpo_core::{Trial, TrialError};

/// An objective's outcome: a value, or the trial's own failure.
type Outcome = Result<f64, TrialError>;

/// The memory a model takes, in GB: weights, gradients and Adam's states
/// (`weights`, scaled by the optimiser in space 5), and activations per 4096
/// tokens of batch x length.
fn footprint(model: &str) -> (f64, f64) {
    match model {
        "distilbert-base" => (0.8, 0.7),
        "bert-base" => (1.5, 1.3),
        "roberta-base" => (1.6, 1.3),
        "deberta-base" => (1.8, 1.6),
        "bert-large" => (4.0, 4.0),
        "roberta-large" => (4.2, 4.0),
        _ => (4.5, 5.0),
    }
}

/// `weights * state + activations * batch * length / 4096 * act_scale`.
fn memory_gb(model: &str, batch: i64, length: i64, state: f64, act_scale: f64) -> f64 {
    let (w, a) = footprint(model);
    w * state + a * (batch * length) as f64 / 4096.0 * act_scale
}

/// The infeasible trial of a configuration that does not fit `budget` GB.
fn out_of_memory(model: &str, batch: i64, length: i64, gb: f64, budget: f64) -> Outcome {
    Err(TrialError::Infeasible(format!(
        "out of memory: {model}, batch {batch}, length {length} needs {gb:.1} GB of {budget} GB"
    )))
}

/// The six models of spaces 3, 5 and 6.
const MODELS: [&str; 6] = [
    "bert-base",
    "roberta-base",
    "deberta-base",
    "bert-large",
    "roberta-large",
    "deberta-large",
];

/// Space 3 (tuning): one choice of six models on a 24 GB card; the learning
/// rate's optimum moves with size and effective batch (square-root rule);
/// too high a rate for the warm-up diverges. Minimum 0.08 (deberta-large,
/// effective batch 64, length >= 384).
pub fn finetune(t: &mut Trial) -> hpo_core::Result<Outcome> {
    let model = t.suggest_categorical("model", &MODELS)?;
    let lr = t.suggest_float_log("lr", 1e-6, 1e-3)?;
    let batch = t.suggest_categorical("batch_size", &[8_i64, 16, 32, 48, 64])?;
    let length = t.suggest_int_step("max_length", 128, 512, 32)?;
    let accumulation = t.suggest_int("accumulation", 1, 8)?;
    let dropout = t.suggest_float("dropout", 0.0, 0.3)?;
    let warmup = t.suggest_float("warmup_ratio", 0.0, 0.2)?;
    let wd = t.suggest_float_log("weight_decay", 1e-5, 1e-1)?;
    let gb = memory_gb(model, batch, length, 1.0, 1.0);
    if gb > 24.0 {
        return Ok(out_of_memory(model, batch, length, gb, 24.0));
    }
    let large = model.ends_with("large");
    let eff = (batch * accumulation) as f64;
    let lr_opt = if large { -5.0 } else { -4.7 } + 0.5 * (eff / 64.0).log10();
    if lr.log10() > lr_opt + 0.8 + 10.0 * warmup {
        return Ok(Err(TrialError::Failed(format!(
            "diverged: lr {lr} with warm-up {warmup}"
        ))));
    }
    let base = match model {
        "bert-base" => 0.15,
        "roberta-base" => 0.13,
        "deberta-base" => 0.12,
        "bert-large" => 0.11,
        "roberta-large" => 0.09,
        _ => 0.08,
    };
    Ok(Ok(base
        + 0.02 * (lr.log10() - lr_opt).powi(2)
        + 0.06 * ((384 - length) as f64 / 384.0).max(0.0)
        + 0.01 * (eff.log2() - 6.0).powi(2)
        + 0.3 * (dropout - 0.1).powi(2)
        + 0.5 * (warmup - 0.06).powi(2)
        + 0.004 * (wd.log10() + 2.0).powi(2)))
}

/// Space 4 (held-out): family and size as two choices on a 16 GB card, with
/// size-specific parameters (layer-wise learning-rate decay for large
/// models, frozen layers for base ones) and a precision (fp16 and bf16 take
/// 60 % of fp32's memory; DeBERTa overflows in fp16 at higher rates); the
/// learning rate does not depend on the batch. Minimum 0.10 (roberta-large, layer decay
/// 0.8).
pub fn family_size(t: &mut Trial) -> hpo_core::Result<Outcome> {
    let family = t.suggest_categorical("family", &["bert", "roberta", "deberta"])?;
    let size = t.suggest_categorical("size", &["base", "large"])?;
    let model = format!("{family}-{size}");
    let large = size == "large";
    let size_term = if large {
        let decay = t.suggest_float("layer_decay", 0.5, 1.0)?;
        0.2 * (decay - 0.8).powi(2)
    } else {
        let frozen = t.suggest_int("freeze_layers", 0, 6)?;
        0.002 * (frozen as f64 - 2.0).powi(2)
    };
    let precision = t.suggest_categorical("precision", &["fp32", "fp16", "bf16"])?;
    let lr = t.suggest_float_log("lr", 1e-6, 1e-3)?;
    let batch = t.suggest_categorical("batch_size", &[8_i64, 16, 32, 64])?;
    let length = t.suggest_int_step("max_length", 64, 512, 64)?;
    let warmup = t.suggest_int_step("warmup_steps", 0, 1000, 100)?;
    let wd = t.suggest_float_log("weight_decay", 1e-5, 1e-1)?;
    let dropout = t.suggest_float("dropout", 0.0, 0.3)?;
    let scale = if precision == "fp32" { 1.0 } else { 0.6 };
    let gb = memory_gb(&model, batch, length, scale, scale);
    if gb > 16.0 {
        return Ok(out_of_memory(&model, batch, length, gb, 16.0));
    }
    if family == "deberta" && precision == "fp16" && lr.log10() > -4.7 {
        return Ok(Err(TrialError::Failed(format!(
            "fp16 overflow (nan loss): {model}, lr {lr}"
        ))));
    }
    if large && lr.log10() > -4.0 {
        return Ok(Err(TrialError::Failed(format!(
            "diverged: {model}, lr {lr}"
        ))));
    }
    let base = match model.as_str() {
        "bert-base" => 0.16,
        "roberta-base" => 0.14,
        "deberta-base" => 0.135,
        "bert-large" => 0.13,
        "roberta-large" => 0.10,
        _ => 0.105,
    };
    let lr_opt = if large { -5.2 } else { -4.5 };
    let precision_term = if precision == "bf16" { 0.004 } else { 0.0 };
    Ok(Ok(base
        + size_term
        + precision_term
        + 0.03 * (lr.log10() - lr_opt).powi(2)
        + 0.05 * ((256 - length) as f64 / 256.0).max(0.0)
        + 0.003 * ((batch as f64).log2() - 4.0).powi(2)
        + 0.1 * ((warmup - 300) as f64 / 1000.0).powi(2)
        + 0.003 * (wd.log10() + 3.0).powi(2)
        + 0.2 * (dropout - 0.15).powi(2)))
}

/// Space 5 (tuning): the optimiser as a choice with its own parameters
/// (AdamW's beta2, SGD's momentum, Adafactor's scaling) on a 12 GB card,
/// where the optimiser's states decide what fits (no large model fits with
/// AdamW) and its learning-rate range differs by orders of magnitude; long
/// inputs (512 tokens) matter. Minimum 0.088 (deberta-large with Adafactor,
/// batch 8 x 4 accumulation, length 512).
pub fn optimizer(t: &mut Trial) -> hpo_core::Result<Outcome> {
    let model = t.suggest_categorical("model", &MODELS)?;
    let optimizer = t.suggest_categorical("optimizer", &["adamw", "adafactor", "sgd"])?;
    let (state, optimizer_term, lr_base) = match optimizer {
        "adamw" => {
            let beta2 = t.suggest_float("adam_beta2", 0.9, 0.999)?;
            let lr_base = if model.ends_with("large") { -5.1 } else { -4.8 };
            (3.0, 2.0 * (beta2 - 0.98).powi(2), lr_base)
        }
        "adafactor" => {
            let scale = t.suggest_categorical("adafactor_scale_parameter", &["true", "false"])?;
            (1.5, if scale == "true" { 0.008 } else { 0.012 }, -3.5)
        }
        _ => {
            let momentum = t.suggest_float("sgd_momentum", 0.0, 0.99)?;
            (2.0, 0.03 + 0.1 * (momentum - 0.9).powi(2), -2.0)
        }
    };
    let lr = t.suggest_float_log("lr", 1e-6, 1e-1)?;
    let batch = t.suggest_categorical("batch_size", &[4_i64, 8, 16, 32])?;
    let length = t.suggest_int_step("max_length", 128, 512, 128)?;
    let accumulation = t.suggest_int("accumulation", 1, 16)?;
    let dropout = t.suggest_float("dropout", 0.0, 0.3)?;
    let wd = t.suggest_float_log("weight_decay", 1e-5, 1e-1)?;
    let gb = memory_gb(model, batch, length, state, 1.0);
    if gb > 12.0 {
        return Ok(out_of_memory(model, batch, length, gb, 12.0));
    }
    let eff = (batch * accumulation) as f64;
    let lr_opt = lr_base + 0.5 * (eff / 32.0).log10();
    if lr.log10() > lr_opt + 1.5 {
        return Ok(Err(TrialError::Failed(format!(
            "diverged: {optimizer}, lr {lr}"
        ))));
    }
    let base = match model {
        "bert-base" => 0.15,
        "roberta-base" => 0.13,
        "deberta-base" => 0.12,
        "bert-large" => 0.11,
        "roberta-large" => 0.09,
        _ => 0.08,
    };
    Ok(Ok(base
        + optimizer_term
        + 0.02 * (lr.log10() - lr_opt).powi(2)
        + 0.08 * ((512 - length) as f64 / 512.0).max(0.0)
        + 0.01 * (eff.log2() - 5.0).powi(2)
        + 0.3 * (dropout - 0.05).powi(2)
        + 0.004 * (wd.log10() + 3.0).powi(2)))
}

/// Space 6 (held-out): long documents on a 24 GB card; BERT and RoBERTa take
/// at most 512 tokens (longer inputs fail), DeBERTa's relative positions take
/// more, and gradient checkpointing trades time (not error) for activation
/// memory. Minimum 0.07 (deberta-large, length >= 768).
pub fn long_docs(t: &mut Trial) -> hpo_core::Result<Outcome> {
    let model = t.suggest_categorical("model", &MODELS)?;
    let lr = t.suggest_float_log("lr", 1e-6, 1e-3)?;
    let batch = t.suggest_categorical("batch_size", &[4_i64, 8, 16, 32])?;
    let length = t.suggest_int_step("max_length", 256, 1024, 128)?;
    let accumulation = t.suggest_int("accumulation", 1, 8)?;
    let checkpointing = t.suggest_categorical("gradient_checkpointing", &["false", "true"])?;
    let dropout = t.suggest_float("dropout", 0.0, 0.3)?;
    let warmup = t.suggest_float("warmup_ratio", 0.0, 0.2)?;
    let wd = t.suggest_float_log("weight_decay", 1e-5, 1e-1)?;
    if !model.starts_with("deberta") && length > 512 {
        return Ok(Err(TrialError::Failed(format!(
            "{model} takes at most 512 positions, not {length}"
        ))));
    }
    let act = if checkpointing == "true" { 0.35 } else { 1.0 };
    let gb = memory_gb(model, batch, length, 1.0, act);
    if gb > 24.0 {
        return Ok(out_of_memory(model, batch, length, gb, 24.0));
    }
    let large = model.ends_with("large");
    if large && lr.log10() > -4.0 + 10.0 * warmup {
        return Ok(Err(TrialError::Failed(format!(
            "diverged: {model}, lr {lr} with warm-up {warmup}"
        ))));
    }
    let base = match model {
        "bert-base" => 0.13,
        "roberta-base" => 0.11,
        "deberta-base" => 0.10,
        "bert-large" => 0.10,
        "roberta-large" => 0.08,
        _ => 0.07,
    };
    let eff = (batch * accumulation) as f64;
    let lr_opt = if large { -5.1 } else { -4.6 } + 0.5 * (eff / 32.0).log10();
    Ok(Ok(base
        + 0.025 * (lr.log10() - lr_opt).powi(2)
        + 0.1 * ((768 - length) as f64 / 768.0).max(0.0)
        + 0.01 * (eff.log2() - 5.0).powi(2)
        + 0.2 * (dropout - 0.15).powi(2)
        + 0.4 * (warmup - 0.1).powi(2)
        + 0.004 * (wd.log10() + 2.0).powi(2)))
}

/// Space 7 (tuning): a small data set on an 8 GB card; family and size as
/// two choices, large models with their own parameters (layer decay,
/// re-initialised top layers) that overfit unless regularised; the best
/// number of epochs depends on the size and moves the learning rate's
/// optimum. Minimum 0.105 (deberta-large, regularised; deberta-base, 0.115,
/// is a second basin).
pub fn small_data(t: &mut Trial) -> hpo_core::Result<Outcome> {
    let family = t.suggest_categorical("family", &["bert", "roberta", "deberta"])?;
    let size = t.suggest_categorical("size", &["base", "large"])?;
    let model = format!("{family}-{size}");
    let large = size == "large";
    let large_term = if large {
        let decay = t.suggest_float("layer_decay", 0.5, 1.0)?;
        let reinit = t.suggest_int("reinit_layers", 0, 4)?;
        0.15 * (decay - 0.7).powi(2) + 0.005 * (reinit as f64 - 1.0).powi(2)
    } else {
        0.0
    };
    let lr = t.suggest_float_log("lr", 1e-6, 1e-3)?;
    let batch = t.suggest_categorical("batch_size", &[8_i64, 16, 32])?;
    let epochs = t.suggest_int("epochs", 1, 10)?;
    let length = t.suggest_int_step("max_length", 64, 256, 32)?;
    let dropout = t.suggest_float("dropout", 0.0, 0.5)?;
    let wd = t.suggest_float_log("weight_decay", 1e-5, 1e-1)?;
    let warmup = t.suggest_float("warmup_ratio", 0.0, 0.3)?;
    let gb = memory_gb(&model, batch, length, 1.0, 1.0);
    if gb > 8.0 {
        return Ok(out_of_memory(&model, batch, length, gb, 8.0));
    }
    if large && warmup < 0.05 && lr.log10() > -4.5 {
        return Ok(Err(TrialError::Failed(format!(
            "training collapsed: {model}, lr {lr} with warm-up {warmup}"
        ))));
    }
    let base = match model.as_str() {
        "bert-base" => 0.14,
        "roberta-base" => 0.12,
        "deberta-base" => 0.115,
        "bert-large" => 0.13,
        "roberta-large" => 0.11,
        _ => 0.105,
    };
    let (epochs_opt, lr_base, dropout_opt) = if large {
        (3.0, -5.0, 0.25)
    } else {
        (6.0, -4.4, 0.1)
    };
    let lr_opt = lr_base - 0.3 * (epochs as f64 / epochs_opt).log2();
    Ok(Ok(base
        + large_term
        + 0.02 * (lr.log10() - lr_opt).powi(2)
        + 0.003 * (epochs as f64 - epochs_opt).powi(2)
        + 0.04 * ((128 - length) as f64 / 128.0).max(0.0)
        + 0.2 * (dropout - dropout_opt).powi(2)
        + 0.003 * (wd.log10() + 1.5).powi(2)
        + 0.2 * (warmup - 0.1).powi(2)
        + 0.004 * ((batch as f64).log2() - 3.0).powi(2)))
}

/// Space 8 (held-out): an 11 GB card with DistilBERT among the models, fp16
/// to fit, a schedule as a choice with its own parameters (warm-up for
/// linear and cosine, cycles for cosine), and a learning rate whose optimum
/// follows the effective batch linearly; large effective batches (128) are
/// best, so accumulation matters. Minimum 0.09 (deberta-large, cosine with
/// half a cycle, effective batch 128, length >= 320).
pub fn small_card(t: &mut Trial) -> hpo_core::Result<Outcome> {
    let model = t.suggest_categorical(
        "model",
        &[
            "distilbert-base",
            "bert-base",
            "roberta-base",
            "deberta-base",
            "roberta-large",
            "deberta-large",
        ],
    )?;
    let scheduler = t.suggest_categorical("scheduler", &["linear", "cosine", "constant"])?;
    let warmup = if scheduler == "constant" {
        None
    } else {
        Some(t.suggest_float("warmup_ratio", 0.0, 0.2)?)
    };
    let schedule_term = match scheduler {
        "linear" => 0.002,
        "cosine" => {
            let cycles = t.suggest_float("num_cycles", 0.5, 3.0)?;
            0.15 * (cycles - 0.5).powi(2)
        }
        _ => 0.01,
    };
    let fp16 = t.suggest_categorical("fp16", &["false", "true"])?;
    let lr = t.suggest_float_log("lr", 1e-6, 1e-2)?;
    let batch = t.suggest_categorical("batch_size", &[4_i64, 8, 16, 32, 64])?;
    let accumulation = t.suggest_int("accumulation", 1, 16)?;
    let length = t.suggest_int_step("max_length", 64, 512, 64)?;
    let dropout = t.suggest_float("dropout", 0.0, 0.3)?;
    let wd = t.suggest_float_log("weight_decay", 1e-5, 1e-1)?;
    let scale = if fp16 == "true" { 0.6 } else { 1.0 };
    let gb = memory_gb(model, batch, length, scale, scale);
    if gb > 11.0 {
        return Ok(out_of_memory(model, batch, length, gb, 11.0));
    }
    let large = model.ends_with("large");
    let eff = (batch * accumulation) as f64;
    let lr_opt = if large { -5.0 } else { -4.5 } + (eff / 32.0).log10();
    let diverges = match warmup {
        None => lr.log10() > -4.0,
        Some(w) => lr.log10() > lr_opt + 1.0 + 10.0 * w,
    };
    if diverges {
        return Ok(Err(TrialError::Failed(format!(
            "diverged: {scheduler} schedule, lr {lr}"
        ))));
    }
    let warmup_term = warmup.map_or(0.0, |w| 0.3 * (w - 0.08).powi(2));
    let base = match model {
        "distilbert-base" => 0.16,
        "bert-base" => 0.14,
        "roberta-base" => 0.125,
        "deberta-base" => 0.12,
        "roberta-large" => 0.095,
        _ => 0.09,
    };
    Ok(Ok(base
        + schedule_term
        + warmup_term
        + 0.02 * (lr.log10() - lr_opt).powi(2)
        + 0.06 * ((320 - length) as f64 / 320.0).max(0.0)
        + 0.008 * (eff.log2() - 7.0).powi(2)
        + 0.25 * (dropout - 0.1).powi(2)
        + 0.004 * (wd.log10() + 2.5).powi(2)))
}
