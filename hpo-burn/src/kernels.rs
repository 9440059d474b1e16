//! Kernels over `f32` slices for the ops hpo runs itself on the CPU
//! backend ([`crate::model::cpu_ops`], [`crate::train::AdamW`]).
//!
//! burn-flex runs element-wise ops and reductions on one thread, each into
//! a new buffer, and burn's autodiff composes layer norm and AdamW from a
//! chain of them; its exact GELU calls libm's `erff` and `expf` per element
//! (13% of a fine-tuning epoch's CPU time in the profile on the book's
//! performance page). Here each op is one pass (two for layer norm's and
//! AdamW's reductions), split across rayon's threads:
//!
//! - the exact GELU and its derivative, from [`exp`] (Cephes'
//!   single-precision `expf`: range reduction by `ln 2` in two parts, a
//!   degree-6 polynomial, the exponent set from the bits) and the error
//!   function of Abramowitz and Stegun's formula 7.1.26 (absolute error
//!   1.5e-7 for the formula, below 5e-7 after `f32` rounding near zero),
//!   written branch-free so the compiler vectorises them; GELU and its
//!   derivative stay within 2e-7 and 4e-7 of the exact f64 values
//!   (relative to `max(|x|, 1)`; tested below);
//! - layer norm forward and backward, row by row;
//! - the copy between `[batch, len, heads, d]` and `[batch, heads, len, d]`
//!   that attention needs;
//! - one AdamW step over a parameter and its moments, in place, and the
//!   norm its gradient is clipped by;
//! - a linear layer's bias added to its rows, the bias gradient's sums, and
//!   the weight transposed for the input gradient's product;
//! - the embedding lookup (three tables summed) and its scatter-add;
//! - attention's masked softmax, forward and backward, row by row;
//! - dropout, its mask drawn element by element from a counter-based stream
//!   ([`DropoutMask`]) in the same pass that applies it.
//!
//! Element-wise outputs depend on their own inputs only, and sums are taken
//! over fixed pieces in a fixed order, so results do not depend on how the
//! work is split: the same bits on one thread or many.

use rayon::prelude::*;

/// Elements per rayon task: large enough that splitting costs nothing
/// measurable, small enough that even a short batch's `[batch · len,
/// width]` hidden states make dozens of tasks, so the cores finish an op
/// together (16 Ki elements left one core idle for the last piece of
/// many: on `cpu_training` 17.5 s/epoch and 180% of the cores busy, against
/// 16.7 s and 183% with 4 Ki; 2 Ki measured the same as 4 Ki).
const CHUNK: usize = 4 * 1024;

/// `1 / sqrt(2)`.
const FRAC_1_SQRT_2: f32 = std::f32::consts::FRAC_1_SQRT_2;
/// `1 / sqrt(2 pi)`.
const FRAC_1_SQRT_2PI: f32 = 0.398_942_3;

/// `e^x` to about one unit in the last place, for `x` in `[-87, 88]`
/// (clamped there: below, the result is under `f32`'s smallest normal; above,
/// `f32::MAX`'s neighbourhood). NaN stays NaN.
#[inline(always)]
pub fn exp(x: f32) -> f32 {
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    // ln 2 split so that n · C1 is exact for the n that occur.
    const C1: f32 = 0.693_359_4;
    const C2: f32 = -2.121_944_4e-4;
    // Adding and subtracting 1.5 · 2^23 rounds to the nearest integer.
    const ROUND: f32 = 12_582_912.0;
    let x = x.clamp(-87.0, 88.0);
    let n = (x * LOG2E + ROUND) - ROUND;
    let r = x - n * C1 - n * C2;
    let z = r * r;
    let p = ((((1.987_569_1e-4 * r + 1.398_2e-3) * r + 8.333_452e-3) * r + 4.166_579_6e-2) * r
        + 1.666_666_5e-1)
        * r
        + 0.5;
    let y = p * z + r + 1.0;
    // 2^n from its bits; n is in [-126, 127] after the clamp.
    let scale = f32::from_bits(((n as i32 + 127) as u32) << 23);
    y * scale
}

