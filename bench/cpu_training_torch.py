#!/usr/bin/env python3
"""PyTorch reference of the CPU training benchmark (issue 20).

Trains the model hpo-burn trains, on the exact padded batches hpo-burn's
trainer planned, with the same optimizer settings, and measures the same
things. Run by `cargo run --release -p hpo-burn --example cpu_training`,
which writes the batches file and reads this script's output; by hand:

    PY=$(bench/torch-venv.sh)
    $PY bench/cpu_training_torch.py bench/results/cpu_training_batches.json /tmp/torch.json

The model: transformers' BertModel loaded from the same checkpoint folder
(or, when the batches file names none, initialised from scratch with the
same shape), mean pooling over non-padding positions, the checkpoint's
pooler dense layer with tanh, dropout, and a fresh linear layer over the
classes: hpo-burn's BertClassifier with `Pooling::Mean` and no hidden head
layers. Loss: cross-entropy weighted by the batches file's class weights
(weighted mean, as burn's). Optimizer: AdamW over all parameters (burn
decays every parameter too) with the file's epsilon, each step's learning
rate taken from the file, the gradient clipped to the file's norm as the
file's scope says: all parameters as one vector (`"global"`,
`clip_grad_norm_` over the model) or each parameter on its own
(`"per_parameter"`, burn's `GradientClippingConfig::Norm`).

Timing and CPU use (resource.getrusage) cover the training loop and the
validation pass separately; peak RSS is the process's ru_maxrss.

With a third argument, PROFILE.txt, the training loop runs under
torch.profiler instead and the table of operators by self CPU time is
written there (the profiled run's timings are not the benchmark's):

    $PY bench/cpu_training_torch.py BATCHES.json /tmp/torch.json /tmp/torch-profile.txt
"""

import json
import resource
import sys
import time

import torch
import transformers
from transformers import BertConfig, BertModel


class Classifier(torch.nn.Module):
    def __init__(self, encoder, classes, dropout):
        super().__init__()
        self.encoder = encoder
        hidden = encoder.config.hidden_size
        self.dropout = torch.nn.Dropout(dropout)
        self.output = torch.nn.Linear(hidden, classes)

    def forward(self, input_ids, token_type_ids, attention_mask):
        h = self.encoder(
            input_ids=input_ids,
            token_type_ids=token_type_ids,
            attention_mask=attention_mask,
        ).last_hidden_state
        keep = attention_mask.unsqueeze(-1).to(h.dtype)
        pooled = (h * keep).sum(1) / keep.sum(1).clamp(min=1.0)
        pooled = torch.tanh(self.encoder.pooler.dense(pooled))
        return self.output(self.dropout(pooled))


def tensors(batch):
    return (
        torch.tensor(batch["input_ids"], dtype=torch.long),
        torch.tensor(batch["token_type_ids"], dtype=torch.long),
        torch.tensor(batch["attention_mask"], dtype=torch.long),
        torch.tensor(batch["labels"], dtype=torch.long),
    )


def usage():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime, r.ru_stime, r.ru_minflt


def cpu(start, end, wall):
    user, system = end[0] - start[0], end[1] - start[1]
    return {
        "user_s": user,
        "system_s": system,
        "cores_busy": (user + system) / max(wall, 1e-9),
        "minor_faults": end[2] - start[2],
    }


def macro_f1(predicted, actual, classes):
    f1 = 0.0
    for c in range(classes):
        tp = sum(1 for p, a in zip(predicted, actual) if p == a == c)
        fp = sum(1 for p, a in zip(predicted, actual) if p == c and a != c)
        fn = sum(1 for p, a in zip(predicted, actual) if a == c and p != c)
        denom = 2 * tp + fp + fn
        f1 += 0.0 if denom == 0 else 2 * tp / denom
    return f1 / classes


