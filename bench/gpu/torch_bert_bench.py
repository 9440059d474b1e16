"""PyTorch reference for hpo-burn's GPU training throughput.

BERT classifiers trained from scratch (transformers' BertForSequenceClassification, its
default attention implementation), AdamW, synthetic token ids, the shapes hpo-burn's
`gpu_training` example trains. Modes: fp32 (TF32 off), tf32 (TF32 matrix products), bf16
(autocast). Prints one line per run and, with --json, writes every figure to a file.

    python3 bench/gpu/torch_bert_bench.py --shapes base:32x512,large:16x384 --secs 3 --json out.json

Adapted from the project's original PyTorch speed reference (15 s per run, three fixed
shapes) to take its shapes and duration from the command line and to write JSON.
"""
import argparse, json, time

import torch
from transformers import BertConfig, BertForSequenceClassification

PRESETS = {
    # layers, hidden, heads, intermediate: hpo-burn's presets.
    "tiny": (2, 128, 2, 512),
    "mini": (4, 256, 4, 1024),
    "small": (4, 512, 8, 2048),
    "medium": (8, 512, 8, 2048),
    "base": (12, 768, 12, 3072),
    "large": (24, 1024, 16, 4096),
}


def run(preset, b, s, mode, secs, device):
    layers, hidden, heads, inter = PRESETS[preset]
    cfg = BertConfig(vocab_size=30522, hidden_size=hidden, num_hidden_layers=layers,
                     num_attention_heads=heads, intermediate_size=inter, num_labels=2)
    cuda = device == "cuda"
    if cuda:
        torch.backends.cuda.matmul.allow_tf32 = mode == "tf32"
        torch.backends.cudnn.allow_tf32 = mode == "tf32"
    m = BertForSequenceClassification(cfg).to(device).train()
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
    ids = torch.randint(5, cfg.vocab_size, (b, s), device=device)
    lab = torch.randint(0, 2, (b,), device=device)

    def sync():
        if cuda:
            torch.cuda.synchronize()

    def step():
        with torch.autocast(device, dtype=torch.bfloat16, enabled=mode == "bf16"):
            out = m(input_ids=ids, labels=lab)
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)

    for _ in range(3):
        step()
    sync()
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    t = time.time()
    n = 0
    while n < 5 or time.time() - t < secs:
        step()
        n += 1
        if n % 5 == 0:
            sync()
    sync()
    dt = time.time() - t
    row = {"preset": preset, "batch": b, "len": s, "mode": mode, "steps": n,
           "tokens_per_s": n * b * s / dt,
           "attention": getattr(m.config, "_attn_implementation", None)}
    if cuda:
        row["peak_allocated_bytes"] = torch.cuda.max_memory_allocated()
        row["peak_reserved_bytes"] = torch.cuda.max_memory_reserved()
    print(f"TORCH {mode} {preset} batch={b} len={s} tokens_per_s={row['tokens_per_s']:.0f}", flush=True)
    del m, opt
    if cuda:
        torch.cuda.empty_cache()
    return row


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--shapes", default="base:32x512,large:16x384")
    p.add_argument("--modes", default="fp32,tf32,bf16")
    p.add_argument("--secs", type=float, default=3.0)
    p.add_argument("--json")
    a = p.parse_args()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    rows = []
    for shape in a.shapes.split(","):
        preset, dims = shape.split(":")
        b, s = (int(x) for x in dims.split("x"))
        for mode in a.modes.split(","):
            if device == "cpu" and mode != "fp32":
                continue
            rows.append(run(preset, b, s, mode, a.secs, device))
    out = {"device": torch.cuda.get_device_name(0) if device == "cuda" else "cpu",
           "torch": torch.__version__, "rows": rows}
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
