#!/usr/bin/env bash
# Builds the GPU device check kit here (a machine with the crate registries):
# the CUDA binaries `criteria` and `gpu_training`, `gpu_training_autotune`
# (burn's autotuning, when KIT_AUTOTUNE=1; `gpu_training_fused` with fusion
# too when KIT_FUSED=1),
# stripped and
# xz-compressed into bench/gpu/kit/ (git-ignored, under 60 MiB), for
# bench/gpu/check.sh to run on a GPU machine that has no network.
#
#   bench/gpu/build.sh            # release binaries with --features cuda
#   bench/gpu/build.sh --dry-run  # debug binaries without CUDA, for check.sh --dry-run
#
# burn-cuda needs no CUDA toolkit to build; the GPU machine needs the
# driver, the CUDA headers and NVRTC at run time (book: "Training with burn").
set -euo pipefail
cd "$(dirname "$0")/../.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/hpo-target}"
if [ "${1:-}" = --dry-run ]; then
    cargo build --example criteria
    cargo build -p hpo-burn --example gpu_training
    echo "dry-run binaries in $CARGO_TARGET_DIR/debug/examples"
    exit 0
fi
KIT=bench/gpu/kit
rm -rf "$KIT"
mkdir -p "$KIT"
cargo build --release --features cuda --example criteria
cargo build --release -p hpo-burn --features cuda --example gpu_training
for b in criteria gpu_training; do
    strip -o "$KIT/$b" "$CARGO_TARGET_DIR/release/examples/$b"
done
# The benchmark once more with burn's autotuning of matrix products and
# reductions, and (KIT_FUSED=1) with kernel fusion as well: its first step
# did not finish within 150 s on an H200 (compiling and benchmarking).
# Opt-in (KIT_AUTOTUNE=1): a second build of burn's kernels, and its first
# step did not finish within 150 s on the H100 either.
if [ "${KIT_AUTOTUNE:-0}" = 1 ]; then
    cargo build --release -p hpo-burn --features cuda-autotune --example gpu_training
    strip -o "$KIT/gpu_training_autotune" "$CARGO_TARGET_DIR/release/examples/gpu_training"
fi
if [ "${KIT_FUSED:-0}" = 1 ]; then
    cargo build --release -p hpo-burn --features cuda-fusion --example gpu_training
    strip -o "$KIT/gpu_training_fused" "$CARGO_TARGET_DIR/release/examples/gpu_training"
fi
for b in "$KIT"/*; do
    xz -T2 -6 -f "$b"
done
size=$(du -cb "$KIT" | tail -1 | cut -f1)
ls -l "$KIT"
if [ "$size" -gt $((60 << 20)) ]; then
    echo "the kit is $((size >> 20)) MiB, over 60 MiB" >&2
    exit 1
fi
echo "kit: $((size >> 20)) MiB in $KIT"
