#!/usr/bin/env bash
# The GPU device check: one call on a machine with an NVIDIA GPU and no
# network, about five minutes, leaving gpu_check.json, gpu_check.md and
# logs.tar.xz (every step's log) in $OUT.
#
#   bench/gpu/check.sh             # on the GPU machine, after bench/gpu/build.sh here
#   bench/gpu/check.sh --dry-run   # the same steps on the CPU, tiny shapes (CI)
#
# Steps, each under its own time limit, in this order:
#   1. runtime: the CUDA runtime check as the machine is, then with CUDA_PATH
#      and LD_LIBRARY_PATH set to what was found;
#   2. tiny: one small from-scratch trial on cuda:0 in a worker process;
#      share (2c): one small training in 1, 2 and 4 processes at once, each
#      one's tokens/s (what sharing the device gives); pages (2d): BERT-large
#      trained with cubecl's memory pages sized from the card, then from the
#      24 GiB budget (HPO_DEVICE_MEMORY), its reserved, live and NVML peaks;
#   3. bench: hpo-burn training tokens/s (BERT-base 32x512, BERT-large
#      16x384; f32 and bf16; first each matrix product by hpo-burn's table
#      against burn's default kernel), the same shapes trained with cuBLAS
#      for the products (cublas: HPO_CUDA_MATMUL=cublas), the f32 shapes
#      with burn's product kernel (burn: HPO_CUDA_MATMUL=burn), and the
#      PyTorch reference on the same shapes
#      (fp32, tf32, bf16 autocast), same call; profile (3c): a few steps of
#      BERT-base 32x512 with cubecl's kernel profiler on, every kernel's
#      device time logged (summed by kernel in the summary); the benchmark
#      built with burn's autotuning (autotune: BERT-base f32) and with
#      fusion too (fused, when the kit has it; FUSED_AUTOTUNE sets cubecl's
#      autotune level) run last (3b: slowest to compile and benchmark);
#   4. oom: a ballast process holds all but BALLAST_KEEP_GIB of the card,
#      and a trial enqueued at micro-batch 64 at the long texts' 99th
#      percentile length (BERT-base) must end
#      COMPLETE after relaunches at smaller micro-batches;
#   5. jobs: criteria --jobs auto --memory-budget 24GiB against --jobs 2 on
#      the same budget and time, NVML's device memory sampled throughout;
#      kernels (5b, opt-in): one short criteria study with the table of
#      product kernels, then with cuBLAS, trial durations paired by number;
#   6. summary: bench/gpu/summary.py reads every log and study into
#      gpu_check.json and gpu_check.md; every log goes into logs.tar.xz (a
#      device call returns at most 8 files).
# A failed step is recorded and the next one runs. A failed runtime check
# ends the check early; a tiny trial that fails skips the other study steps
# (they would fail the same way; a tiny trial that completes with burn's
# product kernel after failing with the table runs them with burn's) but not
# the training benchmark, whose
# per-step timings say where the time went. CHECK_STEPS (default
# "tiny pages share bench cublas burn autotune torch profile oom jobs fused") runs a subset, for a second call after
# a fix, or adds "steptime" (the executor's StepTime on the device: BERT-base
# at micro-batches 8/16/32 x 512 and 32 x 512 recomputed); the runtime step always runs. Every step's limit is cut to what is
# left of CHECK_DEADLINE seconds, so a call always ends with its summary.
set -uo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
DRY=0
[ "${1:-}" = --dry-run ] && DRY=1
OUT=${OUT:-$ROOT/target/gpu-check}
mkdir -p "$OUT"
WORK=$(mktemp -d /tmp/hpo-gpu-check.XXXXXX)
LOGS=$WORK/logs
mkdir -p "$LOGS"
T0=$SECONDS
CHECK_STEPS=" ${CHECK_STEPS:-tiny pages share bench cublas burn autotune torch profile oom jobs fused} "
CHECK_DEADLINE=${CHECK_DEADLINE:-540}
want() { [[ "$CHECK_STEPS" == *" $1 "* ]]; }
tmo() {
    local left=$((CHECK_DEADLINE - (SECONDS - T0) - 12))
    if [ "$left" -lt "$1" ]; then echo $((left > 1 ? left : 1)); else echo "$1"; fi
}
say() { printf '[%4ds] %s\n' $((SECONDS - T0)) "$*" | tee -a "$LOGS/check.log"; }
status() { printf '%s %s %s\n' "$1" "$2" "$((SECONDS - T0))" >>"$LOGS/steps.txt"; }
: >"$LOGS/steps.txt"

