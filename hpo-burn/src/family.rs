//! Model families: the checkpoint layouts hpo-burn loads, told apart by
//! `config.json`'s `model_type`, and what each changes in the shared
//! encoder.
//!
//! | family | `model_type` | positions | token types | pooler (before the output layer) |
//! | --- | --- | --- | --- | --- |
//! | BERT | `bert` | `0..len` | 2 (pairs: 0 and 1) | `tanh(dense(h_CLS))`, `pooler.dense` |
//! | RoBERTa | `roberta` | `pad + 1 ..` (`pad_token_id` + 1 on) | 1 (all 0) | `tanh(dense(h_<s>))`, `classifier.dense` |
//! | DeBERTa-v2/v3 | `deberta-v2` | relative only (disentangled attention over log-bucketed distances, embeddings shared by every layer) | none in v3 | `gelu(dense(h_CLS))`, `pooler.dense` |
//!
//! DeBERTa v1 (`deberta`) is refused by name.

use crate::error::{Error, Result};

/// A checkpoint layout hpo-burn loads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Family {
    /// BERT (`model_type` `bert`), and models of its layout such as MiniLM.
    Bert,
    /// RoBERTa (`model_type` `roberta`): BERT's encoder with positions
    /// offset past the padding id, one token type, a byte-level BPE
    /// tokenizer (`<s> a </s></s> b </s>`), and its classification head's
    /// dense layer where BERT has its pooler.
    Roberta,
    /// DeBERTa-v2/v3 (`model_type` `deberta-v2`): disentangled attention
    /// with relative position buckets shared across layers, no absolute
    /// positions (v3), a GELU context pooler, a SentencePiece vocabulary
    /// through `tokenizer.json` framed as BERT's.
    Deberta,
}

/// The `model_type`s [`Family::from_model_type`] knows, for messages.
pub const KNOWN_MODEL_TYPES: &str = "bert, roberta, deberta-v2";

impl Family {
    /// The family of a `config.json`'s `model_type`: a clear error naming
    /// it when hpo-burn does not load that layout.
    pub fn from_model_type(model_type: &str) -> Result<Self> {
        match model_type {
            "bert" => Ok(Family::Bert),
            "roberta" => Ok(Family::Roberta),
            "deberta-v2" => Ok(Family::Deberta),
            "deberta" => Err(Error::config(format!(
                "model_type {model_type:?} (DeBERTa v1) is not a layout hpo-burn loads; it \
                 loads {KNOWN_MODEL_TYPES}"
            ))),
            other => Err(Error::config(format!(
                "model_type {other:?} is not a layout hpo-burn loads; it loads \
                 {KNOWN_MODEL_TYPES}"
            ))),
        }
    }

    /// The family's `model_type`.
    pub fn model_type(self) -> &'static str {
        match self {
            Family::Bert => "bert",
            Family::Roberta => "roberta",
            Family::Deberta => "deberta-v2",
        }
    }

    /// The first position id: 0 for BERT; RoBERTa's positions start after
    /// its padding id (`pad_token_id + 1`, 2 for the released checkpoints),
    /// so a model of `max_position_embeddings` positions takes sequences of
    /// that many less this.
    pub fn position_offset(self, pad_token_id: usize) -> usize {
        match self {
            Family::Bert | Family::Deberta => 0,
            Family::Roberta => pad_token_id + 1,
        }
    }

    /// Model tensors a checkpoint of this family may lack, which then start
    /// fresh: the classification head always; RoBERTa's head dense layer
    /// and DeBERTa's context pooler (hpo-burn's `pooler`) too, since those
    /// encoders are published without them.
    pub fn may_start_fresh(self, tensor: &str) -> bool {
        tensor.starts_with("head.") || (self != Family::Bert && tensor.starts_with("pooler."))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_types_are_read_and_unknown_ones_named() {
        assert_eq!(Family::from_model_type("bert").unwrap(), Family::Bert);
        assert_eq!(Family::from_model_type("roberta").unwrap(), Family::Roberta);
        for f in [Family::Bert, Family::Roberta, Family::Deberta] {
            assert_eq!(Family::from_model_type(f.model_type()).unwrap(), f);
        }
        let e = Family::from_model_type("gpt2").unwrap_err().to_string();
        assert!(e.contains("\"gpt2\"") && e.contains("bert, roberta"), "{e}");
        let e = Family::from_model_type("deberta").unwrap_err().to_string();
        assert!(e.contains("DeBERTa v1"), "{e}");
        assert_eq!(Family::Roberta.position_offset(1), 2);
        assert_eq!(Family::Bert.position_offset(0), 0);
        assert!(Family::Roberta.may_start_fresh("pooler.dense.weight"));
        assert!(!Family::Bert.may_start_fresh("pooler.dense.weight"));
        assert!(Family::Bert.may_start_fresh("head.output.bias"));
    }
}
