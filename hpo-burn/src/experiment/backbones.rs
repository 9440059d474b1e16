//! The backbones an experiment trains: pretrained checkpoints (folders the
//! user gives, or all-MiniLM-L6-v2 fetched once into the cache) or presets
//! trained from scratch, as a light and a heavy one for a search that
//! chooses between sizes, each with its task and the data's lengths.

use super::lengths::Lengths;
use crate::cache::{ModelCache, Progress, ALL_MINILM_L6_V2};
use crate::error::{Error, Result};
use crate::model::Preset;
use crate::pretrained::Checkpoint;
use crate::task::TextTask;
use std::path::PathBuf;
use std::sync::Arc;

/// A light and a heavy backbone, each with the task (data and tokenizer)
/// it trains on, and the sequence lengths at a space's percentiles of the
/// training texts' token lengths. Made by
/// [`BackboneArgs::backbones`](super::BackboneArgs::backbones), or built by
/// hand from [`checkpoints`] and [`light_and_heavy`].
#[derive(Debug)]
pub struct Backbones {
    /// The light backbone's task.
    pub light: Arc<TextTask>,
    /// The heavy backbone's task.
    pub heavy: Arc<TextTask>,
    /// Trained from scratch: the presets standing in for light and heavy
    /// (`None` for checkpoints, whose dimensions are their own).
    pub presets: Option<(Preset, Preset)>,
    /// Token lengths at the space's percentiles (of the heavy backbone's
    /// tokenizer, capped by its checkpoint).
    pub lengths: Lengths,
}

impl Backbones {
    /// The heavy backbone's task if `heavy`, else the light one's.
    pub fn task(&self, heavy: bool) -> &Arc<TextTask> {
        if heavy {
            &self.heavy
        } else {
            &self.light
        }
    }

    /// The preset a run from scratch builds for the heavy or the light
    /// backbone; [`Preset::Tiny`] for checkpoints, where it is ignored.
    pub fn preset(&self, heavy: bool) -> Preset {
        match self.presets {
            Some((_, preset)) if heavy => preset,
            Some((preset, _)) => preset,
            None => Preset::Tiny,
        }
    }
}

/// The checkpoint folders in `dirs`, or, when there are none,
/// all-MiniLM-L6-v2 from the cache (fetched on first use, saying so).
pub fn checkpoints(dirs: &[PathBuf]) -> Result<Vec<Checkpoint>> {
    if !dirs.is_empty() {
        return dirs.iter().map(Checkpoint::open).collect();
    }
    let checkpoint = ModelCache::from_env()?.get(&ALL_MINILM_L6_V2, &mut |p| match p {
        Progress::Downloading { command } => {
            println!("fetching {} once: {command}", ALL_MINILM_L6_V2.name)
        }
        Progress::Unpacked { file, bytes } => println!("  unpacked {file} ({bytes} bytes)"),
        Progress::Ready { dir } => println!("  checked and cached in {}", dir.display()),
    })?;
    Ok(vec![checkpoint])
}

/// A light and a heavy backbone: one checkpoint and its first
/// `light_layers` layers, or two checkpoints ordered by their parameter
/// count for a `classes`-way head.
pub fn light_and_heavy(
    checkpoints: &[Checkpoint],
    light_layers: usize,
    classes: usize,
) -> Result<(Checkpoint, Checkpoint)> {
    match checkpoints {
        [one] => Ok((one.clone().truncated(light_layers)?, one.clone())),
        [a, b] if a.num_params(classes) <= b.num_params(classes) => Ok((a.clone(), b.clone())),
        [a, b] => Ok((b.clone(), a.clone())),
        more => Err(Error::Data(format!(
            "{} checkpoints given; a light and a heavy backbone need one (light = its first \
             {light_layers} layers) or two",
            more.len()
        ))),
    }
}
