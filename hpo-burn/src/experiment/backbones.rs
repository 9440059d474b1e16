//! The pretrained checkpoints an experiment fine-tunes: folders the user
//! gives, or all-MiniLM-L6-v2 fetched once into the cache; and a light and
//! a heavy backbone made of them for a search that chooses between sizes.

use crate::cache::{ModelCache, Progress, ALL_MINILM_L6_V2};
use crate::error::{Error, Result};
use crate::pretrained::Checkpoint;
use std::path::PathBuf;

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
