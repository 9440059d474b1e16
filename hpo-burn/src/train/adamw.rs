//! AdamW with gradient clipping by norm, one fused pass per parameter tensor
//! on the CPU.
//!
//! The same optimizer as burn's `AdamW` with burn's `GradientClipping::Norm`
//! (clipping each parameter tensor's gradient to the norm on its own, as
//! burn does): the same formulas in the same rounding order, the same
//! defaults (`β1 = 0.9`, `β2 = 0.999`, `ε = 1e-5`). burn computes them as a
//! chain of about fifteen whole-tensor ops per parameter, each on one thread
//! into a new buffer; on the CPU backend this module makes one pass for the
//! gradient's norm and one that updates the weights and both moments in
//! place, each split across rayon's threads ([`crate::kernels`]). Other
//! backends (CUDA) run the same formulas as burn tensor ops.
//!
//! Clipping over all parameters at once is the trainer's: it sets the
//! shared [`GradScale`] before each step ([`super::clip`]).

use super::clip::GradScale;
use crate::host::{cast, contiguous, recast};
use crate::kernels::{self, AdamWStep};
use crate::CpuInference;
use burn::optim::{LearningRate, SimpleOptimizer};
use burn::record::Record;
use burn::tensor::backend::Backend;
use burn::tensor::{Tensor, TensorPrimitive};

/// AdamW (decoupled weight decay) with optional per-parameter clipping of
/// the gradient's norm.
#[derive(Debug, Clone)]
pub struct AdamW {
    /// First-moment decay.
    pub beta_1: f32,
    /// Second-moment decay.
    pub beta_2: f32,
    /// Added to the root of the second moment.
    pub epsilon: f32,
    /// Decoupled weight decay (the weights shrink by `lr · weight_decay`
    /// each step).
    pub weight_decay: f32,
    /// Each parameter tensor's gradient is scaled down to this norm when
    /// longer; `None` leaves gradients as they are.
    pub clip_norm: Option<f32>,
    /// Every gradient is multiplied by this factor (1 unless its holder
    /// sets it; the trainer's global clip does), before `clip_norm` applies.
    pub grad_scale: GradScale,
}

impl AdamW {
    /// burn's `AdamWConfig` defaults with the given weight decay and clip.
    pub fn new(weight_decay: f32, clip_norm: Option<f32>) -> Self {
        Self {
            beta_1: 0.9,
            beta_2: 0.999,
            epsilon: 1e-5,
            weight_decay,
            clip_norm,
            grad_scale: GradScale::default(),
        }
    }

    /// The same optimizer with `ε` set to `epsilon`.
    pub fn with_epsilon(self, epsilon: f32) -> Self {
        Self { epsilon, ..self }
    }
}

/// One parameter tensor's optimizer state.
#[derive(Record, Clone)]
pub struct AdamWState<B: Backend, const D: usize> {
    /// Steps taken, this one included.
    pub time: usize,
    /// First moment (running mean of gradients).
    pub moment_1: Tensor<B, D>,
    /// Second moment (running mean of squared gradients).
    pub moment_2: Tensor<B, D>,
}

impl<B: Backend, const D: usize> AdamWState<B, D> {
    /// This step's number and the moments it starts from: the state's, or
    /// zeros shaped like `like` at the first step.
    fn advance(state: Option<Self>, like: &Tensor<B, D>) -> (usize, Tensor<B, D>, Tensor<B, D>) {
        match state {
            Some(s) => (s.time + 1, s.moment_1, s.moment_2),
            None => (1, like.zeros_like(), like.zeros_like()),
        }
    }
}

/// What a step hands from the generic signature to the CPU one and back.
type StepIo<B, const D: usize> = (Tensor<B, D>, Tensor<B, D>, Option<AdamWState<B, D>>);

impl<B: Backend> SimpleOptimizer<B> for AdamW {
    type State<const D: usize> = AdamWState<B, D>;

    fn step<const D: usize>(
        &self,
        lr: LearningRate,
        tensor: Tensor<B, D>,
        grad: Tensor<B, D>,
        state: Option<Self::State<D>>,
    ) -> (Tensor<B, D>, Option<Self::State<D>>) {
        match cast::<StepIo<B, D>, StepIo<CpuInference, D>>((tensor, grad, state)) {
            Ok((tensor, grad, state)) => {
                let (tensor, state) = self.step_cpu(lr, tensor, grad, state);
                (recast(tensor), Some(recast(state)))
            }
            Err((tensor, grad, state)) => {
                let (tensor, state) = self.step_tensors(lr, tensor, grad, state);
                (tensor, Some(state))
            }
        }
    }

    fn to_device<const D: usize>(state: Self::State<D>, device: &B::Device) -> Self::State<D> {
        AdamWState {
            time: state.time,
            moment_1: state.moment_1.to_device(device),
            moment_2: state.moment_2.to_device(device),
        }
    }
}