/// `1 - erf(a)` for `a >= 0`, given `e = exp(-a²)`: the polynomial of
/// Abramowitz and Stegun 7.1.26.
#[inline(always)]
fn erfc_tail(a: f32, e: f32) -> f32 {
    let t = 1.0 / (1.0 + 0.327_591_1 * a);
    let p = ((((1.061_405_4 * t - 1.453_152) * t + 1.421_413_7) * t - 0.284_496_74) * t
        + 0.254_829_6)
        * t;
    p * e
}

/// The standard normal CDF `Φ(x) = (1 + erf(x / √2)) / 2`, given
/// `e = exp(-x² / 2)`.
#[inline(always)]
fn normal_cdf(x: f32, e: f32) -> f32 {
    let half_tail = 0.5 * erfc_tail(x.abs() * FRAC_1_SQRT_2, e);
    if x >= 0.0 {
        1.0 - half_tail
    } else {
        half_tail
    }
}

/// The exact GELU, `x · Φ(x)`.
#[inline(always)]
pub fn gelu(x: f32) -> f32 {
    x * normal_cdf(x, exp(-0.5 * x * x))
}

/// GELU's derivative, `Φ(x) + x · φ(x)`.
#[inline(always)]
pub fn gelu_derivative(x: f32) -> f32 {
    let e = exp(-0.5 * x * x);
    normal_cdf(x, e) + x * FRAC_1_SQRT_2PI * e
}

/// `out[i] = gelu(x[i])`, split across rayon's threads.
pub fn gelu_into(x: &[f32], out: &mut [f32]) {
    out.par_chunks_mut(CHUNK)
        .zip(x.par_chunks(CHUNK))
        .for_each(|(out, x)| {
            for (o, &x) in out.iter_mut().zip(x) {
                *o = gelu(x);
            }
        });
}

/// `grad[i] *= gelu'(x[i])` in place: the backward pass of [`gelu_into`].
pub fn gelu_backward_in_place(x: &[f32], grad: &mut [f32]) {
    grad.par_chunks_mut(CHUNK)
        .zip(x.par_chunks(CHUNK))
        .for_each(|(grad, x)| {
            for (g, &x) in grad.iter_mut().zip(x) {
                *g *= gelu_derivative(x);
            }
        });
}

/// Moves attention heads between the two layouts of a `[batch, len, heads,
/// d]` tensor: `to_heads` reads `[batch, len, heads, d]` (the rows of
/// `[batch · len, width]`) and writes `[batch, heads, len, d]`; otherwise
/// the reverse. Each `d`-long run is one copy; batches are split across
/// rayon's threads.
pub fn permute_heads(src: &[f32], dst: &mut [f32], dims: [usize; 4], to_heads: bool) {
    let [_, len, heads, d] = dims;
    let per_batch = len * heads * d;
    dst.par_chunks_mut(per_batch)
        .zip(src.par_chunks(per_batch))
        .for_each(|(dst, src)| {
            for l in 0..len {
                for h in 0..heads {
                    let rows = (l * heads + h) * d;
                    let heads_first = (h * len + l) * d;
                    let (from, to) = if to_heads {
                        (rows, heads_first)
                    } else {
                        (heads_first, rows)
                    };
                    dst[to..to + d].copy_from_slice(&src[from..from + d]);
                }
            }
        });
}

/// Rows per rayon task in the layer norm kernels.
const ROWS: usize = 64;

/// Layer norm over the rows of a `[rows, width]` matrix `x`:
/// `y = (x - mean) / sqrt(var + eps) · gamma + beta`, with the biased
/// variance. Writes `y`, the normalised `x̂` and each row's `1 / sqrt(var +
/// eps)`, which the backward pass needs. Rows are split across rayon's
/// threads; each row is computed on one, so the split changes nothing.
pub fn layer_norm_forward(
    x: &[f32],
    gamma: &[f32],
    beta: &[f32],
    eps: f32,
    y: &mut [f32],
    normalized: &mut [f32],
    rstd: &mut [f32],
) {
    let width = gamma.len();
    y.par_chunks_mut(ROWS * width)
        .zip(normalized.par_chunks_mut(ROWS * width))
        .zip(rstd.par_chunks_mut(ROWS))
        .zip(x.par_chunks(ROWS * width))
        .for_each(|(((y, xh), r), x)| {
            for (((y, xh), r), x) in y
                .chunks_mut(width)
                .zip(xh.chunks_mut(width))
                .zip(r.iter_mut())
                .zip(x.chunks(width))
            {
                let mean = x.iter().sum::<f32>() / width as f32;
                let var = x.iter().map(|&v| (v - mean) * (v - mean)).sum::<f32>() / width as f32;
                *r = 1.0 / (var + eps).sqrt();
                for ((((y, xh), &x), &g), &b) in
                    y.iter_mut().zip(xh.iter_mut()).zip(x).zip(gamma).zip(beta)
                {
                    *xh = (x - mean) * *r;
                    *y = *xh * g + b;
                }
            }
        });
}

