//! Ops that hpo computes itself on the CPU backend, each with its backward
//! pass; every other backend keeps burn's.
//!
//! burn-flex runs element-wise ops and reductions on one thread, each into a
//! new buffer, and copies transposed views element by element; burn's
//! autodiff composes layer norm from about eight such ops forward and
//! fifteen backward, and its exact GELU calls libm's `erff` and `expf` per
//! element. On [`crate::Cpu`] (training) and [`crate::CpuInference`]
//! (evaluation), [`linear`], [`embed`], [`gelu`], [`layer_norm`], [`split_heads`],
//! [`merge_heads`], [`attention_probs`] and [`dropout`] run [`crate::kernels`]' threaded kernels instead, each
//! registered with burn's autodiff graph as one op whose backward pass is
//! one fused kernel too. On any other backend (CUDA) they are burn's ops.
//!
//! Which backend a tensor lives on is a type, known at compile time but not
//! expressible as a bound the model could carry without every user naming
//! it; the dispatch compares types at run time ([`std::any::Any`]), which
//! costs a pointer comparison per call.

use crate::host::{cast, contiguous, recast};
use crate::kernels::{self, DropoutMask};
use crate::{Cpu, CpuInference};
use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::checkpoint::strategy::NoCheckpointing;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{unary, Backward, Ops, OpsKind};
use burn::nn::{Embedding, LayerNorm, Linear};
use burn::tensor::activation::softmax;
use burn::tensor::backend::Backend;
use burn::tensor::ops::FloatTensor;
use burn::tensor::ops::FloatTensorOps;
use burn::tensor::{Bool, DType, Int, Tensor, TensorData, TensorPrimitive};
use burn_flex::{Flex, FlexTensor, Layout};

/// The exact GELU, `x · Φ(x)`: hpo's fused, threaded kernels on the CPU
/// backend, burn's `gelu` elsewhere.
pub fn gelu<B: Backend, const D: usize>(x: Tensor<B, D>) -> Tensor<B, D> {
    dispatch(
        x,
        gelu_autodiff,
        gelu_inference,
        burn::tensor::activation::gelu,
    )
}

/// `x` through `train` on [`Cpu`], through `infer` on [`CpuInference`],
/// through `other` on any other backend.
fn dispatch<B: Backend, const DI: usize, const DO: usize>(
    x: Tensor<B, DI>,
    train: impl FnOnce(Tensor<Cpu, DI>) -> Tensor<Cpu, DO>,
    infer: impl FnOnce(Tensor<CpuInference, DI>) -> Tensor<CpuInference, DO>,
    other: impl FnOnce(Tensor<B, DI>) -> Tensor<B, DO>,
) -> Tensor<B, DO> {
    let x = match cast::<_, Tensor<Cpu, DI>>(x) {
        Ok(x) => return recast(train(x)),
        Err(x) => x,
    };
    match cast::<_, Tensor<CpuInference, DI>>(x) {
        Ok(x) => recast(infer(x)),
        Err(x) => other(x),
    }
}

/// GELU of a flex tensor into a new buffer.
fn gelu_forward(x: &FlexTensor) -> FlexTensor {
    let shape = x.layout().shape().clone();
    let src: &[f32] = x.storage();
    let n = shape.num_elements();
    let mut out = vec![0.0f32; n];
    kernels::gelu_into(&src[..n], &mut out);
    flex_tensor(out, shape)
}

/// `grad · gelu'(x)`, written over `grad`'s buffer when nothing else holds it.
fn gelu_backward(x: &FlexTensor, grad: FlexTensor) -> FlexTensor {
    let mut grad = contiguous(grad);
    let n = grad.layout().num_elements();
    let src: &[f32] = x.storage();
    kernels::gelu_backward_in_place(&src[..n], &mut grad.storage_mut::<f32>()[..n]);
    grad
}

fn gelu_inference<const D: usize>(x: Tensor<CpuInference, D>) -> Tensor<CpuInference, D> {
    let x = contiguous(x.into_primitive().tensor());
    Tensor::from_primitive(TensorPrimitive::Float(gelu_forward(&x)))
}

/// The GELU node of the autodiff graph: its state is the input, from which
/// the backward pass computes the derivative.
#[derive(Debug)]
struct GeluBackward;

impl Backward<Flex, 1> for GeluBackward {
    type State = FlexTensor;

    fn backward(self, ops: Ops<FlexTensor, 1>, grads: &mut Gradients, _: &mut Checkpointer) {
        let x = ops.state;
        unary::<Flex, _>(ops.parents, ops.node, grads, |grad| gelu_backward(&x, grad));
    }
}

fn gelu_autodiff<const D: usize>(x: Tensor<Cpu, D>) -> Tensor<Cpu, D> {
    let mut x = x.into_primitive().tensor();
    x.primitive = contiguous(x.primitive);
    let y = gelu_forward(&x.primitive);
    record(GeluBackward, [&x], x.primitive.clone(), y)
}

/// `layer`'s affine map `x · W + b` of `[rows, in]` inputs. On the CPU
/// backend the product is burn-flex's (gemm, threaded), the bias is added
/// and its gradient summed by threaded kernels, and the input's gradient
/// multiplies by a transposed copy of `W` made on every core: given `W`'s
/// transposed view, as burn's backward pass does, gemm first repacks the
/// whole of `W` on the calling thread, which left the other core idle (the
/// book's performance page). burn's `Linear` elsewhere, and for a layer
/// without a bias.
pub fn linear<B: Backend>(layer: &Linear<B>, x: Tensor<B, 2>) -> Tensor<B, 2> {
    let Some(bias) = &layer.bias else {
        return layer.forward(x);
    };
    let args = (x, layer.weight.val(), bias.val());
    let args = match cast::<_, (Tensor<Cpu, 2>, Tensor<Cpu, 2>, Tensor<Cpu, 1>)>(args) {
        Ok((x, w, b)) => return recast(linear_autodiff(x, w, b)),
        Err(args) => args,
    };
    match cast::<
        _,
        (
            Tensor<CpuInference, 2>,
            Tensor<CpuInference, 2>,
            Tensor<CpuInference, 1>,
        ),
    >(args)
    {
        Ok((x, w, b)) => {
            let [x, w, b] = [x.into_primitive(), w.into_primitive(), b.into_primitive()]
                .map(|t| contiguous(t.tensor()));
            recast(Tensor::<CpuInference, 2>::from_primitive(
                TensorPrimitive::Float(linear_forward(x, &w, &b)),
            ))
        }
        Err((x, _, _)) => layer.forward(x),
    }
}