def main(batches_path, out_path, profile_path=None):
    with open(batches_path) as f:
        job = json.load(f)
    torch.manual_seed(job["seed"])
    m = job["model"]
    if job["checkpoint"]:
        encoder = BertModel.from_pretrained(job["checkpoint"], dtype=torch.float32)
    else:
        encoder = BertModel(
            BertConfig(
                vocab_size=m["vocab_size"],
                hidden_size=m["hidden"],
                num_hidden_layers=m["layers"],
                num_attention_heads=m["heads"],
                intermediate_size=m["intermediate"],
                max_position_embeddings=m["max_position"],
                hidden_dropout_prob=m["dropout"],
                attention_probs_dropout_prob=m["dropout"],
            )
        )
    model = Classifier(encoder, job["classes"], m["dropout"])
    opt = job["optimizer"]
    optimizer = torch.optim.AdamW(
        model.parameters(),
        lr=job["steps"][0]["lr"],
        betas=tuple(opt["betas"]),
        eps=opt["eps"],
        weight_decay=opt["weight_decay"],
    )
    clip = opt["clip_norm"]
    if opt["clip_scope"] not in ("global", "per_parameter"):
        sys.exit(f"unknown clip scope {opt['clip_scope']!r} in {batches_path}")
    loss_fn = torch.nn.CrossEntropyLoss(
        weight=torch.tensor(job["class_weights"], dtype=torch.float32)
    )
    steps = [(s["lr"], tensors(s["batch"])) for s in job["steps"]]
    valid = [tensors(b) for b in job["valid_batches"]]
    params = [p for p in model.parameters() if p.requires_grad]

    model.train()
    tokens = sum(int(b[2].sum()) for _, b in steps)
    padded = sum(b[0].numel() for _, b in steps)
    loss_sum, examples = 0.0, 0
    profiler = None
    if profile_path:
        profiler = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU])
        profiler.__enter__()
    u0, t0 = usage(), time.perf_counter()
    for lr, (ids, segs, mask, labels) in steps:
        for group in optimizer.param_groups:
            group["lr"] = lr
        optimizer.zero_grad(set_to_none=True)
        loss = loss_fn(model(ids, segs, mask), labels)
        loss.backward()
        if clip is not None and opt["clip_scope"] == "global":
            torch.nn.utils.clip_grad_norm_(params, clip)
        elif clip is not None:
            for p in params:
                if p.grad is not None:
                    torch.nn.utils.clip_grad_norm_([p], clip)
        optimizer.step()
        loss_sum += loss.item() * len(labels)
        examples += len(labels)
    train_s = time.perf_counter() - t0
    u1 = usage()
    if profiler is not None:
        profiler.__exit__(None, None, None)
        with open(profile_path, "w") as f:
            f.write(profiler.key_averages().table(sort_by="self_cpu_time_total", row_limit=60))

    model.eval()
    predicted, actual = [], []
    t1 = time.perf_counter()
    with torch.inference_mode():
        for ids, segs, mask, labels in valid:
            predicted += model(ids, segs, mask).argmax(1).tolist()
            actual += labels.tolist()
    eval_s = time.perf_counter() - t1
    u2 = usage()
    correct = sum(1 for p, a in zip(predicted, actual) if p == a)
    result = {
        "torch_version": torch.__version__,
        "transformers_version": transformers.__version__,
        "threads": torch.get_num_threads(),
        "attention": encoder.config._attn_implementation,
        "train_s": train_s,
        "eval_s": eval_s,
        "train_tokens": tokens,
        "train_padded_tokens": padded,
        "tokens_per_s": padded / train_s,
        "train_cpu": cpu(u0, u1, train_s),
        "eval_cpu": cpu(u1, u2, eval_s),
        "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        "train_loss": loss_sum / max(examples, 1),
        "macro_f1": macro_f1(predicted, actual, job["classes"]),
        "accuracy": correct / max(len(actual), 1),
    }
    with open(out_path, "w") as f:
        json.dump(result, f, indent=2)


if __name__ == "__main__":
    main(*sys.argv[1:4])