/// The backward pass of [`layer_norm_forward`]: given `dy`, overwrites it
/// with `dx = rstd · (dx̂ - mean(dx̂) - x̂ · mean(dx̂ · x̂))` where `dx̂ = dy ·
/// gamma`, and returns `(dgamma, dbeta)`, summed over the rows in a fixed
/// order (per task, then the tasks in turn).
pub fn layer_norm_backward_in_place(
    dy: &mut [f32],
    normalized: &[f32],
    rstd: &[f32],
    gamma: &[f32],
) -> (Vec<f32>, Vec<f32>) {
    let width = gamma.len();
    let partial: Vec<(Vec<f32>, Vec<f32>)> = dy
        .par_chunks_mut(ROWS * width)
        .zip(normalized.par_chunks(ROWS * width))
        .zip(rstd.par_chunks(ROWS))
        .map(|((dy, xh), r)| {
            let (mut dg, mut db) = (vec![0.0f32; width], vec![0.0f32; width]);
            for ((dy, xh), &r) in dy.chunks_mut(width).zip(xh.chunks(width)).zip(r) {
                let (mut sum, mut sum_x) = (0.0f32, 0.0f32);
                for ((((&d, &xh), &g), dg), db) in dy
                    .iter()
                    .zip(xh)
                    .zip(gamma)
                    .zip(dg.iter_mut())
                    .zip(db.iter_mut())
                {
                    *dg += d * xh;
                    *db += d;
                    let dxh = d * g;
                    sum += dxh;
                    sum_x += dxh * xh;
                }
                let (mean, mean_x) = (sum / width as f32, sum_x / width as f32);
                for ((d, &xh), &g) in dy.iter_mut().zip(xh).zip(gamma) {
                    *d = r * (*d * g - mean - xh * mean_x);
                }
            }
            (dg, db)
        })
        .collect();
    let (mut dgamma, mut dbeta) = (vec![0.0f32; width], vec![0.0f32; width]);
    for (dg, db) in &partial {
        for (a, b) in dgamma.iter_mut().zip(dg) {
            *a += b;
        }
        for (a, b) in dbeta.iter_mut().zip(db) {
            *a += b;
        }
    }
    (dgamma, dbeta)
}

/// The scalars of one AdamW step (Loshchilov and Hutter's decoupled weight
/// decay, burn's `AdamW` formulas and rounding order).
#[derive(Debug, Clone, Copy)]
pub struct AdamWStep {
    /// Learning rate.
    pub lr: f32,
    /// `1 - lr · weight_decay`, the factor the weights decay by.
    pub decay: f32,
    /// First-moment decay `β1`.
    pub beta_1: f32,
    /// Second-moment decay `β2`.
    pub beta_2: f32,
    /// Bias correction of the first moment, `1 - β1^t`.
    pub correction_1: f32,
    /// Bias correction of the second moment, `1 - β2^t`.
    pub correction_2: f32,
    /// Added to the root of the second moment.
    pub epsilon: f32,
    /// The gradient's scale (gradient clipping by norm; 1 without).
    pub grad_scale: f32,
}