/// `x · w + b` on contiguous flex tensors.
fn linear_forward(x: FlexTensor, w: &FlexTensor, b: &FlexTensor) -> FlexTensor {
    let mut y = contiguous(Flex::float_matmul(x, w.clone()));
    let n = y.layout().num_elements();
    let width = b.layout().num_elements();
    kernels::add_row_in_place(
        &mut y.storage_mut::<f32>()[..n],
        &b.storage::<f32>()[..width],
    );
    y
}

/// The linear layer's node: its state is the input and the weight.
#[derive(Debug)]
struct LinearBackward;

impl Backward<Flex, 3> for LinearBackward {
    type State = (FlexTensor, FlexTensor);

    fn backward(self, ops: Ops<Self::State, 3>, grads: &mut Gradients, _: &mut Checkpointer) {
        let (x, w) = ops.state;
        let [x_node, w_node, b_node] = ops.parents;
        let dy = contiguous(grads.consume::<Flex>(&ops.node));
        let [d_in, d_out] = [0, 1].map(|i| w.layout().shape()[i]);
        if let Some(node) = b_node {
            let rows = dy.layout().num_elements();
            let sums = kernels::column_sums(&dy.storage::<f32>()[..rows], d_out);
            grads.register::<Flex>(
                node.id,
                flex_tensor(sums, burn::tensor::Shape::new([d_out])),
            );
        }
        if let Some(node) = w_node {
            let dw = Flex::float_matmul(Flex::float_swap_dims(x, 0, 1), dy.clone());
            grads.register::<Flex>(node.id, dw);
        }
        if let Some(node) = x_node {
            let mut wt = vec![0.0f32; d_in * d_out];
            kernels::transpose_into(&w.storage::<f32>()[..d_in * d_out], d_in, d_out, &mut wt);
            let wt = flex_tensor(wt, burn::tensor::Shape::new([d_out, d_in]));
            grads.register::<Flex>(node.id, Flex::float_matmul(dy, wt));
        }
    }
}

fn linear_autodiff(x: Tensor<Cpu, 2>, w: Tensor<Cpu, 2>, b: Tensor<Cpu, 1>) -> Tensor<Cpu, 2> {
    let [x, w, b] = [x.into_primitive(), w.into_primitive(), b.into_primitive()].map(|t| {
        let mut t = t.tensor();
        t.primitive = contiguous(t.primitive);
        t
    });
    let y = linear_forward(x.primitive.clone(), &w.primitive, &b.primitive);
    let state = (x.primitive.clone(), w.primitive.clone());
    record(LinearBackward, [&x, &w, &b], state, y)
}

/// BERT's embeddings before their layer norm: `token[input_ids] +
/// position[0..len] + segment[segment_ids]`, `[batch, len, width]` from
/// `[batch, len]` ids. On the CPU backend one threaded pass forward, and a
/// backward pass that zeroes each table's gradient on every core and adds
/// the rows in (burn-flex zeroes the `[vocab, width]` gradient on one thread,
/// copies it whole to align it and again to add the rows, three times a
/// step); burn's three lookups and two additions elsewhere, or when an id is
/// outside its table (burn's lookup then reports it).
pub fn embed<B: Backend>(
    token: &Embedding<B>,
    position: &Embedding<B>,
    segment: &Embedding<B>,
    input_ids: Tensor<B, 2, Int>,
    segment_ids: Tensor<B, 2, Int>,
) -> Tensor<B, 3> {
    let [batch, len] = input_ids.dims();
    let burns = |input_ids: Tensor<B, 2, Int>, segment_ids| {
        let positions = Tensor::<B, 1, Int>::arange(0..len as i64, &input_ids.device())
            .reshape([1, len])
            .repeat_dim(0, batch);
        token.forward(input_ids) + position.forward(positions) + segment.forward(segment_ids)
    };
    if !crate::host::is_cpu::<B>() {
        return burns(input_ids, segment_ids);
    }
    let table_rows = [token, position, segment].map(|e| e.weight.dims()[0]);
    let width = token.weight.dims()[1];
    let host = |t: &Tensor<B, 2, Int>, below: usize| -> Option<Vec<usize>> {
        let v = t
            .clone()
            .into_data()
            .convert::<i64>()
            .to_vec::<i64>()
            .ok()?;
        v.into_iter()
            .map(|i| usize::try_from(i).ok().filter(|&i| i < below))
            .collect()
    };
    let (Some(ids), Some(segments)) = (
        host(&input_ids, table_rows[0]),
        host(&segment_ids, table_rows[2]),
    ) else {
        return burns(input_ids, segment_ids);
    };
    if len > table_rows[1]
        || [position, segment]
            .iter()
            .any(|e| e.weight.dims()[1] != width)
    {
        return burns(input_ids, segment_ids);
    }
    let lookup = Lookup {
        ids,
        segments,
        batch,
        len,
        width,
        table_rows,
    };
    let tables = (
        token.weight.val(),
        position.weight.val(),
        segment.weight.val(),
    );
    let tables = match cast::<_, (Tensor<Cpu, 2>, Tensor<Cpu, 2>, Tensor<Cpu, 2>)>(tables) {
        Ok(t) => return recast(embed_autodiff(t, lookup)),
        Err(t) => t,
    };
    match cast::<
        _,
        (
            Tensor<CpuInference, 2>,
            Tensor<CpuInference, 2>,
            Tensor<CpuInference, 2>,
        ),
    >(tables)
    {
        Ok((t, p, s)) => {
            let [t, p, s] = [t, p, s].map(|x| contiguous(x.into_primitive().tensor()));
            recast(Tensor::<CpuInference, 3>::from_primitive(
                TensorPrimitive::Float(embed_forward([&t, &p, &s], &lookup)),
            ))
        }
        Err(_) => burns(input_ids, segment_ids),
    }
}

