//! Dropout whose masks the CPU backend draws in bulk, on every core.
//!
//! burn's `Dropout` asks the backend for a Bernoulli tensor, which the CPU
//! backend fills one element at a time through a generic distribution
//! sampler over a ChaCha generator, then multiplies twice (by the mask,
//! then by `1 / keep`), each on one thread. On the `cpu_training` benchmark
//! that took about a tenth of the CPU time (the book's performance page).
//! Here, on the CPU backend, each mask comes from a counter-based SplitMix64
//! stream ([`crate::kernels::DropoutMask`]) whose seed comes from the
//! backend's own seeded generator (so a run stays reproducible under
//! `Backend::seed`); it is drawn and applied in one threaded pass
//! ([`super::cpu_ops::dropout`]), and drawn again in the backward pass
//! rather than kept. Other backends (CUDA) keep burn's dropout, which draws
//! the mask on the device.
//!
//! Activation recomputation ([`crate::train::recompute`]) runs each encoder
//! layer twice, and both runs must drop the same elements:
//! [`record_masks`] keeps the seed of every mask a run draws (on the
//! inference backend, with dropout on), and [`replay_masks`] applies them
//! again, in order. On the CPU a seed is the whole mask; on other backends
//! the device's generator is reseeded with it before burn's Bernoulli draw,
//! which draws the same mask again as long as no other thread of the
//! process draws from that generator in between (one trial per worker
//! process, as the executor runs GPU trials).

use crate::kernels::DropoutMask;
use burn::module::Module;
use burn::tensor::backend::Backend;
use burn::tensor::{Distribution, Int, Tensor};

/// Dropout with probability `prob` of zeroing an element in training
/// (autodiff) mode, the identity otherwise.
#[derive(Module, Clone, Debug)]
pub struct Dropout {
    /// Probability of zeroing an element.
    pub prob: f64,
}

impl Dropout {
    /// Dropout with probability `prob` (in `[0, 1)`).
    pub fn new(prob: f64) -> Self {
        Self { prob }
    }

    /// Zeroes each element with probability `prob` and scales the others by
    /// `1 / (1 - prob)`, when autodiff is enabled or masks are being
    /// recorded ([`record_masks`]); returns `input` otherwise. Under
    /// [`replay_masks`] it applies the recorded masks, in order.
    pub fn forward<B: Backend, const D: usize>(&self, input: Tensor<B, D>) -> Tensor<B, D> {
        let device = input.device();
        let taped = tape::active();
        if self.prob <= 0.0 || !(B::ad_enabled(&device) || taped == Some(tape::Mode::Record)) {
            return input;
        }
        if taped.is_none() && !crate::host::is_cpu::<B>() {
            return burn::nn::DropoutConfig::new(self.prob)
                .init()
                .forward(input);
        }
        let seed = match tape::replayed() {
            Some(seed) => seed,
            None => {
                let seed = draw_seed::<B>(&device);
                tape::push(seed);
                seed
            }
        };
        if crate::host::is_cpu::<B>() {
            return super::cpu_ops::dropout(input, DropoutMask::new(self.prob, seed));
        }
        // A device draws its masks itself: reseeding its generator with the
        // recorded seed draws the same mask again (burn's dropout, written
        // out because burn's is the identity outside autodiff).
        B::seed(&device, seed);
        let keep = 1.0 - self.prob;
        let mask = input.random_like(Distribution::Bernoulli(keep));
        input * mask * (1.0 / keep)
    }
}

/// A mask's seed: two 30-bit draws from the backend's seeded generator
/// (the bound must fit the backend's 32-bit ints). Reading them back is a
/// host copy on burn-flex, which has no execution errors to report; the
/// conversion to i64 cannot fail for ints, so the empty fallback is never
/// taken.
fn draw_seed<B: Backend>(device: &B::Device) -> u64 {
    let draws: Vec<i64> = Tensor::<B, 1, Int>::random(
        [2],
        Distribution::Uniform(0.0, f64::from(1u32 << 30)),
        device,
    )
    .into_data()
    .convert::<i64>()
    .into_vec()
    .unwrap_or_default();
    draws.iter().fold(0u64, |acc, &d| (acc << 30) ^ d as u64)
}

/// The dropout masks a computation drew, in order: what
/// [`replay_masks`] applies again.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MaskTape {
    seeds: Vec<u64>,
}

impl MaskTape {
    /// A tape of the masks of `seeds`, in order (a run replayed from it
    /// draws nothing from the backend's generator while seeds last).
    pub fn new(seeds: Vec<u64>) -> Self {
        MaskTape { seeds }
    }

    /// The seeds, in order.
    pub fn seeds(&self) -> &[u64] {
        &self.seeds
    }
}

/// Runs `f` with dropout on even outside autodiff (an inference backend
/// computing a training forward pass), recording the seed of every mask
/// drawn on this thread; a recompute of the same ops under
/// [`replay_masks`] then drops exactly the same elements. Activation
/// recomputation ([`crate::train`]) runs each layer this way. Inside a
/// [`replay_masks`], the masks recorded are the replayed ones.
pub fn record_masks<T>(f: impl FnOnce() -> T) -> (T, MaskTape) {
    // An enclosing replay hands the seeds it has left to this run.
    let (outer, source) = match tape::swap(None) {
        Some(tape::State::Replay(rest)) => (None, Some(rest)),
        other => (other, None),
    };
    let replaying = source.is_some();
    tape::swap(Some(tape::State::Record {
        seeds: Vec::new(),
        source: source.unwrap_or_default(),
    }));
    let out = f();
    let (seeds, rest) = match tape::swap(None) {
        Some(tape::State::Record { seeds, source }) => (seeds, source),
        _ => (Vec::new(), Vec::new()),
    };
    // An enclosing replay goes on after the seeds this run took from it.
    tape::swap(if replaying {
        Some(tape::State::Replay(rest))
    } else {
        outer
    });
    (out, MaskTape { seeds })
}