if [ $DRY = 1 ]; then
    DEVICE=cpu
    BIN=${HPO_KIT_BIN:-${CARGO_TARGET_DIR:-$HOME/.cache/hpo-target}/debug/examples}
    SHAPES=tiny:4x32,mini:2x48
    PRECISIONS=f32
    STEPS=2
    JOB_SECONDS=8
    BUDGET_GIB=1
    # Debug builds on two cores: small splits keep each trial to seconds.
    STUDY_FLAGS="--validation 0.02 --test 0.02"
    JOB_FLAGS="--train-limit 64"
else
    DEVICE=cuda:0
    BIN=$WORK/bin
    SHAPES=${BENCH_SHAPES:-base:32x512,large:16x384}
    PRECISIONS=${BENCH_PRECISIONS:-f32,half}
    STEPS=${BENCH_STEPS:-6}
    # Long enough for the mixed opening and some of what follows (the H200
    # afternoon call: the first ten trials took 55 s); the deadline cuts it.
    JOB_SECONDS=${JOB_SECONDS:-120}
    BUDGET_GIB=24
    STUDY_FLAGS=""
    JOB_FLAGS=""
    mkdir -p "$BIN"
    for f in bench/gpu/kit/*.xz; do
        b=$BIN/$(basename "$f" .xz)
        xz -dc "$f" >"$b" && chmod +x "$b"
    done
fi

finish() {
    cp "$WORK"/*.db "$LOGS/" 2>/dev/null
    python3 "$ROOT/bench/gpu/summary.py" "$LOGS" "$WORK" $DRY $BUDGET_GIB >"$LOGS/summary.log" 2>&1
    cp "$LOGS/gpu_check.json" "$LOGS/gpu_check.md" "$OUT/" 2>/dev/null
    tar -C "$WORK" -cJf "$OUT/logs.tar.xz" logs 2>/dev/null
    if [ "${KEEP_KERNELS:-0}" = 1 ] && [ -d "$WORK/kernels" ]; then
        timeout 60 tar -C "$WORK" -cf - kernels | xz -T0 -6 >"$OUT/kernels.tar.xz"
    fi
    cat "$LOGS/summary.log"
}

say "check on $DEVICE, binaries in $BIN, work in $WORK"
# Kernels compiled once are kept for every later process of the check; the
# compilation log says how many were compiled (cubecl reads cubecl.toml
# from the working directory, and the binaries run from $WORK).
export HPO_KERNEL_CACHE=$WORK/kernels
# A kernel cache kept by an earlier call on a card of the same architecture
# (bench/gpu/cache/kernels.tar.xz, committed; carried beside the kit) spares
# this call the compilation; KEEP_KERNELS=1 returns this call's cache in $OUT.
CARRIED_CACHE=$ROOT/bench/gpu/cache/kernels.tar.xz
if [ $DRY = 0 ] && [ -e "$CARRIED_CACHE" ]; then
    tar -C "$WORK" -xJf "$CARRIED_CACHE" && say "kernel cache: $(find "$WORK/kernels" -type f | wc -l) files carried in"
fi
cat >"$WORK/cubecl.toml" <<EOF
[compilation.logger]
level = "basic"
file = "$LOGS/cubecl_compile.log"
[autotune.logger]
level = "minimal"
file = "$LOGS/cubecl_autotune.log"
EOF
compiled() { cat "$LOGS/cubecl_compile.log" 2>/dev/null | wc -l; }
QUIET_LOG=warn,hpo_core::executor=info
STEP_LOG=warn,hpo_core::executor=info,hpo_burn::train=debug

# The data: the shipped VADER tweets, and for the OOM step long texts made
# of 16 consecutive tweets of one label each (real text, longer documents:
# to fill 384 tokens, not to measure accuracy).
TWEETS=$ROOT/data/vader/tweets.tsv
LONG=$WORK/long.tsv
awk -F'\t' 'NR > 1 { t[$3] = t[$3] " " $4; n[$3]++;
    if (n[$3] == 16) { print t[$3] "\t" $3; t[$3] = ""; n[$3] = 0 } }
    BEGIN { print "text\tlabel" }' "$TWEETS" >"$LONG"
cd "$WORK"

# --- environment -------------------------------------------------------------
{
    date -u
    uname -a
    nvidia-smi 2>&1 || echo "nvidia-smi: not available"
    nvcc --version 2>&1 || echo "nvcc: not on PATH"
    echo "CUDA_PATH=${CUDA_PATH:-}"
    echo "LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}"
    cat /etc/ld.so.conf.d/*.conf 2>&1
    python3 -c 'import torch; print("torch", torch.__version__, torch.cuda.is_available())' 2>&1
    echo "cuBLAS libraries:"
    find / -xdev -name 'libcublas.so*' 2>/dev/null | head -8
    ldconfig -p 2>/dev/null | grep -F libcublas.so
    nproc
    free -g
} >"$LOGS/env.txt" 2>&1

# --- 1. runtime --------------------------------------------------------------
say "1. runtime check, as the machine is"
timeout "$(tmo 60)" "$BIN/gpu_training" --device "$DEVICE" --check-runtime >"$LOGS/runtime_as_is.log" 2>&1
RT_AS_IS=$?
if [ $DRY = 0 ] && [ $RT_AS_IS != 0 ]; then
    # What an operator would do with the error's advice: point CUDA_PATH at
    # the toolkit and put NVRTC's folder on the loader's path.
    for c in /usr/local/cuda /usr/local/cuda-13.0 /usr/local/cuda-13 /opt/cuda; do
        [ -e "$c/include/cuda_runtime.h" ] && { export CUDA_PATH=$c; break; }
    done
    NVRTC=$(find / -xdev -name 'libnvrtc.so*' 2>/dev/null | grep -v -e builtins -e stubs | head -1)
    [ -n "$NVRTC" ] && export LD_LIBRARY_PATH=$(dirname "$NVRTC")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    say "   set CUDA_PATH=${CUDA_PATH:-} LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}"
fi
timeout "$(tmo 60)" "$BIN/gpu_training" --device "$DEVICE" --check-runtime >"$LOGS/runtime.log" 2>&1
RT=$?
status runtime $RT
say "   as is: $RT_AS_IS, after setup: $RT ($(tail -1 "$LOGS/runtime.log"))"
if [ $RT != 0 ]; then
    say "runtime check failed: stopping"
    finish
    exit 1
fi

# --- 2. one tiny trial ---------------------------------------------------------
# tiny_trial NAME SECONDS: the tiny study (one enqueued trial) under its own
# storage NAME.db, logging to NAME.log, within SECONDS; the caller's
# environment (HPO_CUDA_MATMUL, HPO_KERNEL_CACHE) passes through.
tiny_trial() {
    RUST_LOG=$STEP_LOG timeout "$(tmo "$2")" "$BIN/criteria" --from-scratch --device "$DEVICE" \
        --data "$TWEETS" --storage "sqlite:///$WORK/$1.db" --study tiny --trials 1 --jobs 1 \
        --epochs 1 --train-limit 128 --trial-timeout "$(tmo $(($2 - 10)))" $STUDY_FLAGS \
        --enqueue '{"backbone": "Light", "batch_size": 16, "length_pct": 50, "grad_accum": 1}' \
        >"$LOGS/$1.log" 2>&1
}
completed() { grep -qE '^trial +0 complete' "$LOGS/$1.log"; }
TINY_OK=1
if want tiny; then
    say "2. one tiny trial in a worker process"
    tiny_trial tiny 150
    TINY=$?
    status tiny $TINY
    say "   exit $TINY: $(grep -E '^trial ' "$LOGS/tiny.log" | head -3 | cut -c1-60 | tr '\n' ' ')"
    say "   kernels compiled so far: $(compiled)"
    if [ $TINY != 0 ] || ! completed tiny; then
        TINY_OK=0
        if [ $DRY = 0 ]; then
            # Once more with burn's product kernel: if that completes, the
            # table broke it, and the other steps run with burn's.
            say "   the tiny trial did not complete: once more with HPO_CUDA_MATMUL=burn"
            HPO_CUDA_MATMUL=burn tiny_trial tiny_burn 120
            status tiny_burn $?
            if completed tiny_burn; then
                say "   it completed with burn's kernel: the rest runs with HPO_CUDA_MATMUL=burn"
                export HPO_CUDA_MATMUL=burn
                TINY_OK=1
            fi
        fi
        [ $TINY_OK = 0 ] && say "   the tiny trial did not complete: the other study steps are skipped"
    fi
fi

# --- 2b. compile cost (opt-in, CHECK_STEPS="compile") -----------------------------
# The tiny trial three times, each in a fresh process: with hpo-burn's
# product table and an empty kernel cache, with burn's product kernel and
# another empty cache, then with the table again on the first cache: what
# compiling the table's kernels adds to a short trial, and what a later
# trial of the same study pays.
if want compile && [ $DRY = 0 ]; then
    for run in table:cold burn:cold table:warm; do
        m=${run%%:*}
        say "2b. compile: the tiny trial, $m products, ${run#*:} kernel cache"
        HPO_KERNEL_CACHE=$WORK/kernels_$m HPO_CUDA_MATMUL=$m tiny_trial "compile_${m}_${run#*:}" 150
        status "compile_${m}_${run#*:}" $?
        say "   $(grep -E '^time per trial' "$LOGS/compile_${m}_${run#*:}.log")"
    done
fi

# --- 2c. sharing the device: k training processes at once ----------------------------
# The same small training (criteria's light trials: BERT-base, 32 short
# texts a step) in 1, 2 and 4 processes started together, each reporting its
# timed epoch's tokens/s: how much more one GPU trains when processes share
# it (time-sliced, no MPS) than one process alone. This is the figure
# --jobs auto's count of concurrent trials has to follow; memory alone does
# not say it.
if want share && [ $TINY_OK = 1 ]; then
    SHARE_SHAPE=${SHARE_SHAPE:-base:32x64}
    SHARE_STEPS=${SHARE_STEPS:-40}
    SHARE_KS=${SHARE_KS:-1 2 4}
    if [ $DRY = 1 ]; then SHARE_SHAPE=tiny:4x32 SHARE_STEPS=2 SHARE_KS="1 2"; fi
    say "2c. share: $SHARE_SHAPE, $SHARE_STEPS steps an epoch, in $SHARE_KS processes at once"
    for k in $SHARE_KS; do
        start=$SECONDS
        limit=$(tmo 60)
        for i in $(seq "$k"); do
            mkdir -p "$LOGS/share/k$k/$i"
            RUST_LOG=warn timeout "$limit" "$BIN/gpu_training" --device "$DEVICE" --shapes "$SHARE_SHAPE" \
                --precisions f32 --steps "$SHARE_STEPS" --out "$LOGS/share/k$k/$i" \
                >"$LOGS/share/k$k/$i.log" 2>&1 &
        done
        rc=0
        for i in $(seq "$k"); do wait -n || rc=$?; done
        echo $((SECONDS - start)) >"$LOGS/share/k$k/seconds"
        status "share_k$k" $rc
        say "   $k at once: exit $rc in $((SECONDS - start)) s"
    done
fi

# --- 3. training speed ---------------------------------------------------------
bench() { # name binary [seconds shapes precisions extra-flags]
    local shapes=${4:-$SHAPES} precisions=${5:-$PRECISIONS} extra=${6:-}
    say "3. $1: hpo-burn training speed ($shapes; $precisions)"
    mkdir -p "$LOGS/$1"
    # The example rewrites its JSON after every row: a step cut short keeps what ran.
    RUST_LOG=$STEP_LOG timeout "$(tmo "${3:-150}")" "$BIN/$2" --device "$DEVICE" --shapes "$shapes" \
        --precisions "$precisions" --steps "$STEPS" --out "$LOGS/$1" $extra >"$LOGS/$1.log" 2>&1
    status "$1" $?
    say "   $(compiled) kernels compiled so far"
}
# --- 2d. memory pages: one training with cubecl's pages sized from the card, --------
# then from the budget ($HPO_DEVICE_MEMORY, as the executor sets it on its
# workers; hpo's patched cubecl-cuda, vendor/cubecl-cuda/PATCH.md): what a
# heavy trial reserves (cubecl), holds live (in use) and costs the device
# (NVML) each way, and whether its speed changes.
if want pages && [ $TINY_OK = 1 ]; then
    PAGES_SHAPES=${PAGES_SHAPES:-large:16x48,large:64x48}
    [ $DRY = 1 ] && PAGES_SHAPES=tiny:4x32
    for pages in card budget; do
        say "2d. pages from the $pages"
        if [ $pages = budget ]; then mem=$((BUDGET_GIB << 30)); else mem=""; fi
        HPO_DEVICE_MEMORY=$mem bench "pages_$pages" gpu_training 90 "$PAGES_SHAPES" f32
    done
fi

# --products: first each matrix product of a BERT-base step by hpo-burn's
# kernel table and by burn's default kernel, timed and compared.
PRODUCTS=--products
[ $DRY = 1 ] && PRODUCTS=""
want bench && bench bench gpu_training 150 "$SHAPES" "$PRECISIONS" "$PRODUCTS"
# The same f32 shapes with burn's default product kernel (HPO_CUDA_MATMUL=burn),
# in the same call: what the table changes.
if want burn && [ $DRY = 0 ]; then
    HPO_CUDA_MATMUL=burn bench burn gpu_training 120 "$SHAPES" f32
fi
# The same shapes with cuBLAS for the products (HPO_CUDA_MATMUL=cublas;
# hpo-burn's table is the default), in the same call: what cuBLAS changes.
if want cublas && [ $DRY = 0 ]; then
    HPO_CUDA_MATMUL=cublas bench cublas gpu_training 120 "$SHAPES" "$PRECISIONS"
fi
# Opt-in (CHECK_STEPS="steptime", a call of its own): the executor's
# StepTime on this device, BERT-base at one length and three micro-batches
# (a pass's fixed cost) and with activation recomputation (its time
# factor); the CPU's figures stand in until this runs (book: Training with
# burn, "Activation recomputation"). The dry run takes it with tiny shapes.
if want steptime || [ $DRY = 1 ]; then
    STEPTIME_SHAPES=${STEPTIME_SHAPES:-base:8x512,base:16x512,base:32x512,base:32x512+r}
    [ $DRY = 1 ] && STEPTIME_SHAPES=tiny:2x32,tiny:4x32,tiny:4x32+r
    bench steptime gpu_training 150 "$STEPTIME_SHAPES" f32
fi
if ! want torch; then
    :
elif [ $DRY = 0 ] || python3 -c 'import torch, transformers' 2>/dev/null; then
    say "   PyTorch reference"
    TORCH_SHAPES=$SHAPES
    [ $DRY = 1 ] && TORCH_SHAPES=tiny:4x32
    timeout "$(tmo 120)" python3 "$ROOT/bench/gpu/torch_bert_bench.py" --shapes "$TORCH_SHAPES" \
        --secs "${TORCH_SECS:-2}" --json "$LOGS/torch_bench.json" >"$LOGS/torch_bench.log" 2>&1
    status torch $?
else
    say "   PyTorch reference skipped: no torch/transformers in this python3 (as in CI)"
    status torch skipped
fi

# --- 3c. where the device time goes ------------------------------------------------
if ! want profile; then
    :
elif [ $DRY = 0 ]; then
    # cubecl's profiler times every kernel on the device (each launch waits
    # for the one before, so the step's wall time means nothing here) and
    # logs one line per kernel; summary.py sums them by kernel. cubecl reads
    # cubecl.toml from the working directory: this step runs from its own.
    say "3c. profile: BERT-base 32x512 f32, cubecl's kernel profiler"
    mkdir -p "$WORK/profile" "$LOGS/profile"
    cat >"$WORK/profile/cubecl.toml" <<EOF
[profiling.logger]
level = "basic"
file = "$LOGS/cubecl_profile.log"
EOF
    (cd "$WORK/profile" && RUST_LOG=warn timeout "$(tmo 120)" "$BIN/gpu_training" --device "$DEVICE" \
        --shapes "${PROFILE_SHAPE:-base:32x512}" --precisions f32 --steps 2 --out "$LOGS/profile" \
        >"$LOGS/profile.log" 2>&1)
    status profile $?
else
    say "3c. profile: skipped in a dry run (cubecl's profiler times device kernels)"
    status profile skipped
fi

# --- 4. a forced real OOM --------------------------------------------------------
if ! want oom || [ $TINY_OK = 0 ]; then
    :
elif [ $DRY = 0 ]; then
    KEEP=${BALLAST_KEEP_GIB:-12}
    say "4. forced OOM: ballast leaves ${KEEP} GiB free"
    python3 - "$KEEP" "$WORK/ballast.ready" >"$LOGS/ballast.log" 2>&1 <<'EOF' &
import sys, time, torch
keep = int(float(sys.argv[1]) * 2**30)
free, total = torch.cuda.mem_get_info()
x = torch.empty(max(free - keep, 0), dtype=torch.uint8, device="cuda")
free2, _ = torch.cuda.mem_get_info()
print(f"ballast holds {x.numel() / 2**30:.2f} GiB; {free2 / 2**30:.2f} GiB free of {total / 2**30:.2f}", flush=True)
open(sys.argv[2], "w").close()
time.sleep(900)
EOF
    BALLAST=$!
    for _ in $(seq 60); do [ -e "$WORK/ballast.ready" ] && break; sleep 0.5; done
    TOTAL=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits | head -1)
    # The budget is the whole card, so the executor admits the trial and it
    # meets the ballast for real.
    RUST_LOG=$QUIET_LOG timeout "$(tmo 150)" "$BIN/criteria" --from-scratch --device "$DEVICE" \
        --data "$LONG" --storage "sqlite:///$WORK/oom.db" --study oom --trials 2 --jobs 1 \
        --epochs 1 --train-limit 128 --memory-budget "${TOTAL}MiB" --trial-timeout 60 \
        --enqueue '{"backbone": "Light", "batch_size": 64, "length_pct": 99, "grad_accum": 1}' \
        >"$LOGS/oom.log" 2>&1
    status oom $?
    kill $BALLAST 2>/dev/null
    wait $BALLAST 2>/dev/null
else
    say "4. forced OOM: skipped in a dry run (no device to fill)"
    status oom skipped
fi

# --- 5. --jobs auto against --jobs 2 -------------------------------------------------
# timed_study NAME JOBS SECONDS SLACK: criteria's study NAME.db (--jobs
# JOBS, --timeout SECONDS, the budget) within SECONDS + SLACK, logging to
# NAME.log, from its own copy of the kernel cache as the earlier steps left
# it ($WORK/kernels, which the run does not write: compiling a backbone's
# kernels costs tens of seconds, and the run that went second used to find
# them compiled by the first, so --jobs 2, always second, ran its first
# trials warm). The caller's environment (HPO_CUDA_MATMUL) passes through.
timed_study() {
    rm -rf "$WORK/kernels_$1"
    [ -d "$WORK/kernels" ] && cp -a "$WORK/kernels" "$WORK/kernels_$1"
    HPO_KERNEL_CACHE=$WORK/kernels_$1 RUST_LOG=$QUIET_LOG timeout "$(tmo $(($3 + $4)))" "$BIN/criteria" --from-scratch \
        --device "$DEVICE" --data "$TWEETS" --storage "sqlite:///$WORK/$1.db" \
        --study "${1//_/-}" --trials 200 --timeout "$3" --jobs "$2" \
        --memory-budget "${BUDGET_GIB}GiB" --trial-timeout 90 $STUDY_FLAGS $JOB_FLAGS \
        >"$LOGS/$1.log" 2>&1
}
for jobs in auto 2; do
    { want jobs && [ $TINY_OK = 1 ]; } || break
    say "5. criteria --jobs $jobs --memory-budget ${BUDGET_GIB}GiB for ${JOB_SECONDS}s"
    SAMPLER=""
    if [ $DRY = 0 ]; then
        nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 250 \
            >"$LOGS/nvml_jobs_$jobs.csv" 2>/dev/null &
        SAMPLER=$!
    fi
    start=$SECONDS
    timed_study "jobs_$jobs" "$jobs" "$JOB_SECONDS" 100
    rc=$?
    echo $((SECONDS - start)) >"$WORK/jobs_$jobs.seconds"
    [ -n "$SAMPLER" ] && kill "$SAMPLER" 2>/dev/null
    status "jobs_$jobs" $rc
done

# --- 5b. products by kernel in criteria's own trials (opt-in, CHECK_STEPS="kernels") ---
# The same short study (--jobs KERNELS_JOBS, KERNELS_SECONDS) with the
# table of cubek kernels, then with cuBLAS, same seed: trial for trial, what
# cuBLAS does to criteria's small trials on one machine (the fourth H200
# check saw them 10-40 % slower with cuBLAS, across two machines;
# KERNELS_JOBS=1 takes the other processes out of it).
if want kernels && [ $TINY_OK = 1 ] && [ $DRY = 0 ]; then
    KERNELS_SECONDS=${KERNELS_SECONDS:-60}
    for m in table cublas; do
        say "5b. kernels: criteria --jobs ${KERNELS_JOBS:-2} with HPO_CUDA_MATMUL=$m for ${KERNELS_SECONDS}s"
        HPO_CUDA_MATMUL=$m timed_study "kernels_$m" "${KERNELS_JOBS:-2}" "$KERNELS_SECONDS" 60
        status "kernels_$m" $?
    done
fi

# Both runs stop at their --timeout with trials sampled ahead and not
# started, which the coordinator gives back (failed, a WAITING copy
# enqueued). A heartbeat still beating for one of them would find it failed
# and warn as if a stale-trial reaper had ended it: one coordinator and no
# reaper here, so any such warning is the coordinator's bug.
if want jobs && [ $TINY_OK = 1 ]; then
    # What the runs compiled joins the cache the later steps (and
    # KEEP_KERNELS) see, now that no run is left to start from the old one.
    [ -d "$WORK/kernels_jobs_2" ] && mkdir -p "$WORK/kernels" && cp -a "$WORK/kernels_jobs_2/." "$WORK/kernels/"
    # The step's status is the number of warnings: 0 passes.
    status heartbeats "$(cat "$LOGS"/jobs_*.log 2>/dev/null | grep -c "heartbeat stopped")"
fi

# --- 3b. the benchmark with autotuning, then with fusion, last: their kernels take -----
# longest to compile and benchmark (autotuning: BERT-base f32 by default).
if want autotune && [ -x "$BIN/gpu_training_autotune" ]; then
    # burn's autotuner chooses the products here, not hpo-burn's table.
    HPO_CUDA_MATMUL=burn bench autotune gpu_training_autotune 180 "${AUTOTUNE_SHAPES:-${SHAPES%%,*}}" "${AUTOTUNE_PRECISIONS:-f32}"
fi
# FUSED_AUTOTUNE=minimal (cubecl 0.10 reads CUBECL_AUTOTUNE_LEVEL) rounds
# each autotune key's sizes up to powers of a 1.25x larger base (2.5 where
# cubecl uses 2; cubecl-runtime's tune::anchor), so fewer distinct shapes
# are benchmarked; `full` rounds none. Whether the fused build then
# finishes its first step, where it did not within 150 s with cubecl's
# default (balanced) on the H200, is not measured yet.
if want fused && [ -x "$BIN/gpu_training_fused" ]; then
    level=${FUSED_AUTOTUNE:-balanced}
    say "3b. fused: cubecl autotune level $level"
    CUBECL_AUTOTUNE_LEVEL=$level bench fused gpu_training_fused
fi

# --- 6. summary -------------------------------------------------------------------
say "6. summary"
finish
# The exit status says whether every step that ran succeeded (CI runs the
# dry run and fails on it).
FAILED=$(awk '$2 != "0" && $2 != "skipped" { print $1 }' "$LOGS/steps.txt" | tr '\n' ' ')
if [ -n "$FAILED" ]; then
    say "failed steps: $FAILED"
    exit 1
fi
say "done"