/// The ids of one [`embed`] call, checked against the tables' sizes.
#[derive(Debug, Clone)]
struct Lookup {
    ids: Vec<usize>,
    segments: Vec<usize>,
    batch: usize,
    len: usize,
    width: usize,
    /// Rows of the token, position and segment tables.
    table_rows: [usize; 3],
}

/// The summed embeddings of contiguous flex tables into a new buffer.
fn embed_forward(tables: [&FlexTensor; 3], lookup: &Lookup) -> FlexTensor {
    let Lookup {
        batch, len, width, ..
    } = *lookup;
    let mut out = vec![0.0f32; batch * len * width];
    let [t, p, s] = tables;
    let rows = lookup.table_rows;
    kernels::embed_forward(
        [
            &t.storage::<f32>()[..rows[0] * width],
            &p.storage::<f32>()[..rows[1] * width],
            &s.storage::<f32>()[..rows[2] * width],
        ],
        &lookup.ids,
        &lookup.segments,
        len,
        width,
        &mut out,
    );
    flex_tensor(out, burn::tensor::Shape::new([batch, len, width]))
}

/// The embeddings' node: its state is the ids, from which the backward pass
/// adds each output row's gradient into the rows it was looked up from.
#[derive(Debug)]
struct EmbedBackward;

impl Backward<Flex, 3> for EmbedBackward {
    type State = Lookup;

    fn backward(self, ops: Ops<Lookup, 3>, grads: &mut Gradients, _: &mut Checkpointer) {
        let lookup = ops.state;
        let dy = contiguous(grads.consume::<Flex>(&ops.node));
        let width = lookup.width;
        let dy = &dy.storage::<f32>()[..lookup.ids.len() * width];
        let len = lookup.len.max(1);
        let rows: [Box<dyn Iterator<Item = usize> + '_>; 3] = [
            Box::new(lookup.ids.iter().copied()),
            Box::new((0..lookup.ids.len()).map(|t| t % len)),
            Box::new(lookup.segments.iter().copied()),
        ];
        for ((node, rows), n) in ops.parents.into_iter().zip(rows).zip(lookup.table_rows) {
            if let Some(node) = node {
                let mut table = kernels::zeros(n * width);
                kernels::scatter_add_rows(&mut table, rows, dy, width);
                grads.register::<Flex>(
                    node.id,
                    flex_tensor(table, burn::tensor::Shape::new([n, width])),
                );
            }
        }
    }
}

fn embed_autodiff(
    tables: (Tensor<Cpu, 2>, Tensor<Cpu, 2>, Tensor<Cpu, 2>),
    lookup: Lookup,
) -> Tensor<Cpu, 3> {
    let [t, p, s] = [tables.0, tables.1, tables.2].map(|x| {
        let mut x = x.into_primitive().tensor();
        x.primitive = contiguous(x.primitive);
        x
    });
    let y = embed_forward([&t.primitive, &p.primitive, &s.primitive], &lookup);
    record(EmbedBackward, [&t, &p, &s], lookup, y)
}

/// The value burn's path sets masked (padding) attention scores to before
/// the softmax; its exponential is zero in f32, as for burn's attention.
const MASKED_SCORE: f32 = -1.0e4;

/// Attention probabilities: `softmax(scores / divisor)` over the keys (last
/// dimension) of `[batch, heads, len, len]` scores, keys where `mask_pad`
/// (`[batch, 1, 1, len]`) is true (padding) getting probability zero. On the
/// CPU backend one threaded kernel forward and one backward (burn computes it
/// as a division, a mask fill that first copies the broadcast scores
/// element by element, and a softmax of four passes, each on one thread);
/// burn's ops elsewhere. The two agree except for a row whose keys are all
/// padding, which has no probabilities here (zeros) and uniform ones in
/// burn's; a batch never has such a row (the first token is never padding).
pub fn attention_probs<B: Backend>(
    scores: Tensor<B, 4>,
    mask_pad: Tensor<B, 4, Bool>,
    divisor: f32,
) -> Tensor<B, 4> {
    let burns = |scores: Tensor<B, 4>, mask_pad| {
        softmax(
            scores.div_scalar(divisor).mask_fill(mask_pad, MASKED_SCORE),
            3,
        )
    };
    if !crate::host::is_cpu::<B>() {
        return burns(scores, mask_pad);
    }
    let [batch, heads, len_q, len_k] = scores.dims();
    let masked = match mask_pad.clone().into_data().to_vec::<bool>() {
        Ok(m) if m.len() == batch * len_k => m,
        _ => return burns(scores, mask_pad),
    };
    let shape = SoftmaxShape {
        len_k,
        rows_per_sequence: heads * len_q,
        divisor,
    };
    let for_inference = masked.clone();
    dispatch(
        scores,
        |s| attention_probs_autodiff(s, &masked, shape),
        |s| {
            let s = contiguous(s.into_primitive().tensor());
            Tensor::from_primitive(TensorPrimitive::Float(attention_probs_forward(
                &s,
                &for_inference,
                shape,
            )))
        },
        |s| burns(s, mask_pad),
    )
}