/// Runs `f` applying `tape`'s masks, in order, to its dropouts on this
/// thread; a dropout past the tape's end draws a fresh mask.
pub fn replay_masks<T>(tape: &MaskTape, f: impl FnOnce() -> T) -> T {
    let previous = tape::swap(Some(tape::State::Replay(
        tape.seeds.iter().rev().copied().collect(),
    )));
    let out = f();
    tape::swap(previous);
    out
}

/// This thread's tape, if one is running.
mod tape {
    use std::cell::RefCell;

    /// A running tape.
    #[derive(Debug)]
    pub(super) enum State {
        /// Seeds drawn so far, and what an enclosing replay has left to
        /// give (the next one last), drawn from before the generator.
        Record { seeds: Vec<u64>, source: Vec<u64> },
        /// Seeds still to replay, the next one last.
        Replay(Vec<u64>),
    }

    /// What a running tape does.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub(super) enum Mode {
        Record,
        Replay,
    }

    thread_local! {
        static TAPE: RefCell<Option<State>> = const { RefCell::new(None) };
    }

    /// Puts `state` (or no tape) in place, returning the tape it replaces.
    pub(super) fn swap(state: Option<State>) -> Option<State> {
        TAPE.with(|t| std::mem::replace(&mut *t.borrow_mut(), state))
    }

    pub(super) fn active() -> Option<Mode> {
        TAPE.with(|t| match &*t.borrow() {
            Some(State::Record { .. }) => Some(Mode::Record),
            Some(State::Replay(_)) => Some(Mode::Replay),
            None => None,
        })
    }

    /// The next replayed seed: under a replaying tape, or a recording one
    /// inside a replay, while seeds are left.
    pub(super) fn replayed() -> Option<u64> {
        TAPE.with(|t| match &mut *t.borrow_mut() {
            Some(State::Replay(seeds)) => seeds.pop(),
            Some(State::Record { seeds, source }) => {
                let seed = source.pop()?;
                seeds.push(seed);
                Some(seed)
            }
            None => None,
        })
    }

    /// Records `seed` under a recording tape.
    pub(super) fn push(seed: u64) {
        TAPE.with(|t| {
            if let Some(State::Record { seeds, .. }) = &mut *t.borrow_mut() {
                seeds.push(seed);
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Cpu, CpuInference};

    #[test]
    fn training_drops_reproducibly_under_the_backend_seed_and_inference_does_not() {
        let device = Default::default();
        let dropout = Dropout::new(0.25);
        let draw = |seed| {
            Cpu::seed(&device, seed);
            let x = Tensor::<Cpu, 2>::ones([64, 64], &device);
            dropout
                .forward(x)
                .into_data()
                .to_vec::<f32>()
                .expect("f32 data")
        };
        let (a, b, c) = (draw(3), draw(3), draw(4));
        assert_eq!(a, b);
        assert_ne!(a, c);
        let dropped = a.iter().filter(|&&v| v == 0.0).count() as f64 / a.len() as f64;
        assert!((dropped - 0.25).abs() < 0.05, "dropped share {dropped}");
        assert!(a.iter().all(|&v| v == 0.0 || (v - 1.0 / 0.75).abs() < 1e-6));

        let x = Tensor::<CpuInference, 2>::ones([8, 8], &device);
        let out: Vec<f32> = dropout.forward(x).into_data().to_vec().expect("f32 data");
        assert!(out.iter().all(|&v| v == 1.0));
    }

    #[test]
    fn recorded_masks_replay_and_a_record_inside_a_replay_takes_the_replayed_ones() {
        let device = Default::default();
        let dropout = Dropout::new(0.5);
        let ones = || Tensor::<CpuInference, 2>::ones([16, 16], &device);
        let values =
            |t: Tensor<CpuInference, 2>| -> Vec<f32> { t.into_data().to_vec().expect("f32 data") };
        // Recorded on the inference backend, where dropout is otherwise off.
        let (first, tape) = record_masks(|| values(dropout.forward(ones())));
        assert_eq!(tape.seeds().len(), 1);
        assert!(first.contains(&0.0) && first.contains(&2.0));
        // Replayed under autodiff: the same elements dropped.
        let again: Vec<f32> = replay_masks(&tape, || {
            dropout
                .forward(Tensor::<Cpu, 2>::ones([16, 16], &device))
                .into_data()
                .to_vec()
                .expect("f32 data")
        });
        assert_eq!(first, again);
        // A record inside a replay records what it replays, and the replay
        // goes on after it.
        let outer = MaskTape::new(vec![7, 8, 9]);
        let (inner, next) = replay_masks(&outer, || {
            let (_, inner) = record_masks(|| {
                dropout.forward(ones());
                dropout.forward(ones())
            });
            let (_, next) = record_masks(|| dropout.forward(ones()));
            (inner, next)
        });
        assert_eq!(inner.seeds(), &[7, 8]);
        assert_eq!(next.seeds(), &[9]);
    }
}