impl AdamW {
    /// The step's scalars at step `time` (1-based).
    fn scalars(&self, lr: LearningRate, time: usize, grad_scale: f32) -> AdamWStep {
        let t = i32::try_from(time).unwrap_or(i32::MAX);
        AdamWStep {
            lr: lr as f32,
            decay: (1.0 - lr * f64::from(self.weight_decay)) as f32,
            beta_1: self.beta_1,
            beta_2: self.beta_2,
            correction_1: 1.0 - self.beta_1.powi(t),
            correction_2: 1.0 - self.beta_2.powi(t),
            epsilon: self.epsilon,
            grad_scale,
        }
    }

    /// The fused CPU step: the weights and moments are updated in their own
    /// buffers where nothing else holds them (copied first where something
    /// does, such as a kept best model).
    fn step_cpu<const D: usize>(
        &self,
        lr: LearningRate,
        tensor: Tensor<CpuInference, D>,
        grad: Tensor<CpuInference, D>,
        state: Option<AdamWState<CpuInference, D>>,
    ) -> (Tensor<CpuInference, D>, AdamWState<CpuInference, D>) {
        let (time, moment_1, moment_2) = AdamWState::advance(state, &tensor);
        let flex = |t: Tensor<CpuInference, D>| contiguous(t.into_primitive().tensor());
        let back = |t| Tensor::<CpuInference, D>::from_primitive(TensorPrimitive::Float(t));
        let n = tensor.shape().num_elements();
        let (mut param, grad) = (flex(tensor), flex(grad));
        let (mut m, mut v) = (flex(moment_1), flex(moment_2));
        let g = &grad.storage::<f32>()[..n];
        // Clipping's factor, as burn's `GradientClipping::Norm` computes it.
        let shared = self.grad_scale.get();
        let grad_scale = self.clip_norm.map_or(shared, |max| {
            shared * (max / (shared * kernels::l2_norm(g) + f32::MIN_POSITIVE)).min(1.0)
        });
        kernels::adamw_in_place(
            &self.scalars(lr, time, grad_scale),
            &mut param.storage_mut::<f32>()[..n],
            g,
            &mut m.storage_mut::<f32>()[..n],
            &mut v.storage_mut::<f32>()[..n],
        );
        let state = AdamWState {
            time,
            moment_1: back(m),
            moment_2: back(v),
        };
        (back(param), state)
    }