/// One AdamW step over a parameter tensor, its moments updated in place, in
/// one pass split across rayon's threads (burn's `AdamW` runs a chain of
/// about fifteen whole-tensor ops per parameter, each into a new buffer):
///
/// `g = grad · grad_scale`, `m = β1·m + (1-β1)·g`, `v = β2·v + (1-β2)·g²`,
/// `param = decay · param - lr · (m / c1) / (sqrt(v / c2) + ε)`.
pub fn adamw_in_place(
    step: &AdamWStep,
    param: &mut [f32],
    grad: &[f32],
    moment_1: &mut [f32],
    moment_2: &mut [f32],
) {
    let s = *step;
    let (f1, f2) = (1.0 - s.beta_1, 1.0 - s.beta_2);
    param
        .par_chunks_mut(CHUNK)
        .zip(grad.par_chunks(CHUNK))
        .zip(moment_1.par_chunks_mut(CHUNK))
        .zip(moment_2.par_chunks_mut(CHUNK))
        .for_each(|(((p, g), m), v)| {
            for (((p, &g), m), v) in p.iter_mut().zip(g).zip(m.iter_mut()).zip(v.iter_mut()) {
                let g = g * s.grad_scale;
                *m = *m * s.beta_1 + g * f1;
                *v = *v * s.beta_2 + g * g * f2;
                let delta = (*m / s.correction_1) / ((*v / s.correction_2).sqrt() + s.epsilon);
                *p = *p * s.decay - delta * s.lr;
            }
        });
}

/// Attention probabilities over the rows of `[batch, heads, len_q, len_k]`
/// scores: `softmax(scores / divisor)` over each row's keys, with the keys
/// where `masked[b · len_k + j]` is true (padding of sequence `b`) given
/// probability zero. A row whose keys are all masked gets zeros. Rows are
/// split across rayon's threads, each row computed on one.
pub fn masked_softmax_forward(
    scores: &[f32],
    masked: &[bool],
    len_k: usize,
    rows_per_sequence: usize,
    divisor: f32,
    out: &mut [f32],
) {
    let rows = rows_per_task(len_k);
    out.par_chunks_mut(rows * len_k)
        .zip(scores.par_chunks(rows * len_k))
        .enumerate()
        .for_each(|(task, (out, scores))| {
            for (r, (out, scores)) in out.chunks_mut(len_k).zip(scores.chunks(len_k)).enumerate() {
                let b = (task * rows + r) / rows_per_sequence;
                let keys = &masked[b * len_k..(b + 1) * len_k];
                let mut max = f32::NEG_INFINITY;
                for ((o, &s), &m) in out.iter_mut().zip(scores).zip(keys) {
                    *o = s / divisor;
                    if !m {
                        max = max.max(*o);
                    }
                }
                let mut sum = 0.0f32;
                for (o, &m) in out.iter_mut().zip(keys) {
                    *o = if m { 0.0 } else { exp(*o - max) };
                    sum += *o;
                }
                let inv = if sum > 0.0 { 1.0 / sum } else { 0.0 };
                for o in out.iter_mut() {
                    *o *= inv;
                }
            }
        });
}

/// The backward pass of [`masked_softmax_forward`]: given the gradient of
/// the probabilities `p`, overwrites it with the scores' gradient
/// `p · (dp - Σ dp · p) / divisor` (zero at masked keys, whose `p` is zero).
pub fn masked_softmax_backward_in_place(
    grad: &mut [f32],
    probs: &[f32],
    len_k: usize,
    divisor: f32,
) {
    let rows = rows_per_task(len_k);
    grad.par_chunks_mut(rows * len_k)
        .zip(probs.par_chunks(rows * len_k))
        .for_each(|(grad, probs)| {
            for (g, p) in grad.chunks_mut(len_k).zip(probs.chunks(len_k)) {
                let dot: f32 = g.iter().zip(p).map(|(&g, &p)| g * p).sum();
                for (g, &p) in g.iter_mut().zip(p) {
                    *g = p * (*g - dot) / divisor;
                }
            }
        });
}

/// Rows of `width` elements per rayon task: about [`CHUNK`] elements.
fn rows_per_task(width: usize) -> usize {
    (CHUNK / width.max(1)).max(1)
}

/// `y[r] += bias` for each `bias.len()`-wide row `r` of `y`, split across
/// rayon's threads.
pub fn add_row_in_place(y: &mut [f32], bias: &[f32]) {
    let width = bias.len().max(1);
    y.par_chunks_mut(rows_per_task(width) * width)
        .for_each(|y| {
            for row in y.chunks_mut(width) {
                for (v, &b) in row.iter_mut().zip(bias) {
                    *v += b;
                }
            }
        });
}

