//! BERT's summed embeddings on the CPU: one threaded pass forward, each
//! table's gradient zeroed on every core and the rows added in.

use super::graph::{dispatch3, flex_tensor, record};
use crate::host::contiguous;
use crate::kernels;
use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops};
use burn::nn::Embedding;
use burn::tensor::backend::Backend;
use burn::tensor::{Int, Tensor};
use burn_flex::{Flex, FlexTensor};
use std::sync::Arc;

/// BERT's embeddings before their layer norm: `token[input_ids] +
/// position[offset..offset + len] + segment[segment_ids]` (`offset` is 0 for
/// BERT; RoBERTa's positions start after its padding id),
/// `[batch, len, width]` from
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
    offset: usize,
    input_ids: Tensor<B, 2, Int>,
    segment_ids: Tensor<B, 2, Int>,
) -> Tensor<B, 3> {
    let [batch, len] = input_ids.dims();
    let burns = |input_ids: Tensor<B, 2, Int>, segment_ids| {
        let (start, end) = (offset as i64, (offset + len) as i64);
        let positions = Tensor::<B, 1, Int>::arange(start..end, &input_ids.device())
            .reshape([1, len])
            .repeat_dim(0, batch);
        token.forward(input_ids) + position.forward(positions) + segment.forward(segment_ids)
    };
    if !crate::host::is_cpu::<B>() {
        return burns(input_ids, segment_ids);
    }
    let mut table_rows = [token, position, segment].map(|e| e.weight.dims()[0]);
    if offset >= table_rows[1] {
        return burns(input_ids, segment_ids);
    }
    // The rows from `offset` on, as the kernels' position table.
    table_rows[1] -= offset;
    let positions = position.weight.val().narrow(0, offset, table_rows[1]);
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
    // Shared, not copied, between the forward pass and the node's state.
    let lookup = Arc::new(Lookup {
        ids,
        segments,
        batch,
        len,
        width,
        table_rows,
    });
    dispatch3(
        (token.weight.val(), positions, segment.weight.val()),
        |[t, p, s]| {
            let y = embed_forward([&t.primitive, &p.primitive, &s.primitive], &lookup);
            record(EmbedBackward, [&t, &p, &s], Arc::clone(&lookup), y)
        },
        |tables| embed_forward(tables, &lookup),
        |_| burns(input_ids, segment_ids),
    )
}

/// The ids of one [`embed`] call, checked against the tables' sizes.
#[derive(Debug)]
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
    type State = Arc<Lookup>;

    fn backward(self, ops: Ops<Arc<Lookup>, 3>, grads: &mut Gradients, _: &mut Checkpointer) {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::cpu_ops::graph::test_support::values;
    use crate::{Cpu, CpuInference};
    use burn::module::AutodiffModule;
    use burn::tensor::TensorData;
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
        let run = |ours: bool, offset: usize| {
            let y = if ours {
                embed(&token, &position, &segment, offset, ids(), segments())
            } else {
                let range = offset as i64..(offset + len) as i64;
                let positions = Tensor::<Cpu, 1, Int>::arange(range, &device)
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
        assert_eq!(run(true, 0), run(false, 0));
        // RoBERTa's offset positions: rows 1..=5 of the 6, the first row's
        // gradient zero.
        let offset = run(true, 1);
        assert_eq!(offset, run(false, 1));
        assert_ne!(offset.0, run(true, 0).0);
        assert!(offset.2[..width].iter().all(|&g| g == 0.0));
        // The inference backend: the same values.
        let inference = |e: &Embedding<Cpu>| e.clone().valid();
        let to_inner = |t: Tensor<Cpu, 2, Int>| {
            Tensor::<CpuInference, 2, Int>::from_data(t.into_data(), &device)
        };
        let y = embed(
            &inference(&token),
            &inference(&position),
            &inference(&segment),
            0,
            to_inner(ids()),
            to_inner(segments()),
        );
        assert_eq!(values(y), run(false, 0).0);
        // An id outside the table takes burn's path, which reports it.
        let bad =
            Tensor::<Cpu, 2, Int>::from_data(TensorData::new(vec![10i64; 5], [1, 5]), &device);
        let seg = Tensor::<Cpu, 2, Int>::zeros([1, 5], &device);
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            values(embed(&token, &position, &segment, 0, bad, seg))
        }));
        assert!(caught.is_err());
    }
}