/// How [`attention_probs`]' scores split into rows and sequences.
#[derive(Debug, Clone, Copy)]
struct SoftmaxShape {
    len_k: usize,
    rows_per_sequence: usize,
    divisor: f32,
}

/// The probabilities of contiguous flex scores into a new buffer.
fn attention_probs_forward(
    scores: &FlexTensor,
    masked: &[bool],
    shape: SoftmaxShape,
) -> FlexTensor {
    let dims = scores.layout().shape().clone();
    let n = dims.num_elements();
    let mut out = vec![0.0f32; n];
    kernels::masked_softmax_forward(
        &scores.storage::<f32>()[..n],
        masked,
        shape.len_k,
        shape.rows_per_sequence,
        shape.divisor,
        &mut out,
    );
    flex_tensor(out, dims)
}

/// The masked softmax's node: its state is the probabilities it computed.
#[derive(Debug)]
struct AttentionProbsBackward;

impl Backward<Flex, 1> for AttentionProbsBackward {
    type State = (FlexTensor, SoftmaxShape);

    fn backward(self, ops: Ops<Self::State, 1>, grads: &mut Gradients, _: &mut Checkpointer) {
        let (probs, shape) = ops.state;
        unary::<Flex, _>(ops.parents, ops.node, grads, |grad| {
            let mut grad = contiguous(grad);
            let n = grad.layout().num_elements();
            kernels::masked_softmax_backward_in_place(
                &mut grad.storage_mut::<f32>()[..n],
                &probs.storage::<f32>()[..n],
                shape.len_k,
                shape.divisor,
            );
            grad
        });
    }
}

fn attention_probs_autodiff(
    scores: Tensor<Cpu, 4>,
    masked: &[bool],
    shape: SoftmaxShape,
) -> Tensor<Cpu, 4> {
    let mut s = scores.into_primitive().tensor();
    s.primitive = contiguous(s.primitive);
    let probs = attention_probs_forward(&s.primitive, masked, shape);
    record(AttentionProbsBackward, [&s], (probs.clone(), shape), probs)
}

/// `x` with `mask`'s dropout applied (see [`kernels::DropoutMask`]): on the
/// CPU backend one threaded pass forward and one backward, the mask drawn
/// again in the backward pass instead of kept; elsewhere the mask is made
/// on the host and multiplied in with burn's ops. hpo's [`super::Dropout`]
/// calls it on the CPU only (a GPU draws burn's masks on the device).
pub fn dropout<B: Backend, const D: usize>(x: Tensor<B, D>, mask: DropoutMask) -> Tensor<B, D> {
    dispatch(
        x,
        |x| dropout_autodiff(x, mask),
        |x| {
            let x = contiguous(x.into_primitive().tensor());
            Tensor::from_primitive(TensorPrimitive::Float(dropout_forward(&x, mask)))
        },
        |x| {
            let shape = x.shape();
            let mut factors = vec![1.0f32; shape.num_elements()];
            mask.apply_in_place(&mut factors);
            let device = x.device();
            x * Tensor::from_data(TensorData::new(factors, shape), &device)
        },
    )
}

/// `x · mask` of a contiguous flex tensor into a new buffer.
fn dropout_forward(x: &FlexTensor, mask: DropoutMask) -> FlexTensor {
    let shape = x.layout().shape().clone();
    let n = shape.num_elements();
    let mut out = vec![0.0f32; n];
    mask.apply_into(&x.storage::<f32>()[..n], &mut out);
    flex_tensor(out, shape)
}

/// The dropout node of the autodiff graph: its state is the mask's seed and
/// threshold, from which the backward pass draws the mask again.
#[derive(Debug)]
struct DropoutBackward;

impl Backward<Flex, 1> for DropoutBackward {
    type State = DropoutMask;

    fn backward(self, ops: Ops<DropoutMask, 1>, grads: &mut Gradients, _: &mut Checkpointer) {
        let mask = ops.state;
        unary::<Flex, _>(ops.parents, ops.node, grads, |grad| {
            let mut grad = contiguous(grad);
            let n = grad.layout().num_elements();
            mask.apply_in_place(&mut grad.storage_mut::<f32>()[..n]);
            grad
        });
    }
}

fn dropout_autodiff<const D: usize>(x: Tensor<Cpu, D>, mask: DropoutMask) -> Tensor<Cpu, D> {
    let mut x = x.into_primitive().tensor();
    x.primitive = contiguous(x.primitive);
    let y = dropout_forward(&x.primitive, mask);
    record(DropoutBackward, [&x], mask, y)
}

/// `output`, computed by `op` from `parents`, as a tensor of the autodiff
/// graph: with `state` kept for `op`'s backward pass when any parent is
/// tracked, as a leaf otherwise.
fn record<O: Backward<Flex, N>, const N: usize, const D: usize>(
    op: O,
    parents: [&FloatTensor<Cpu>; N],
    state: O::State,
    output: FlexTensor,
) -> Tensor<Cpu, D> {
    let out = match op
        .prepare::<NoCheckpointing>(parents.map(|p| p.node.clone()))
        .compute_bound()
        .stateful()
    {
        OpsKind::Tracked(prep) => prep.finish(state, output),
        OpsKind::UnTracked(prep) => prep.finish(output),
    };
    Tensor::from_primitive(TensorPrimitive::Float(out))
}