    /// The same step as burn tensor ops, for backends other than the CPU.
    fn step_tensors<B: Backend, const D: usize>(
        &self,
        lr: LearningRate,
        tensor: Tensor<B, D>,
        grad: Tensor<B, D>,
        state: Option<AdamWState<B, D>>,
    ) -> (Tensor<B, D>, AdamWState<B, D>) {
        let shared = self.grad_scale.get();
        let grad = if shared == 1.0 {
            grad
        } else {
            grad.mul_scalar(shared)
        };
        let grad = match self.clip_norm {
            Some(max) => {
                let norm = grad.clone().square().sum().sqrt();
                let scale = norm
                    .add_scalar(f32::MIN_POSITIVE)
                    .recip()
                    .mul_scalar(max)
                    .clamp_max(1.0);
                grad.mul(scale.unsqueeze())
            }
            None => grad,
        };
        let (time, moment_1, moment_2) = AdamWState::advance(state, &grad);
        let s = self.scalars(lr, time, 1.0);
        let moment_1 = moment_1
            .mul_scalar(s.beta_1)
            .add(grad.clone().mul_scalar(1.0 - s.beta_1));
        let moment_2 = moment_2
            .mul_scalar(s.beta_2)
            .add(grad.square().mul_scalar(1.0 - s.beta_2));
        let delta = moment_1.clone().div_scalar(s.correction_1).div(
            moment_2
                .clone()
                .div_scalar(s.correction_2)
                .sqrt()
                .add_scalar(s.epsilon),
        );
        let tensor = tensor.mul_scalar(s.decay) - delta.mul_scalar(s.lr);
        let state = AdamWState {
            time,
            moment_1,
            moment_2,
        };
        (tensor, state)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Cpu;
    use burn::grad_clipping::GradientClippingConfig;
    use burn::module::Param;
    use burn::nn::{Linear, LinearConfig};
    use burn::optim::adaptor::OptimizerAdaptor;
    use burn::optim::{AdamWConfig, GradientsParams, Optimizer};
    use burn::tensor::{Distribution, TensorData};

    fn values<B: Backend, const D: usize>(t: Tensor<B, D>) -> Vec<f32> {
        t.into_data().convert::<f32>().to_vec().expect("f32 data")
    }

    /// Three steps of a linear layer under `optim`, from the same weights and
    /// inputs; returns the weights after each step.
    fn train<O: Optimizer<Linear<Cpu>, Cpu>>(mut optim: O, init: &Linear<Cpu>) -> Vec<Vec<f32>> {
        let device = Default::default();
        let mut model = init.clone();
        let mut seen = Vec::new();
        for step in 0..3 {
            let x = Tensor::<Cpu, 2>::from_data(
                TensorData::new(
                    (0..64)
                        .map(|i| ((i * 37 + step * 11) % 17) as f32 / 4.0 - 2.0)
                        .collect(),
                    [8, 8],
                ),
                &device,
            );
            // A large loss so that clipping bites.
            let loss = model.forward(x).powf_scalar(2.0).sum().mul_scalar(50.0);
            let grads = GradientsParams::from_grads(loss.backward(), &model);
            model = optim.step(1e-2, model, grads);
            seen.push(values(model.weight.val()));
        }
        seen
    }

    #[test]
    fn matches_burns_adamw_with_norm_clipping() {
        let device = Default::default();
        // Weights set explicitly: burn initialises parameters lazily, and
        // clones of an uninitialised layer would draw different ones.
        let mut init = LinearConfig::new(8, 4).init::<Cpu>(&device);
        init.weight = Param::from_tensor(Tensor::from_data(
            TensorData::new(
                (0..32).map(|i| (i % 7) as f32 / 10.0 - 0.3).collect(),
                [8, 4],
            ),
            &device,
        ));
        init.bias = None;
        let mut runs = Vec::new();
        for clip in [None, Some(1.0)] {
            let mut burns = AdamWConfig::new().with_weight_decay(0.05);
            if let Some(c) = clip {
                burns = burns.with_grad_clipping(Some(GradientClippingConfig::Norm(c)));
            }
            let want = train(burns.init::<Cpu, Linear<Cpu>>(), &init);
            let ours: OptimizerAdaptor<AdamW, Linear<Cpu>, Cpu> = AdamW::new(0.05, clip).into();
            let got = train(ours, &init);
            for (step, (w, g)) in want.iter().zip(&got).enumerate() {
                for (a, b) in w.iter().zip(g) {
                    assert!(
                        (a - b).abs() < 1e-6,
                        "clip {clip:?}, step {step}: {b} against {a}"
                    );
                }
            }
            runs.push(got);
        }
        assert_ne!(
            runs[0], runs[1],
            "the clip must bite for the test to cover it"
        );
    }

    #[test]
    fn the_fused_cpu_step_equals_the_tensor_ops_step() {
        let device = Default::default();
        for (clip, scale) in [(Some(0.5), 1.0), (None, 0.3), (Some(0.5), 0.3)] {
            let optim = AdamW::new(0.01, clip);
            optim.grad_scale.set(scale);
            let p = Tensor::<CpuInference, 2>::random(
                [33, 70],
                Distribution::Normal(0.0, 1.0),
                &device,
            );
            let (mut a, mut b) = ((p.clone(), None), (p, None));
            for _ in 0..4 {
                let g = Tensor::<CpuInference, 2>::random(
                    [33, 70],
                    Distribution::Normal(0.0, 1.0),
                    &device,
                );
                let (t, s) = optim.step_cpu(3e-3, a.0, g.clone(), a.1);
                a = (t, Some(s));
                let (t, s) = optim.step_tensors(3e-3, b.0, g, b.1);
                b = (t, Some(s));
            }
            for (x, y) in values(a.0).iter().zip(values(b.0)) {
                assert!((x - y).abs() < 1e-6, "{clip:?} {scale}: {x} against {y}");
            }
        }
    }

    #[test]
    fn the_shared_scale_multiplies_every_gradient() {
        let device = Default::default();
        let p = Tensor::<CpuInference, 2>::random([9, 13], Distribution::Normal(0.0, 1.0), &device);
        let g = Tensor::<CpuInference, 2>::random([9, 13], Distribution::Normal(0.0, 1.0), &device);
        // Adam is invariant to a constant gradient scale but for ε: a large
        // ε makes the scale visible in the weights.
        let run = |scale: f32, pre: f32| {
            let optim = AdamW::new(0.01, None).with_epsilon(1.0);
            optim.grad_scale.set(scale);
            let mut a = (p.clone(), None);
            for _ in 0..3 {
                let (t, s) = optim.step_cpu(1e-2, a.0, g.clone().mul_scalar(pre), a.1);
                a = (t, Some(s));
            }
            values(a.0)
        };
        let (scaled, prescaled, plain) = (run(0.25, 1.0), run(1.0, 0.25), run(1.0, 1.0));
        for (x, y) in scaled.iter().zip(&prescaled) {
            assert!((x - y).abs() < 1e-6, "{x} against {y}");
        }
        assert!(
            scaled.iter().zip(&plain).any(|(x, y)| (x - y).abs() > 1e-4),
            "the scale must change the step for the test to cover it"
        );
    }
}