/// The sum of the `width`-wide rows of `x` (a bias's gradient), summed per
/// task and the tasks in order: the same however the work is split.
pub fn column_sums(x: &[f32], width: usize) -> Vec<f32> {
    let width = width.max(1);
    let partial: Vec<Vec<f32>> = x
        .par_chunks(rows_per_task(width) * width)
        .map(|x| {
            let mut sum = vec![0.0f32; width];
            for row in x.chunks(width) {
                for (s, &v) in sum.iter_mut().zip(row) {
                    *s += v;
                }
            }
            sum
        })
        .collect();
    let mut total = vec![0.0f32; width];
    for p in &partial {
        for (t, &v) in total.iter_mut().zip(p) {
            *t += v;
        }
    }
    total
}

/// The transpose of the `[rows, cols]` matrix `src` into `dst` (`[cols,
/// rows]`), in tiles, `dst`'s rows split across rayon's threads.
pub fn transpose_into(src: &[f32], rows: usize, cols: usize, dst: &mut [f32]) {
    const TILE: usize = 32;
    let rows_max = rows.max(1);
    dst.par_chunks_mut(TILE * rows_max)
        .enumerate()
        .for_each(|(block, dst)| {
            let c0 = block * TILE;
            let c_end = (c0 + TILE).min(cols);
            for r0 in (0..rows).step_by(TILE) {
                let r_end = (r0 + TILE).min(rows);
                for c in c0..c_end {
                    let out = &mut dst[(c - c0) * rows..(c - c0) * rows + rows];
                    for r in r0..r_end {
                        out[r] = src[r * cols + c];
                    }
                }
            }
        });
}

/// `n` zeros, written across rayon's threads (a gradient as large as a
/// vocabulary's embedding table is zeroed on every step).
pub fn zeros(n: usize) -> Vec<f32> {
    let mut v = Vec::with_capacity(n);
    v.par_extend(rayon::iter::repeat_n(0.0f32, n));
    v
}

/// BERT's summed embeddings: row `t` of `out` is `token[ids[t]] +
/// position[t % len] + segment[segments[t]]` (tables of `width`-long rows,
/// added in that order). Rows are split across rayon's threads.
/// Every index must be within its table (checked by the caller).
pub fn embed_forward(
    tables: [&[f32]; 3],
    ids: &[usize],
    segments: &[usize],
    len: usize,
    width: usize,
    out: &mut [f32],
) {
    let [token, position, segment] = tables;
    let rows = rows_per_task(width);
    out.par_chunks_mut(rows * width)
        .enumerate()
        .for_each(|(task, out)| {
            for (r, out) in out.chunks_mut(width).enumerate() {
                let t = task * rows + r;
                fn row(table: &[f32], i: usize, width: usize) -> &[f32] {
                    &table[i * width..(i + 1) * width]
                }
                let (a, b, c) = (
                    row(token, ids[t], width),
                    row(position, t % len.max(1), width),
                    row(segment, segments[t], width),
                );
                for (((o, &a), &b), &c) in out.iter_mut().zip(a).zip(b).zip(c) {
                    *o = a + b + c;
                }
            }
        });
}

/// `table[rows[t]] += grad[t]` for each `width`-long row `t` of `grad`, in
/// order (the backward pass of a lookup into `table`).
pub fn scatter_add_rows(
    table: &mut [f32],
    rows: impl Iterator<Item = usize>,
    grad: &[f32],
    width: usize,
) {
    for (i, g) in rows.zip(grad.chunks(width)) {
        for (t, &g) in table[i * width..(i + 1) * width].iter_mut().zip(g) {
            *t += g;
        }
    }
}

/// A dropout mask, drawn in bulk and the same however the work is split.
///
/// Element `i` is dropped when 32 bits of a SplitMix64 stream (Steele, Lea
/// and Flood 2014) started at `seed` fall below `prob · 2^32`: the low half
/// of the stream's draw `i / 2` for even `i`, the high half for odd `i`.
/// SplitMix64's `j`-th draw is a function of `seed + (j + 1) · γ` alone,
/// so any piece of the mask is drawn without the pieces before it, and the
/// backward pass draws the very same mask again instead of keeping it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DropoutMask {
    /// The stream's start.
    pub seed: u64,
    /// An element is dropped when its 32 random bits fall below this.
    threshold: u64,
    /// What a kept element is multiplied by: `1 / (1 - prob)`.
    keep_scale: f32,
}

impl DropoutMask {
    /// The mask dropping each element with probability `prob` (in `[0,
    /// 1)`), drawn from `seed`'s stream.
    pub fn new(prob: f64, seed: u64) -> Self {
        DropoutMask {
            seed,
            threshold: (prob * 4_294_967_296.0).min(4_294_967_295.0) as u64,
            keep_scale: (1.0 / (1.0 - prob)) as f32,
        }
    }