/// Layer norm over the last dimension with `norm`'s weights and `eps`:
/// hpo's fused, threaded kernels on the CPU backend (burn's autodiff backend
/// computes it as about eight ops forward and fifteen backward, each over
/// the whole tensor on one thread), burn's `LayerNorm` elsewhere. `eps` is
/// the one `norm` was made with (burn keeps it private).
pub fn layer_norm<B: Backend, const D: usize>(
    norm: &LayerNorm<B>,
    eps: f64,
    x: Tensor<B, D>,
) -> Tensor<B, D> {
    let Some(beta) = &norm.beta else {
        return norm.forward(x);
    };
    let args = (x, norm.gamma.val(), beta.val());
    let args = match cast::<_, (Tensor<Cpu, D>, Tensor<Cpu, 1>, Tensor<Cpu, 1>)>(args) {
        Ok((x, gamma, beta)) => return recast(layer_norm_autodiff(x, gamma, beta, eps)),
        Err(args) => args,
    };
    match cast::<
        _,
        (
            Tensor<CpuInference, D>,
            Tensor<CpuInference, 1>,
            Tensor<CpuInference, 1>,
        ),
    >(args)
    {
        Ok((x, gamma, beta)) => {
            let [x, gamma, beta] = [
                x.into_primitive(),
                gamma.into_primitive(),
                beta.into_primitive(),
            ]
            .map(|t| contiguous(t.tensor()));
            let (y, _, _) = layer_norm_forward(&x, &gamma, &beta, eps);
            recast(Tensor::<CpuInference, D>::from_primitive(
                TensorPrimitive::Float(y),
            ))
        }
        Err((x, _, _)) => norm.forward(x),
    }
}

/// A contiguous `f32` flex tensor of `shape` holding `values`.
fn flex_tensor(values: Vec<f32>, shape: burn::tensor::Shape) -> FlexTensor {
    FlexTensor::new(
        burn::tensor::Bytes::from_elems(values),
        Layout::contiguous(shape),
        DType::F32,
    )
}

/// Layer norm forward on contiguous flex tensors: `(y, x̂, 1/σ per row)`.
fn layer_norm_forward(
    x: &FlexTensor,
    gamma: &FlexTensor,
    beta: &FlexTensor,
    eps: f64,
) -> (FlexTensor, FlexTensor, FlexTensor) {
    let shape = x.layout().shape().clone();
    let n = shape.num_elements();
    let width = gamma.layout().num_elements();
    let rows = n / width.max(1);
    let (mut y, mut normalized, mut rstd) = (vec![0.0f32; n], vec![0.0f32; n], vec![0.0f32; rows]);
    kernels::layer_norm_forward(
        &x.storage::<f32>()[..n],
        &gamma.storage::<f32>()[..width],
        &beta.storage::<f32>()[..width],
        eps as f32,
        &mut y,
        &mut normalized,
        &mut rstd,
    );
    (
        flex_tensor(y, shape.clone()),
        flex_tensor(normalized, shape),
        flex_tensor(rstd, burn::tensor::Shape::new([rows])),
    )
}

/// The layer norm node of the autodiff graph: its state is `x̂`, each row's
/// `1/σ` and `gamma`.
#[derive(Debug)]
struct LayerNormBackward;

impl Backward<Flex, 3> for LayerNormBackward {
    type State = (FlexTensor, FlexTensor, FlexTensor);

    fn backward(self, ops: Ops<Self::State, 3>, grads: &mut Gradients, _: &mut Checkpointer) {
        let (normalized, rstd, gamma) = ops.state;
        let [x_node, gamma_node, beta_node] = ops.parents;
        let mut dy = contiguous(grads.consume::<Flex>(&ops.node));
        let n = normalized.layout().num_elements();
        let width = gamma.layout().num_elements();
        let rows = rstd.layout().num_elements();
        let (dgamma, dbeta) = kernels::layer_norm_backward_in_place(
            &mut dy.storage_mut::<f32>()[..n],
            &normalized.storage::<f32>()[..n],
            &rstd.storage::<f32>()[..rows],
            &gamma.storage::<f32>()[..width],
        );
        let row = || burn::tensor::Shape::new([width]);
        if let Some(node) = x_node {
            grads.register::<Flex>(node.id, dy);
        }
        if let Some(node) = gamma_node {
            grads.register::<Flex>(node.id, flex_tensor(dgamma, row()));
        }
        if let Some(node) = beta_node {
            grads.register::<Flex>(node.id, flex_tensor(dbeta, row()));
        }
    }
}

fn layer_norm_autodiff<const D: usize>(
    x: Tensor<Cpu, D>,
    gamma: Tensor<Cpu, 1>,
    beta: Tensor<Cpu, 1>,
    eps: f64,
) -> Tensor<Cpu, D> {
    let [x, gamma, beta] = [
        x.into_primitive(),
        gamma.into_primitive(),
        beta.into_primitive(),
    ]
    .map(|t| {
        let mut t = t.tensor();
        t.primitive = contiguous(t.primitive);
        t
    });
    let (y, normalized, rstd) =
        layer_norm_forward(&x.primitive, &gamma.primitive, &beta.primitive, eps);
    let state = (normalized, rstd, gamma.primitive.clone());
    record(LayerNormBackward, [&x, &gamma, &beta], state, y)
}

/// `[batch · len, heads · d]` hidden states as `[batch, heads, len, d]`
/// attention heads, contiguous: one threaded copy (and one back in the
/// backward pass) on the CPU backend, where burn-flex copies a transposed
/// view element by element through a strided iterator; a reshape and a
/// transposed view elsewhere.
pub fn split_heads<B: Backend>(
    x: Tensor<B, 2>,
    batch: usize,
    len: usize,
    heads: usize,
) -> Tensor<B, 4> {
    let d = x.dims()[1] / heads.max(1);
    let dims = [batch, len, heads, d];
    dispatch(
        x,
        |x| permute_autodiff(x, dims, true),
        |x| permute_inference(x, dims, true),
        |x| x.reshape(dims).swap_dims(1, 2),
    )
}

/// The inverse of [`split_heads`]: `[batch, heads, len, d]` back to
/// `[batch · len, heads · d]`.
pub fn merge_heads<B: Backend>(x: Tensor<B, 4>) -> Tensor<B, 2> {
    let [batch, heads, len, d] = x.dims();
    let dims = [batch, len, heads, d];
    dispatch(
        x,
        |x| permute_autodiff(x, dims, false),
        |x| permute_inference(x, dims, false),
        |x| x.swap_dims(1, 2).reshape([batch * len, heads * d]),
    )
}

