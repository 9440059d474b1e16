#!/usr/bin/env python3
"""Convert a Hugging Face checkpoint folder into the files hpo-burn loads.

hpo-burn reads `config.json`, `model.safetensors` and `tokenizer.json`.
Many published checkpoints (DeBERTa-v3's, older BERT and RoBERTa ones) ship
`pytorch_model.bin` and a slow tokenizer's files (`spm.model`, or
`vocab.json` + `merges.txt`) instead. This loads the folder with
transformers and writes it again: the weights as safetensors (float32, the
encoder's names as transformers gives them) and the fast tokenizer as
`tokenizer.json`.

Usage (the PyTorch venv of bench/torch-venv.sh has transformers; a
SentencePiece model also needs `pip install sentencepiece protobuf`):

    $(bench/torch-venv.sh) bench/convert_checkpoint.py IN_DIR OUT_DIR
"""

import sys

import torch
from transformers import AutoModel, AutoTokenizer


def main(src, out):
    tokenizer = AutoTokenizer.from_pretrained(src, use_fast=True)
    if not tokenizer.is_fast:
        sys.exit(f"{src}: transformers has no fast tokenizer for it, so there is no tokenizer.json to write")
    model = AutoModel.from_pretrained(src, torch_dtype=torch.float32)
    model.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)
    print(f"wrote {out}: config.json, model.safetensors, tokenizer.json ({type(model).__name__})")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