    /// The factor of element `i`: `0` or `1 / (1 - prob)`.
    #[inline(always)]
    pub fn factor(&self, i: usize) -> f32 {
        let draw = splitmix64(
            self.seed
                .wrapping_add((i as u64 / 2 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15)),
        );
        let bits = if i.is_multiple_of(2) {
            draw & 0xffff_ffff
        } else {
            draw >> 32
        };
        if bits < self.threshold {
            0.0
        } else {
            self.keep_scale
        }
    }

    /// `out[i] = x[i] · factor(i)`, split across rayon's threads.
    pub fn apply_into(&self, x: &[f32], out: &mut [f32]) {
        out.par_chunks_mut(CHUNK)
            .zip(x.par_chunks(CHUNK))
            .enumerate()
            .for_each(|(c, (out, x))| {
                for (k, (o, &x)) in out.iter_mut().zip(x).enumerate() {
                    *o = x * self.factor(c * CHUNK + k);
                }
            });
    }

    /// `values[i] *= factor(i)` in place: the backward pass of
    /// [`apply_into`](Self::apply_into), on the output's gradient.
    pub fn apply_in_place(&self, values: &mut [f32]) {
        values
            .par_chunks_mut(CHUNK)
            .enumerate()
            .for_each(|(c, values)| {
                for (k, v) in values.iter_mut().enumerate() {
                    *v *= self.factor(c * CHUNK + k);
                }
            });
    }
}