/// The permuted copy of `x` (see [`kernels::permute_heads`]), shaped as the
/// other layout.
fn permute_heads(x: &FlexTensor, dims: [usize; 4], to_heads: bool) -> FlexTensor {
    let [batch, len, heads, d] = dims;
    let n = batch * len * heads * d;
    let x = contiguous(x.clone());
    let mut out = vec![0.0f32; n];
    kernels::permute_heads(&x.storage::<f32>()[..n], &mut out, dims, to_heads);
    let shape = if to_heads {
        burn::tensor::Shape::new([batch, heads, len, d])
    } else {
        burn::tensor::Shape::new([batch * len, heads * d])
    };
    flex_tensor(out, shape)
}

fn permute_inference<const DI: usize, const DO: usize>(
    x: Tensor<CpuInference, DI>,
    dims: [usize; 4],
    to_heads: bool,
) -> Tensor<CpuInference, DO> {
    let x = x.into_primitive().tensor();
    Tensor::from_primitive(TensorPrimitive::Float(permute_heads(&x, dims, to_heads)))
}

/// The head permutation's node: its backward pass is the inverse copy.
#[derive(Debug)]
struct PermuteHeadsBackward;

impl Backward<Flex, 1> for PermuteHeadsBackward {
    /// `[batch, len, heads, d]` and the forward direction.
    type State = ([usize; 4], bool);

    fn backward(self, ops: Ops<Self::State, 1>, grads: &mut Gradients, _: &mut Checkpointer) {
        let (dims, to_heads) = ops.state;
        unary::<Flex, _>(ops.parents, ops.node, grads, |grad| {
            permute_heads(&grad, dims, !to_heads)
        });
    }
}

