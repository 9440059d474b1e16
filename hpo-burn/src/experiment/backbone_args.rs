//! The model flags of a text-classification experiment, as a clap argument
//! group the experiment flattens into its own, and the [`Backbones`] they
//! make.

use super::backbones::{checkpoints, light_and_heavy, Backbones};
use super::device::DeviceArg;
use super::lengths::Lengths;
use super::splits::Splits;
use crate::error::{Error, Result};
use crate::model::Preset;
use crate::task::{TextTask, DEFAULT_TRAINED_VOCAB};
use std::path::PathBuf;
use std::sync::Arc;

/// `--pretrained`, `--light-layers`, `--from-scratch` and `--device`: what
/// a study trains and where.
///
/// ```
/// use clap::Parser;
/// use hpo_burn::experiment::{BackboneArgs, DeviceArg};
///
/// #[derive(Parser)]
/// struct Args {
///     #[command(flatten)]
///     model: BackboneArgs,
/// }
/// let args = Args::try_parse_from(["x", "--device", "cuda:1", "--light-layers", "4"]).unwrap();
/// assert_eq!(args.model.device, DeviceArg::Cuda(1));
/// assert!(Args::try_parse_from(["x", "--from-scratch", "--pretrained", "dir"]).is_err());
/// ```
#[derive(clap::Args, Debug, Clone, PartialEq)]
pub struct BackboneArgs {
    /// A local Hugging Face BERT, RoBERTa or DeBERTa-v3 checkpoint folder
    /// (config.json, tokenizer.json or vocab.txt, model.safetensors)
    /// instead of the fetched all-MiniLM-L6-v2. Give it twice for two
    /// backbones: the one with more parameters is the heavy one.
    #[arg(long)]
    pub pretrained: Vec<PathBuf>,
    /// With one checkpoint, the light backbone is its first this-many
    /// layers.
    #[arg(long, default_value_t = 3)]
    pub light_layers: usize,
    /// Train small BERT-style models from scratch (a WordPiece vocabulary
    /// trained on the data; no checkpoint, no download).
    #[arg(long, conflicts_with = "pretrained")]
    pub from_scratch: bool,
    /// `cpu`, or `cuda:N` (needs the `cuda` feature).
    #[arg(long, default_value = "cpu")]
    pub device: DeviceArg,
}

impl BackboneArgs {
    /// The light and heavy backbones on `splits`' training and validation
    /// data, with the sequence lengths at `percentiles` of its training
    /// texts (the choices of the space's parameter `length_param`, named in
    /// the start-up line that says what they came to). Fine-tuning: the `--pretrained` checkpoints, or else
    /// all-MiniLM-L6-v2 from the cache (fetched once), light being the
    /// checkpoint's first `--light-layers` layers when there is one.
    /// `--from-scratch`: one trained vocabulary, with the tiny and mini
    /// presets on the CPU (mini costs ~4x tiny per token, as BERT-large
    /// does BERT-base) and base and large on a GPU. The coordinator says
    /// what it chose (worker processes make the same silently).
    pub fn backbones(
        &self,
        splits: &Splits,
        length_param: &str,
        percentiles: &[u32],
    ) -> Result<Backbones> {
        let (train, valid) = (splits.train.clone(), splits.valid.clone());
        let say = !hpo_core::executor::is_worker();
        let backbones = if self.from_scratch {
            let presets = if self.device.is_cpu() {
                (Preset::Tiny, Preset::Mini)
            } else {
                (Preset::Base, Preset::Large)
            };
            let task = Arc::new(TextTask::new(train, valid, None, DEFAULT_TRAINED_VOCAB)?);
            Backbones {
                lengths: Lengths::for_task(&task, percentiles)?,
                light: Arc::clone(&task),
                heavy: task,
                presets: Some(presets),
            }
        } else {
            let classes = train.classes.len();
            let checkpoints = checkpoints(&self.pretrained).map_err(|e| {
                Error::Data(format!(
                    "no pretrained checkpoint: {e}; fix that, or pass `--pretrained DIR` (a \
                     local BERT, RoBERTa or DeBERTa-v3 checkpoint folder), or `--from-scratch`"
                ))
            })?;
            let (light, heavy) = light_and_heavy(&checkpoints, self.light_layers, classes)?;
            for (role, c) in [("light", &light), ("heavy", &heavy)]
                .into_iter()
                .filter(|_| say)
            {
                println!(
                    "{role} backbone: {} ({} layers, {:.1}M parameters)",
                    c.name(),
                    c.config.num_hidden_layers,
                    c.num_params(classes) as f64 / 1e6
                );
            }
            let heavy = Arc::new(TextTask::new(train.clone(), valid.clone(), Some(heavy), 0)?);
            Backbones {
                light: Arc::new(TextTask::new(train, valid, Some(light), 0)?),
                lengths: Lengths::for_task(&heavy, percentiles)?,
                heavy,
                presets: None,
            }
        };
        if say {
            println!("lengths: {}", backbones.lengths.describe(length_param));
        }
        Ok(backbones)
    }
}
