//! Tokenization of single texts and (criterion, text) pairs.
//!
//! Wraps the `tokenizers` crate built without its download features: a
//! tokenizer comes from a local `tokenizer.json` (BERT's WordPiece or
//! RoBERTa's byte-level BPE), a BERT `vocab.txt`, or is trained from the
//! training texts when no checkpoint is given. Encodings are BERT's, `[CLS] a
//! [SEP]` or `[CLS] a [SEP] b [SEP]` with segment ids 0/1, or RoBERTa's,
//! `<s> a </s>` or `<s> a </s></s> b </s>` in segment 0, by the vocabulary's
//! special tokens, truncated longest-first to `max_len`. Padding is *not* done here: the
//! batcher pads each batch to its own longest sequence.

use crate::data::Text;
use crate::error::{Error, Result};
use std::path::Path;
use tokenizers::models::wordpiece::{WordPiece, WordPieceTrainer};
use tokenizers::models::TrainerWrapper;
use tokenizers::normalizers::BertNormalizer;
use tokenizers::pre_tokenizers::bert::BertPreTokenizer;
use tokenizers::processors::bert::BertProcessing;
use tokenizers::processors::roberta::RobertaProcessing;
use tokenizers::{AddedToken, Tokenizer, TruncationParams, TruncationStrategy};

/// Special tokens, in the id order a trained vocabulary gives them.
pub const SPECIAL_TOKENS: [&str; 5] = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"];

/// One encoded input: token ids and segment ids of equal length.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Encoded {
    /// Token ids, starting with `[CLS]`.
    pub ids: Vec<u32>,
    /// Segment ids: 0 for the first text, 1 for the second of a pair.
    pub segments: Vec<u32>,
}

/// A BERT WordPiece tokenizer.
#[derive(Clone)]
pub struct TextTokenizer {
    inner: Tokenizer,
    pad_id: u32,
}

impl std::fmt::Debug for TextTokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TextTokenizer")
            .field("vocab_size", &self.vocab_size())
            .field("pad_id", &self.pad_id)
            .finish()
    }
}

fn tok_err(what: &str, e: impl std::fmt::Display) -> Error {
    Error::Tokenizer(format!("{what}: {e}"))
}

impl TextTokenizer {
    /// Loads a HuggingFace `tokenizer.json`.
    pub fn from_tokenizer_json(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let inner = Tokenizer::from_file(path)
            .map_err(|e| tok_err(&format!("cannot load {}", path.display()), e))?;
        Self::finish(inner)
    }

    /// Loads a BERT `vocab.txt` (one token per line) with BERT's normaliser
    /// (`lowercase` for uncased models) and pre-tokenizer.
    pub fn from_vocab_file(path: impl AsRef<Path>, lowercase: bool) -> Result<Self> {
        let path = path.as_ref();
        if !path.is_file() {
            return Err(Error::io(
                path,
                std::io::Error::new(std::io::ErrorKind::NotFound, "vocabulary file not found"),
            ));
        }
        let wordpiece = WordPiece::from_file(&path.to_string_lossy())
            .unk_token("[UNK]".into())
            .build()
            .map_err(|e| tok_err(&format!("cannot load {}", path.display()), e))?;
        let mut inner = Tokenizer::new(wordpiece);
        inner
            .with_normalizer(Some(BertNormalizer::new(true, true, None, lowercase)))
            .with_pre_tokenizer(Some(BertPreTokenizer));
        Self::finish(inner)
    }

    /// Writes the tokenizer as a HuggingFace `tokenizer.json`, loadable with
    /// [`from_tokenizer_json`](Self::from_tokenizer_json).
    pub fn save(&self, path: impl AsRef<Path>) -> Result<()> {
        let path = path.as_ref();
        self.inner
            .save(path, false)
            .map_err(|e| tok_err(&format!("cannot write {}", path.display()), e))
    }

    /// The tokenizer as the text of a HuggingFace `tokenizer.json`.
    pub fn to_json(&self) -> Result<String> {
        self.inner
            .to_string(false)
            .map_err(|e| tok_err("cannot write the tokenizer as JSON", e))
    }