fn permute_autodiff<const DI: usize, const DO: usize>(
    x: Tensor<Cpu, DI>,
    dims: [usize; 4],
    to_heads: bool,
) -> Tensor<Cpu, DO> {
    let x = x.into_primitive().tensor();
    let y = permute_heads(&x.primitive, dims, to_heads);
    record(PermuteHeadsBackward, [&x], (dims, to_heads), y)
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::module::AutodiffModule;
    use burn::tensor::{Distribution, TensorData};

    fn values<B: Backend, const D: usize>(t: Tensor<B, D>) -> Vec<f32> {
        t.into_data().convert::<f32>().to_vec().expect("f32 data")
    }

    fn close(a: &[f32], b: &[f32], tol: f32) {
        assert_eq!(a.len(), b.len());
        for (i, (x, y)) in a.iter().zip(b).enumerate() {
            assert!(
                (x - y).abs() <= tol * y.abs().max(1.0),
                "element {i}: {x} against {y}"
            );
        }
    }

    #[test]
    fn gelu_on_the_cpu_matches_burns_in_value_and_gradient() {
        let device = Default::default();
        let data =
            Tensor::<CpuInference, 3>::random([3, 17, 40], Distribution::Normal(0.0, 3.0), &device)
                .into_data();
        // Forward, inference backend.
        let x = Tensor::<CpuInference, 3>::from_data(data.clone(), &device);
        close(
            &values(gelu(x.clone())),
            &values(burn::tensor::activation::gelu(x)),
            3e-7,
        );
        // Forward and gradient, autodiff backend; a transposed input takes
        // the non-contiguous path.
        let run = |ours: bool| {
            let x = Tensor::<Cpu, 3>::from_data(data.clone(), &device).require_grad();
            let t = x.clone().swap_dims(1, 2);
            let y = if ours {
                gelu(t)
            } else {
                burn::tensor::activation::gelu(t)
            };
            let w = Tensor::<Cpu, 3>::from_data(
                TensorData::new(
                    (0..2040).map(|i| (i % 13) as f32 - 6.0).collect(),
                    [3, 40, 17],
                ),
                &device,
            );
            let loss = (y.clone() * w).sum();
            let grads = loss.backward();
            (values(y), values(x.grad(&grads).expect("a gradient")))
        };
        let (ours_y, ours_g) = run(true);
        let (burn_y, burn_g) = run(false);
        close(&ours_y, &burn_y, 3e-7);
        close(&ours_g, &burn_g, 3e-6);
    }

    #[test]
    fn linear_on_the_cpu_matches_burns_in_value_and_gradients() {
        use burn::nn::LinearConfig;
        let device = Default::default();
        Cpu::seed(&device, 21);
        // Widths that are not multiples of the SIMD width or the tiles.
        let (rows, d_in, d_out) = (37, 45, 70);
        let layer = LinearConfig::new(d_in, d_out).init::<Cpu>(&device);
        let data = Tensor::<CpuInference, 2>::random(
            [rows, d_in],
            Distribution::Normal(0.0, 1.0),
            &device,
        )
        .into_data();
        let w: Vec<f32> = (0..rows * d_out).map(|i| (i % 9) as f32 - 4.0).collect();
        let run = |ours: bool| {
            let x = Tensor::<Cpu, 2>::from_data(data.clone(), &device).require_grad();
            let y = if ours {
                linear(&layer, x.clone())
            } else {
                layer.forward(x.clone())
            };
            let weights =
                Tensor::<Cpu, 2>::from_data(TensorData::new(w.clone(), [rows, d_out]), &device);
            let grads = (y.clone() * weights).sum().backward();
            let bias = layer.bias.as_ref().expect("a bias");
            (
                values(y),
                values(x.grad(&grads).expect("x's gradient")),
                values(layer.weight.val().grad(&grads).expect("W's gradient")),
                values(bias.val().grad(&grads).expect("b's gradient")),
            )
        };
        let (ours, burns) = (run(true), run(false));
        close(&ours.0, &burns.0, 1e-6);
        close(&ours.1, &burns.1, 1e-5);
        close(&ours.2, &burns.2, 1e-5);
        close(&ours.3, &burns.3, 1e-5);
        let x = Tensor::<CpuInference, 2>::from_data(data, &device);
        let inference = layer.valid();
        close(
            &values(linear(&inference, x.clone())),
            &values(inference.forward(x)),
            1e-6,
        );
    }

    #[test]
    fn embeddings_on_the_cpu_match_burns_in_value_and_gradients() {
        use burn::nn::EmbeddingConfig;
        let device = Default::default();
        let (batch, len, width) = (3, 5, 8);
        let ids = || {
            Tensor::<Cpu, 2, Int>::from_data(
                TensorData::new(
                    vec![1i64, 7, 7, 3, 0, 2, 9, 1, 1, 0, 4, 4, 4, 4, 8],
                    [batch, len],
                ),
                &device,
            )
        };
        let segments = || {
            Tensor::<Cpu, 2, Int>::from_data(
                TensorData::new(
                    vec![0i64, 0, 1, 1, 1, 0, 0, 0, 0, 0, 0, 1, 0, 1, 0],
                    [batch, len],
                ),
                &device,
            )
        };
        Cpu::seed(&device, 5);
        let token = EmbeddingConfig::new(10, width).init::<Cpu>(&device);
        let position = EmbeddingConfig::new(6, width).init::<Cpu>(&device);
        let segment = EmbeddingConfig::new(2, width).init::<Cpu>(&device);
        let w: Vec<f32> = (0..batch * len * width)
            .map(|i| (i % 7) as f32 - 3.0)
            .collect();
        let run = |ours: bool| {
            let y = if ours {
                embed(&token, &position, &segment, ids(), segments())
            } else {
                let positions = Tensor::<Cpu, 1, Int>::arange(0..len as i64, &device)
                    .reshape([1, len])
                    .repeat_dim(0, batch);
                token.forward(ids()) + position.forward(positions) + segment.forward(segments())
            };
            let weights = Tensor::<Cpu, 3>::from_data(
                TensorData::new(w.clone(), [batch, len, width]),
                &device,
            );
            let grads = (y.clone() * weights).sum().backward();
            let grad =
                |e: &Embedding<Cpu>| values(e.weight.val().grad(&grads).expect("a gradient"));
            (values(y), grad(&token), grad(&position), grad(&segment))
        };
        assert_eq!(run(true), run(false));
        // The inference backend: the same values.
        let inference = |e: &Embedding<Cpu>| e.clone().valid();
        let to_inner = |t: Tensor<Cpu, 2, Int>| {
            Tensor::<CpuInference, 2, Int>::from_data(t.into_data(), &device)
        };
        let y = embed(
            &inference(&token),
            &inference(&position),
            &inference(&segment),
            to_inner(ids()),
            to_inner(segments()),
        );
        assert_eq!(values(y), run(false).0);
        // An id outside the table takes burn's path, which reports it.
        let bad =
            Tensor::<Cpu, 2, Int>::from_data(TensorData::new(vec![10i64; 5], [1, 5]), &device);
        let seg = Tensor::<Cpu, 2, Int>::zeros([1, 5], &device);
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            values(embed(&token, &position, &segment, bad, seg))
        }));
        assert!(caught.is_err());
    }

    #[test]
    fn attention_probs_on_the_cpu_match_burns_in_value_and_gradient() {
        let device = Default::default();
        let (batch, heads, len) = (3, 2, 7);
        let data = Tensor::<CpuInference, 4>::random(
            [batch, heads, len, len],
            Distribution::Normal(0.0, 4.0),
            &device,
        )
        .into_data();
        // Sequence 0 has no padding, 1 two padded keys, 2 six.
        let pad: Vec<bool> = (0..batch * len)
            .map(|i| (i / len == 1 && i % len >= 5) || (i / len == 2 && i % len >= 1))
            .collect();
        let w: Vec<f32> = (0..batch * heads * len * len)
            .map(|i| (i % 11) as f32 - 5.0)
            .collect();
        let divisor = 8f32.sqrt();
        let run = |ours: bool| {
            let mask = Tensor::<Cpu, 1, Bool>::from_data(
                TensorData::new(pad.clone(), [batch * len]),
                &device,
            )
            .reshape([batch, 1, 1, len]);
            let x = Tensor::<Cpu, 4>::from_data(data.clone(), &device).require_grad();
            let p = if ours {
                attention_probs(x.clone(), mask, divisor)
            } else {
                softmax(
                    x.clone().div_scalar(divisor).mask_fill(mask, MASKED_SCORE),
                    3,
                )
            };
            let weights = Tensor::<Cpu, 4>::from_data(
                TensorData::new(w.clone(), [batch, heads, len, len]),
                &device,
            );
            let grads = (p.clone() * weights).sum().backward();
            (values(p), values(x.grad(&grads).expect("a gradient")))
        };
        let (ours, burns) = (run(true), run(false));
        close(&ours.0, &burns.0, 1e-6);
        close(&ours.1, &burns.1, 1e-5);
        // Padded keys get nothing, and every row sums to one.
        for (r, row) in ours.0.chunks(len).enumerate() {
            let b = r / (heads * len);
            for (j, &p) in row.iter().enumerate() {
                if pad[b * len + j] {
                    assert_eq!(p, 0.0);
                }
            }
            assert!((row.iter().sum::<f32>() - 1.0).abs() < 1e-6);
        }
        // The inference backend computes the same probabilities.
        let mask = Tensor::<CpuInference, 1, Bool>::from_data(
            TensorData::new(pad.clone(), [batch * len]),
            &device,
        )
        .reshape([batch, 1, 1, len]);
        let x = Tensor::<CpuInference, 4>::from_data(data.clone(), &device);
        assert_eq!(values(attention_probs(x, mask, divisor)), ours.0);
    }

    #[test]
    fn dropout_on_the_cpu_applies_the_mask_forward_and_backward() {
        let device = Default::default();
        let mask = DropoutMask::new(0.3, 99);
        let data =
            Tensor::<CpuInference, 3>::random([4, 9, 33], Distribution::Normal(0.0, 1.0), &device)
                .into_data();
        let w: Vec<f32> = (0..4 * 9 * 33).map(|i| (i % 13) as f32 - 6.0).collect();
        // A transposed input takes the non-contiguous path; the mask is
        // laid over the transposed (output) order.
        let x = Tensor::<Cpu, 3>::from_data(data.clone(), &device).require_grad();
        let t = x.clone().swap_dims(1, 2);
        let t_values = values(t.clone());
        let y = dropout(t, mask);
        let weights = Tensor::<Cpu, 3>::from_data(TensorData::new(w.clone(), [4, 33, 9]), &device);
        let grads = (y.clone() * weights).sum().backward();
        let y = values(y);
        for (i, (&yi, &ti)) in y.iter().zip(&t_values).enumerate() {
            assert_eq!(yi, ti * mask.factor(i), "output {i}");
        }
        // d/dt = w · mask, then transposed back to x's order.
        let dt = Tensor::<CpuInference, 3>::from_data(
            TensorData::new(
                (0..w.len())
                    .map(|i| w[i] * mask.factor(i))
                    .collect::<Vec<f32>>(),
                [4, 33, 9],
            ),
            &device,
        );
        assert_eq!(
            values(x.grad(&grads).expect("a gradient")),
            values(dt.swap_dims(1, 2))
        );
        // Inference backend: the same forward values.
        let xi = Tensor::<CpuInference, 3>::from_data(data, &device).swap_dims(1, 2);
        assert_eq!(values(dropout(xi, mask)), y);
    }

    #[test]
    fn layer_norm_on_the_cpu_matches_burns_in_value_and_gradients() {
        use burn::module::Param;
        use burn::nn::LayerNormConfig;
        let device = Default::default();
        let eps = 1e-5;
        let data =
            Tensor::<CpuInference, 2>::random([150, 48], Distribution::Normal(1.0, 2.0), &device)
                .into_data();
        let weights = |seed: usize| {
            TensorData::new(
                (0..48)
                    .map(|i| ((i * 7 + seed) % 11) as f32 / 5.0 - 1.0)
                    .collect(),
                [48],
            )
        };
        // Inference backend, forward.
        let mut norm = LayerNormConfig::new(48)
            .with_epsilon(eps)
            .init::<CpuInference>(&device);
        norm.gamma = Param::from_tensor(Tensor::from_data(weights(1), &device));
        norm.beta = Some(Param::from_tensor(Tensor::from_data(weights(2), &device)));
        let x = Tensor::<CpuInference, 2>::from_data(data.clone(), &device);
        close(
            &values(layer_norm(&norm, eps, x.clone())),
            &values(norm.forward(x)),
            2e-5,
        );
        // Autodiff backend: output and the gradients of x, gamma and beta.
        let run = |ours: bool| {
            let mut norm = LayerNormConfig::new(48)
                .with_epsilon(eps)
                .init::<Cpu>(&device);
            norm.gamma = Param::from_tensor(Tensor::from_data(weights(1), &device));
            norm.beta = Some(Param::from_tensor(Tensor::from_data(weights(2), &device)));
            let x = Tensor::<Cpu, 2>::from_data(data.clone(), &device).require_grad();
            let y = if ours {
                layer_norm(&norm, eps, x.clone())
            } else {
                norm.forward(x.clone())
            };
            let w = Tensor::<Cpu, 2>::from_data(
                TensorData::new(
                    (0..7200).map(|i| (i % 13) as f32 - 6.0).collect(),
                    [150, 48],
                ),
                &device,
            );
            let grads = (y.clone() * w).sum().backward();
            let beta = norm.beta.as_ref().expect("beta");
            (
                values(y),
                values(x.grad(&grads).expect("x's gradient")),
                values(norm.gamma.val().grad(&grads).expect("gamma's gradient")),
                values(beta.val().grad(&grads).expect("beta's gradient")),
            )
        };
        let (ours, burns) = (run(true), run(false));
        close(&ours.0, &burns.0, 2e-5);
        close(&ours.1, &burns.1, 1e-4);
        close(&ours.2, &burns.2, 1e-4);
        close(&ours.3, &burns.3, 1e-4);
    }

    #[test]
    fn head_permutations_match_reshape_and_transpose_with_gradients() {
        let device = Default::default();
        let data =
            Tensor::<CpuInference, 2>::random([2 * 5, 3 * 4], Distribution::Default, &device)
                .into_data();
        let weights = Tensor::<Cpu, 4>::from_data(
            TensorData::new(
                (0..120).map(|i| (i % 7) as f32 - 3.0).collect(),
                [2, 3, 5, 4],
            ),
            &device,
        );
        let run = |ours: bool| {
            let x = Tensor::<Cpu, 2>::from_data(data.clone(), &device).require_grad();
            let heads = if ours {
                split_heads(x.clone(), 2, 5, 3)
            } else {
                x.clone().reshape([2, 5, 3, 4]).swap_dims(1, 2)
            };
            // Something position-dependent between the two permutations.
            let mixed = heads.clone() * weights.clone();
            let back = if ours {
                merge_heads(mixed)
            } else {
                mixed.swap_dims(1, 2).reshape([10, 12])
            };
            let grads = (back.clone() * back.clone()).sum().backward();
            (
                values(heads),
                values(back),
                values(x.grad(&grads).expect("a gradient")),
            )
        };
        assert_eq!(run(true), run(false));
        let x = Tensor::<CpuInference, 2>::from_data(data.clone(), &device);
        assert_eq!(
            values(merge_heads(split_heads(x.clone(), 2, 5, 3))),
            values(x)
        );
    }
}