/// SplitMix64's output function for the stream position `z` (the state
/// after the increment).
#[inline(always)]
fn splitmix64(z: u64) -> u64 {
    let z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    let z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The sum of the squares of `x`, in f64 chunk by chunk and the chunks
/// added in order: the same result however many threads there are.
pub fn sum_of_squares(x: &[f32]) -> f64 {
    let partial: Vec<f64> = x
        .par_chunks(CHUNK)
        .map(|c| c.iter().map(|&v| f64::from(v) * f64::from(v)).sum::<f64>())
        .collect();
    partial.iter().sum::<f64>()
}

/// The Euclidean norm of `x` ([`sum_of_squares`]' root).
pub fn l2_norm(x: &[f32]) -> f32 {
    sum_of_squares(x).sqrt() as f32
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The mask as the stream drawn in order, one 64-bit draw per two
    /// elements (low half first), as hpo-burn drew it before the counter
    /// form.
    fn sequential_mask(n: usize, prob: f64, seed: u64) -> Vec<f32> {
        let keep = (1.0 / (1.0 - prob)) as f32;
        let threshold = (prob * 4_294_967_296.0).min(4_294_967_295.0) as u64;
        let mut state = seed;
        let mut out = Vec::with_capacity(n + 1);
        while out.len() < n {
            state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let r = splitmix64(state);
            for bits in [r & 0xffff_ffff, r >> 32] {
                out.push(if bits < threshold { 0.0 } else { keep });
            }
        }
        out.truncate(n);
        out
    }

    #[test]
    fn transposes_bias_rows_and_column_sums_are_what_they_say() {
        let (rows, cols) = (70, 45);
        let src: Vec<f32> = (0..rows * cols).map(|i| i as f32).collect();
        let mut dst = vec![f32::NAN; rows * cols];
        transpose_into(&src, rows, cols, &mut dst);
        for r in 0..rows {
            for c in 0..cols {
                assert_eq!(dst[c * rows + r], src[r * cols + c]);
            }
        }
        let bias: Vec<f32> = (0..cols).map(|c| c as f32 * 0.5).collect();
        let mut y = src.clone();
        add_row_in_place(&mut y, &bias);
        for (i, (&y, &x)) in y.iter().zip(&src).enumerate() {
            assert_eq!(y, x + bias[i % cols]);
        }
        // Many rows, so the sums are split into several tasks.
        let tall: Vec<f32> = (0..5000 * 7)
            .map(|i| ((i * 31) % 17) as f32 - 8.0)
            .collect();
        let sums = column_sums(&tall, 7);
        for (c, &s) in sums.iter().enumerate() {
            let exact: f64 = tall.iter().skip(c).step_by(7).map(|&v| f64::from(v)).sum();
            assert_eq!(f64::from(s), exact, "column {c}");
        }
    }

    #[test]
    fn dropout_masks_are_the_stream_in_order_whatever_the_split() {
        let n = 3 * CHUNK + 7;
        let mask = DropoutMask::new(0.1, 7);
        let expected = sequential_mask(n, 0.1, 7);
        let factors: Vec<f32> = (0..n).map(|i| mask.factor(i)).collect();
        assert_eq!(factors, expected);
        // SplitMix64's first output from state 0 (its reference value).
        assert_eq!(splitmix64(0x9e37_79b9_7f4a_7c15), 0xe220_a839_7b1d_cdaf);

        let x: Vec<f32> = (0..n).map(|i| (i % 19) as f32 - 9.0).collect();
        let mut out = vec![f32::NAN; n];
        mask.apply_into(&x, &mut out);
        let mut in_place = x.clone();
        mask.apply_in_place(&mut in_place);
        for i in 0..n {
            assert_eq!(out[i], x[i] * expected[i], "element {i}");
        }
        assert_eq!(in_place, out);

        // 200k Bernoulli(0.1) draws: the share's sd is 0.00067.
        let big = sequential_mask(200_001, 0.1, 7);
        let dropped = big.iter().filter(|&&v| v == 0.0).count() as f64 / big.len() as f64;
        assert!((dropped - 0.1).abs() < 0.004, "dropped share {dropped}");
        assert!(big.iter().all(|&v| v == 0.0 || v == 1.0 / 0.9f32));
        let other = DropoutMask::new(0.1, 8);
        assert!((0..1000).any(|i| other.factor(i) != mask.factor(i)));
        let none = DropoutMask::new(0.0, 7);
        assert!((0..1000).all(|i| none.factor(i) == 1.0));
    }

    /// The error function from the kernels' tail: absolute error below 5e-7
    /// (Abramowitz and Stegun 7.1.26).
    fn erf(x: f32) -> f32 {
        let a = x.abs();
        (1.0 - erfc_tail(a, exp(-a * a))).copysign(x)
    }

    /// Every 1/1000 from -12 to 12, plus the far tails and zero's neighbours.
    fn grid() -> Vec<f32> {
        let mut xs: Vec<f32> = (-12_000..=12_000).map(|i| i as f32 / 1000.0).collect();
        xs.extend([-90.0, -87.5, -50.0, 50.0, 88.5, 100.0, 1e-30, -1e-30, 1e-7]);
        xs
    }

    /// The f64 reference: libm's `erf` (fdlibm's, within a few ulps).
    fn erf64(x: f64) -> f64 {
        libm::erf(x)
    }

    #[test]
    fn exp_is_within_two_ulps_of_the_f64_result() {
        for x in grid() {
            let got = exp(x);
            let want = (x.clamp(-87.0, 88.0) as f64).exp();
            let ulp = (want as f32).abs() * f32::EPSILON;
            assert!(
                ((got as f64) - want).abs() <= 2.0 * ulp as f64,
                "exp({x}) = {got}, want {want}"
            );
        }
        assert!(exp(f32::NAN).is_nan());
    }

    #[test]
    fn erf_is_within_its_documented_error() {
        let worst = grid()
            .into_iter()
            .map(|x| (erf(x) as f64 - erf64(x as f64)).abs())
            .fold(0.0, f64::max);
        // The formula's 1.5e-7 plus f32 rounding of `1 - p · e` where
        // `p · e` is near 1 (small `x`).
        assert!(worst < 5e-7, "erf off by up to {worst}");
        assert!(erf(0.0).abs() < 1e-7);
        assert_eq!(erf(100.0), 1.0);
        assert_eq!(erf(-100.0), -1.0);
    }

    #[test]
    fn gelu_and_its_derivative_match_the_exact_formulas() {
        for x in grid() {
            let xd = x as f64;
            let cdf = 0.5 * (1.0 + erf64(xd / std::f64::consts::SQRT_2));
            let pdf = (-0.5 * xd * xd).exp() / (2.0 * std::f64::consts::PI).sqrt();
            let want = xd * cdf;
            let got = gelu(x) as f64;
            assert!(
                (got - want).abs() <= 2e-7 * xd.abs().max(1.0),
                "gelu({x}) = {got}, want {want}"
            );
            let want_d = cdf + xd * pdf;
            let got_d = gelu_derivative(x) as f64;
            assert!(
                (got_d - want_d).abs() <= 4e-7 * xd.abs().max(1.0),
                "gelu'({x}) = {got_d}, want {want_d}"
            );
        }
    }

    #[test]
    fn adamw_matches_the_formulas_step_by_step() {
        let (mut p, mut m, mut v) = (vec![0.5f32, -2.0, 3.0], vec![0.0f32; 3], vec![0.0f32; 3]);
        let g = [0.1f32, -0.3, 0.0];
        let (b1, b2, lr, wd, eps) = (0.9f64, 0.999f64, 1e-3f64, 0.01f64, 1e-8f64);
        let (mut pe, mut me, mut ve) = ([0.5f64, -2.0, 3.0], [0.0f64; 3], [0.0f64; 3]);
        for t in 1..=3 {
            let step = AdamWStep {
                lr: lr as f32,
                decay: (1.0 - lr * wd) as f32,
                beta_1: b1 as f32,
                beta_2: b2 as f32,
                correction_1: (1.0 - b1.powi(t)) as f32,
                correction_2: (1.0 - b2.powi(t)) as f32,
                epsilon: eps as f32,
                grad_scale: 0.5,
            };
            adamw_in_place(&step, &mut p, &g, &mut m, &mut v);
            for i in 0..3 {
                let g = f64::from(g[i]) * 0.5;
                me[i] = b1 * me[i] + (1.0 - b1) * g;
                ve[i] = b2 * ve[i] + (1.0 - b2) * g * g;
                let delta =
                    (me[i] / (1.0 - b1.powi(t))) / ((ve[i] / (1.0 - b2.powi(t))).sqrt() + eps);
                pe[i] = (1.0 - lr * wd) * pe[i] - lr * delta;
                assert!(
                    (f64::from(p[i]) - pe[i]).abs() < 1e-6,
                    "step {t}, element {i}"
                );
            }
        }
        assert!((l2_norm(&[3.0, 4.0]) - 5.0).abs() < 1e-6);
    }

    #[test]
    fn permuting_heads_there_and_back_is_the_identity() {
        let dims = [2, 3, 4, 5];
        let x: Vec<f32> = (0..120).map(|i| i as f32).collect();
        let mut heads = vec![0.0; 120];
        permute_heads(&x, &mut heads, dims, true);
        // Batch 1, head 2, position 1, element 3 came from row (1, 1), column 2 · 5 + 3.
        assert_eq!(
            heads[((4 + 2) * 3 + 1) * 5 + 3],
            x[((3 + 1) * 4 + 2) * 5 + 3]
        );
        let mut back = vec![0.0; 120];
        permute_heads(&heads, &mut back, dims, false);
        assert_eq!(back, x);
    }

    #[test]
    fn the_slice_kernels_do_not_depend_on_how_the_work_is_split() {
        let x: Vec<f32> = (0..100_003)
            .map(|i| ((i * 7919) % 2001) as f32 / 250.0 - 4.0)
            .collect();
        let mut out = vec![0.0; x.len()];
        gelu_into(&x, &mut out);
        for (o, &x) in out.iter().zip(&x) {
            assert_eq!(o.to_bits(), gelu(x).to_bits());
        }
        let mut grad = vec![2.0; x.len()];
        gelu_backward_in_place(&x, &mut grad);
        for (g, &x) in grad.iter().zip(&x) {
            assert_eq!(g.to_bits(), (2.0 * gelu_derivative(x)).to_bits());
        }

        // The reductions and row kernels on one thread and on three.
        let on = |threads: usize| {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .expect("a pool");
            pool.install(|| {
                let len = 50;
                let masked: Vec<bool> = (0..40 * len).map(|i| i % 7 == 3).collect();
                let mut probs = vec![0.0; 40 * 50 * len];
                masked_softmax_forward(&x[..probs.len()], &masked, len, 50, 3.0, &mut probs);
                let mut grad = x[1..=probs.len()].to_vec();
                masked_softmax_backward_in_place(&mut grad, &probs, len, 3.0);
                (column_sums(&x[..100_000], 40), l2_norm(&x), probs, grad)
            })
        };
        assert_eq!(on(1), on(3));
    }
}