    /// A tokenizer from the text of a HuggingFace `tokenizer.json`
    /// ([`to_json`](Self::to_json)).
    pub fn from_json(text: &str) -> Result<Self> {
        let inner: Tokenizer = text
            .parse()
            .map_err(|e| tok_err("cannot read the tokenizer JSON", e))?;
        Self::finish(inner)
    }

    /// Loads the tokenizer of a checkpoint directory: `tokenizer.json` if
    /// present, else `vocab.txt` (lowercasing unless `tokenizer_config.json`
    /// says `"do_lower_case": false`).
    pub fn from_dir(dir: impl AsRef<Path>) -> Result<Self> {
        let dir = dir.as_ref();
        let json = dir.join("tokenizer.json");
        if json.is_file() {
            return Self::from_tokenizer_json(json);
        }
        let lowercase = std::fs::read_to_string(dir.join("tokenizer_config.json"))
            .ok()
            .and_then(|s| serde_json::from_str::<serde_json::Value>(&s).ok())
            .and_then(|v| v.get("do_lower_case").and_then(|b| b.as_bool()))
            .unwrap_or(true);
        Self::from_vocab_file(dir.join("vocab.txt"), lowercase)
    }

    /// Trains an uncased WordPiece vocabulary of at most `vocab_size` tokens
    /// from `texts`. Not the same vocabulary in every process (the trainer's
    /// tie-breaking follows hash order): a model trained with it must keep
    /// it (hpo-burn's saved models store their tokenizer).
    pub fn train<'a>(
        texts: impl Iterator<Item = &'a str> + Send,
        vocab_size: usize,
    ) -> Result<Self> {
        let mut inner = Tokenizer::new(WordPiece::default());
        inner
            .with_normalizer(Some(BertNormalizer::new(true, true, None, true)))
            .with_pre_tokenizer(Some(BertPreTokenizer));
        let mut trainer: TrainerWrapper = WordPieceTrainer::builder()
            .vocab_size(vocab_size)
            .min_frequency(2)
            .show_progress(false)
            .special_tokens(
                SPECIAL_TOKENS
                    .iter()
                    .map(|t| AddedToken::from(*t, true))
                    .collect(),
            )
            .build()
            .into();
        inner
            .train(&mut trainer, texts)
            .map_err(|e| tok_err("training a WordPiece vocabulary failed", e))?;
        Self::finish(inner)
    }

    /// Sets the special tokens' framing by the vocabulary's own tokens:
    /// BERT's `[CLS] a [SEP] b [SEP]` (segments 0 and 1) where it has
    /// `[CLS]`, `[SEP]` and `[PAD]`; RoBERTa's `<s> a </s></s> b </s>` (one
    /// segment) where it has `<s>`, `</s>` and `<pad>`.
    fn finish(mut inner: Tokenizer) -> Result<Self> {
        let ids = |[pad, cls, sep]: [&str; 3]| {
            Some((
                inner.token_to_id(pad)?,
                inner.token_to_id(cls)?,
                inner.token_to_id(sep)?,
            ))
        };
        let pad_id = if let Some((pad, cls, sep)) = ids(["[PAD]", "[CLS]", "[SEP]"]) {
            inner.with_post_processor(Some(BertProcessing::new(
                ("[SEP]".into(), sep),
                ("[CLS]".into(), cls),
            )));
            pad
        } else if let Some((pad, cls, sep)) = ids(["<pad>", "<s>", "</s>"]) {
            // RoBERTa's byte-level BPE keeps its own pre-tokenizer; the
            // framing is RobertaProcessing's (its offsets untouched here).
            inner.with_post_processor(Some(
                RobertaProcessing::new(("</s>".into(), sep), ("<s>".into(), cls))
                    .trim_offsets(false)
                    .add_prefix_space(false),
            ));
            pad
        } else {
            return Err(Error::Tokenizer(
                "vocabulary has neither BERT's [PAD]/[CLS]/[SEP] nor RoBERTa's \
                 <pad>/<s>/</s> tokens"
                    .into(),
            ));
        };
        inner.with_padding(None);
        Ok(TextTokenizer { inner, pad_id })
    }

    /// Vocabulary size, including special tokens.
    pub fn vocab_size(&self) -> usize {
        self.inner.get_vocab_size(true)
    }

    /// Id of `[PAD]`.
    pub fn pad_id(&self) -> u32 {
        self.pad_id
    }

    /// Encodes `texts`, each truncated (longest first) to `max_len` tokens
    /// including the special tokens.
    pub fn encode_all(&self, texts: &[&Text], max_len: usize) -> Result<Vec<Encoded>> {
        if max_len < 4 {
            return Err(Error::config(format!(
                "max_len {max_len} is too short; a pair needs at least 4 tokens"
            )));
        }
        let mut tok = self.inner.clone();
        tok.with_truncation(Some(TruncationParams {
            max_length: max_len,
            strategy: TruncationStrategy::LongestFirst,
            ..TruncationParams::default()
        }))
        .map_err(|e| tok_err("truncation settings", e))?;
        texts
            .iter()
            .map(|t| {
                let enc = match t {
                    Text::Single(s) => tok.encode(s.as_str(), true),
                    Text::Pair { criterion, text } => {
                        tok.encode((criterion.as_str(), text.as_str()), true)
                    }
                }
                .map_err(|e| tok_err("encoding failed", e))?;
                Ok(Encoded {
                    ids: enc.get_ids().to_vec(),
                    segments: enc.get_type_ids().to_vec(),
                })
            })
            .collect()
    }

    /// Encodes one text (see [`encode_all`](Self::encode_all)).
    pub fn encode(&self, text: &Text, max_len: usize) -> Result<Encoded> {
        self.encode_all(&[text], max_len)?
            .pop()
            .ok_or_else(|| Error::Tokenizer("encoder returned nothing".into()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn corpus() -> Vec<&'static str> {
        vec![
            "I feel sad and tired today",
            "what a happy sunny day",
            "sad sad sad",
            "happy people feel good",
            "tired of feeling down",
        ]
    }

    #[test]
    fn trained_vocab_encodes_pairs_with_segments_and_truncates() {
        let tok = TextTokenizer::train(corpus().into_iter(), 200).unwrap();
        assert_eq!(tok.pad_id(), 0);
        let pair = Text::Pair {
            criterion: "depressed mood".into(),
            text: "I feel sad".into(),
        };
        let e = tok.encode(&pair, 64).unwrap();
        let cls = tok.inner.token_to_id("[CLS]").unwrap();
        let sep = tok.inner.token_to_id("[SEP]").unwrap();
        assert_eq!(e.ids[0], cls);
        assert_eq!(e.ids.iter().filter(|&&i| i == sep).count(), 2);
        assert_eq!(e.ids.len(), e.segments.len());
        // Segment 0 covers [CLS] criterion [SEP]; segment 1 the text and final [SEP].
        let first_sep = e.ids.iter().position(|&i| i == sep).unwrap();
        assert!(e.segments[..=first_sep].iter().all(|&s| s == 0));
        assert!(e.segments[first_sep + 1..].iter().all(|&s| s == 1));
        assert_eq!(*e.ids.last().unwrap(), sep);

        let long = Text::Single("sad ".repeat(50));
        let e = tok.encode(&long, 8).unwrap();
        assert_eq!(e.ids.len(), 8);
        assert_eq!(*e.ids.last().unwrap(), sep);
        assert!(tok.encode(&long, 3).is_err());
    }

    #[test]
    fn vocab_file_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let vocab = "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\ni\nfeel\nsad\n##ly\n";
        std::fs::write(dir.path().join("vocab.txt"), vocab).unwrap();
        let tok = TextTokenizer::from_dir(dir.path()).unwrap();
        assert_eq!(tok.vocab_size(), 9);
        let e = tok
            .encode(&Text::Single("I feel SADly happy".into()), 32)
            .unwrap();
        assert_eq!(e.ids, vec![2, 5, 6, 7, 8, 1, 3]);
        let missing = TextTokenizer::from_vocab_file(dir.path().join("nope.txt"), true);
        assert!(missing.unwrap_err().to_string().contains("nope.txt"));
    }
}
