"""Reads what bench/gpu/check.sh left (logs in OUT, studies in WORK) and writes
OUT/gpu_check.json and OUT/gpu_check.md. Standard library only.

    python3 bench/gpu/summary.py OUT WORK DRY(0|1) BUDGET_GIB
"""
import json, os, re, sqlite3, statistics, sys

GIB = 2**30


def read(path, default=""):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return default


def load_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def trials(db):
    """Every trial of the study in an Optuna-schema SQLite file, with attributes."""
    if not os.path.exists(db):
        return []
    con = sqlite3.connect(db)
    out = {}
    for tid, number, state, start, end in con.execute(
        "SELECT trial_id, number, state, datetime_start, datetime_complete FROM trials ORDER BY number"
    ):
        out[tid] = {"number": number, "state": state, "start": start, "end": end,
                    "value": None, "system": {}, "user": {}, "params": {}}
    for tid, value in con.execute("SELECT trial_id, value FROM trial_values"):
        if tid in out:
            out[tid]["value"] = value
    for table, key in (("trial_system_attributes", "system"), ("trial_user_attributes", "user")):
        for tid, k, v in con.execute(f"SELECT trial_id, key, value_json FROM {table}"):
            if tid in out:
                try:
                    out[tid][key][k] = json.loads(v)
                except ValueError:
                    out[tid][key][k] = v
    for tid, name, value, dist in con.execute(
            "SELECT trial_id, param_name, param_value, distribution_json FROM trial_params"):
        if tid in out:
            # Optuna's schema stores a categorical parameter as its choice's index.
            try:
                d = json.loads(dist)
                if d.get("name") == "CategoricalDistribution":
                    value = d["attributes"]["choices"][int(value)]
            except (ValueError, KeyError, IndexError, TypeError):
                pass
            out[tid]["params"][name] = value
    con.close()
    return sorted(out.values(), key=lambda t: t["number"])


def label(t):
    if t["state"] == "FAIL":
        return "oom" if t["system"].get("hpo:failure") == "oom" else "failed"
    return t["state"].lower()


def steps(out):
    rows = {}
    for line in read(os.path.join(out, "steps.txt")).splitlines():
        parts = line.split()
        if len(parts) == 3:
            rows[parts[0]] = {"status": parts[1], "at_seconds": int(parts[2])}
    return rows


def card(out):
    bench = load_json(os.path.join(out, "bench", "gpu_training.json")) or {}
    if bench.get("card"):
        return bench["card"]
    m = re.search(r"\|\s+\d+\s+(NVIDIA [^|]*?)\s{2,}", read(os.path.join(out, "env.txt")))
    return m.group(1).strip() if m else "unknown"


def bench_ratios(out):
    steps = ("bench", "table", "cublas", "burn", "autotune", "fused")
    runs = [load_json(os.path.join(out, d, "gpu_training.json")) or {} for d in steps]
    ours = next((r for r in runs if r.get("card")), runs[0])
    torch = load_json(os.path.join(out, "torch_bench.json")) or {}
    ref = {(r["preset"], r["batch"], r["len"], r["mode"]): r["tokens_per_s"] for r in torch.get("rows", [])}
    rows = []
    for r in (row for run in runs for row in run.get("rows", [])):
        key = (r.get("preset"), r.get("batch"), r.get("len"))
        row = {k: r.get(k) for k in ("preset", "batch", "len", "precision", "fusion", "autotune", "matmul", "tokens_per_s",
                                     "mfu_vs_f32", "mfu_vs_tf32", "mfu_vs_bf16",
                                     "peak_device_bytes", "nvml_process_peak_bytes",
                                     "estimate_bytes", "first_epoch_seconds", "error")}
        tps = r.get("tokens_per_s")
        modes = ("fp32", "tf32") if r.get("precision") == "f32" else ("bf16",)
        for mode in modes:
            t = ref.get(key + (mode,))
            row[f"torch_{mode}_tokens_per_s"] = t
            row[f"ratio_vs_torch_{mode}"] = tps / t if tps and t else None
        matched = ("bf16" if r.get("precision") == "half"
                   else "tf32" if (ours.get("matmul_f32_relative_error") or 0) >= 1e-5 else "fp32")
        row["matched_torch_mode"] = matched
        row["ratio_vs_torch_matched"] = row.get(f"ratio_vs_torch_{matched}") if matched else None
        row["variant"] = variant(r)
        rows.append(row)
    return {"card": ours.get("card"), "matmul_f32_relative_error": ours.get("matmul_f32_relative_error"),
            "matmul_f32_arithmetic": ours.get("matmul_f32_arithmetic"),
            "torch": torch.get("torch"), "torch_device": torch.get("device"), "rows": rows}


def variant(r):
    """Which build of the benchmark made a row (burn's defaults, autotuning,
    fusion) and, without autotuning or fusion, whose matrix-product kernels:
    hpo-burn's table, the default ("plain"; rows from before the table have
    no "matmul" and were burn's, "plain" then), cuBLAS ("cublas", the
    `cublas` step; HPO_CUDA_MATMUL=cublas) or burn's one default ("burn
    matmul")."""
    if r.get("fusion"):
        return "fused"
    if r.get("autotune"):
        return "autotune"
    if r.get("matmul") == "burn":
        return "burn matmul"
    if r.get("matmul") == "cublas":
        return "cublas"
    return "plain"


UNITS = {"ns": 1e-9, "µs": 1e-6, "us": 1e-6, "ms": 1e-3, "s": 1.0}


def kernel_class(name):
    """A coarse kind for a kernel's name, to say what dominates."""
    n = name.lower()
    for kind, keys in (("matmul", ("matmul", "mma", "gemm")), ("reduce", ("reduce", "argmax", "sum", "mean")),
                       ("copy / layout", ("contiguous", "copy", "slice", "cat", "gather", "scatter", "select", "permute")),
                       ("random (dropout)", ("random", "bernoulli", "uniform", "prng")),
                       ("elementwise", ("unary", "binary", "binop", "elemwise", "full", "cmp", "mask", "clamp", "cast", "fill", "powf", "exp", "erf"))):
        if any(k in n for k in keys):
            return kind
    return "other"


def profile(out):
    """cubecl's per-kernel device times from the profile step, summed by kernel."""
    by = {}
    for line in read(os.path.join(out, "cubecl_profile.log")).splitlines():
        m = re.match(r"^\|\s*([0-9.]+)(ns|µs|us|ms|s)\s*\|\s*(.+?)\s*$", line)
        if not m:
            continue
        secs = float(m.group(1)) * UNITS[m.group(2)]
        k = by.setdefault(m.group(3), [0.0, 0])
        k[0] += secs
        k[1] += 1
    total = sum(v[0] for v in by.values())
    if not total:
        return {"ran": False}
    kernels = sorted(({"name": n, "seconds": v[0], "launches": v[1], "share": v[0] / total}
                      for n, v in by.items()), key=lambda k: -k["seconds"])
    classes = {}
    for k in kernels:
        c = classes.setdefault(kernel_class(k["name"]), {"seconds": 0.0, "launches": 0})
        c["seconds"] += k["seconds"]
        c["launches"] += k["launches"]
    for c in classes.values():
        c["share"] = c["seconds"] / total
    run = load_json(os.path.join(out, "profile", "gpu_training.json")) or {}
    return {"ran": True, "kernel_seconds": total, "launches": sum(k["launches"] for k in kernels),
            "classes": dict(sorted(classes.items(), key=lambda kv: -kv[1]["seconds"])),
            "top": kernels[:25], "rows": run.get("rows", [])}


def oom_step(work):
    ts = trials(os.path.join(work, "oom.db"))
    if not ts:
        return {"ran": False}
    first = ts[0]
    eff0 = None
    p = first["params"]
    if "batch_size" in p:
        eff0 = int(p["batch_size"]) * int(p.get("grad_accum", 1))
    # The enqueued trial and its own relaunches (another trial of the study
    # can meet the ballast too, with a lineage and a batch of its own).
    lineage = [t for t in ts if t is first or t["system"].get("failed_trial") == first["number"]]
    chain = [{"number": t["number"], "state": label(t), "micro_batch": t["system"].get("hpo:micro_batch"),
              "accumulation": t["system"].get("hpo:accumulation"),
              "oom_retries": t["system"].get("oom_retries"),
              "failed_trial": t["system"].get("failed_trial"),
              "peak_device_bytes": t["user"].get("peak_device_bytes"),
              "value": t["value"]} for t in lineage]
    done = [c for c in chain if c["state"] == "complete" and c["oom_retries"]]
    recovered = bool(done) and label(first) == "oom" and all(
        c["micro_batch"] and c["accumulation"] and eff0 and c["micro_batch"] * c["accumulation"] == eff0
        for c in done)
    bad = [t["number"] for t in ts if t["state"] == "COMPLETE" and (t["value"] is None or not 0 <= t["value"] <= 1)]
    return {"ran": True, "forced_oom_recovered": recovered, "effective_batch": eff0, "lineage": chain,
            "states": [label(t) for t in ts], "complete_with_meaningless_score": bad,
            "study_went_on": any(t["state"] == "COMPLETE" for t in ts if t not in lineage)}


def jobs_step(out, work, jobs, budget_gib):
    ts = trials(os.path.join(work, f"jobs_{jobs}.db"))
    seconds = read(os.path.join(work, f"jobs_{jobs}.seconds")).strip()
    seconds = float(seconds) if seconds else None
    useful = sum(1 for t in ts if t["state"] in ("COMPLETE", "PRUNED"))
    ooms = [t for t in ts if label(t) == "oom"]
    relaunches = [t for t in ts if t["system"].get("oom_retries")]
    nvml = [int(x) for x in re.findall(r"^\s*(\d+)\s*$", read(os.path.join(out, f"nvml_jobs_{jobs}.csv")), re.M)]
    # OOMs after the correction has seen three measured peaks of a family.
    seen, late = {}, 0
    for t in sorted(ts, key=lambda t: t["start"] or ""):
        fam = t["params"].get("backbone")
        if label(t) == "oom" and seen.get(fam, 0) >= 3:
            late += 1
        if t["system"].get("hpo:peak_bytes"):
            seen[fam] = seen.get(fam, 0) + 1
    return {"trials": len(ts), "useful": useful, "seconds": seconds,
            "useful_per_hour": useful / seconds * 3600 if seconds else None,
            "oom_failures": len(ooms), "oom_relaunches": len(relaunches), "oom_after_learning": late,
            "states": {s: sum(1 for t in ts if label(t) == s) for s in sorted({label(t) for t in ts})},
            "nvml_used_max_mib": max(nvml) if nvml else None,
            "budget_mib": budget_gib * 1024,
            "within_budget": (max(nvml) <= budget_gib * 1024) if nvml else None,
            "timeline": timeline(ts)}


def share_step(out):
    """Step 2c: one small training in k processes at once. Per k: each
    process's timed-epoch tokens/s, their sum, and the sum over the one
    process's (how much more the device trains shared k ways), with the
    wall seconds of the k processes from start to the last exit."""
    base, rows = None, {}
    root = os.path.join(out, "share")
    ks = sorted(int(d[1:]) for d in (os.listdir(root) if os.path.isdir(root) else [])
                if d.startswith("k") and d[1:].isdigit())
    for k in ks:
        procs = []
        for i in range(1, k + 1):
            run = load_json(os.path.join(root, f"k{k}", str(i), "gpu_training.json")) or {}
            r = next(iter(run.get("rows", [])), {})
            procs.append(r.get("tokens_per_s"))
        wall = read(os.path.join(root, f"k{k}", "seconds")).strip()
        done = [t for t in procs if t]
        total = sum(done) if len(done) == k else None
        if k == 1:
            base = total
        rows[k] = {"processes_tokens_per_s": procs, "tokens_per_s": total,
                   "wall_seconds": float(wall) if wall else None,
                   "over_one_process": total / base if total and base else None}
    return rows


def pages_step(out):
    """Step 2d: the same trainings with cubecl's memory pages sized from the
    card and from the budget. Per way and shape: tokens/s and the reserved,
    live and NVML peaks; per shape, budget-sized over card-sized for each."""
    ways = {}
    for way in ("card", "budget"):
        run = load_json(os.path.join(out, f"pages_{way}", "gpu_training.json")) or {}
        ways[way] = {f'{r["preset"]} {r["batch"]}x{r["len"]}': {
            k: r.get(k) for k in ("tokens_per_s", "peak_device_bytes", "peak_in_use_bytes",
                                  "nvml_process_peak_bytes", "estimate_bytes", "device_memory_env")}
            for r in run.get("rows", [])}
    ratios = {}
    for shape, b in ways["budget"].items():
        c = ways["card"].get(shape)
        if c:
            ratios[shape] = {k: b[k] / c[k] if b.get(k) and c.get(k) else None
                             for k in ("tokens_per_s", "peak_device_bytes", "nvml_process_peak_bytes")}
    return {"card": ways["card"], "budget": ways["budget"], "budget_over_card": ratios} \
        if any(ways.values()) else {}


TRIAL_LINE = re.compile(r"^trial +(\d+) +(complete|pruned) +macro-F1 +\S+ +([\d.]+)s")


def trial_seconds(log):
    """criteria's log: each complete or pruned trial's own seconds, by number."""
    out = {}
    for line in read(log).splitlines():
        m = TRIAL_LINE.match(line)
        if m:
            out[int(m.group(1))] = float(m.group(3))
    return out


def kernels_step(out):
    """Step 5b: the same short criteria study with the table and with cuBLAS
    for the products; trials paired by number (the same seed samples the same
    configurations), cuBLAS's seconds over the table's."""
    runs = {m: trial_seconds(os.path.join(out, f"kernels_{m}.log")) for m in ("table", "cublas")}
    if not any(runs.values()):
        return {}
    pairs = sorted(set(runs["table"]) & set(runs["cublas"]))
    ratios = [runs["cublas"][n] / runs["table"][n] for n in pairs if runs["table"][n] > 0]
    return {"table_seconds": runs["table"], "cublas_seconds": runs["cublas"], "paired": len(ratios),
            "cublas_over_table_median": statistics.median(ratios) if ratios else None,
            "cublas_over_table_range": [min(ratios), max(ratios)] if ratios else None}


def timeline(ts):
    """Each trial's start and end in seconds from the study's first start,
    with its backbone and micro-batch, and the mean number of trials in
    flight over the study (the sum of their durations over the study's
    span). A trial's start is when it was sampled, which for a trial sampled
    ahead is before its worker starts: the coordinator's log has launches
    ("worker started"). The key stays `mean_running`, as the committed
    summaries have it."""
    from datetime import datetime

    def at(s):
        try:
            return datetime.fromisoformat(s)
        except (TypeError, ValueError):
            return None
    spans = [(t, at(t["start"]), at(t["end"])) for t in ts]
    starts = [a for _, a, _ in spans if a]
    if not starts:
        return {"trials": [], "mean_running": None}
    t0 = min(starts)
    rows = [{"number": t["number"], "state": label(t), "backbone": t["params"].get("backbone"),
             "micro_batch": t["system"].get("hpo:micro_batch"),
             "start_s": (a - t0).total_seconds(), "end_s": (b - t0).total_seconds() if b else None}
            for t, a, b in spans if a]
    ran = [r for r in rows if r["end_s"] is not None]
    span = max((r["end_s"] for r in ran), default=0)
    busy = sum(r["end_s"] - r["start_s"] for r in ran)
    return {"trials": rows, "mean_running": busy / span if span else None}


# What one CUDA worker process holds beside its allocations, as the executor
# adds it (hpo_burn::CUDA_CONTEXT_BYTES); used only to replay studies run
# before trials recorded hpo:predicted_bytes.
CUDA_CONTEXT_BYTES = 560_000_000


def replay_prediction(rows):
    """The executor's own prediction for studies that did not record it
    (hpo:predicted_bytes), replayed with its rule: each study's run starts
    with nothing learned; a trial's estimate (calibrated) is multiplied by the
    largest of the last 32 ratios measured/estimate of its backbone at its
    micro-batch, or of the backbone when that micro-batch has none yet (1
    before any), and the process context is added. No safety margin."""
    learned, study = {}, None
    for r in rows:
        if r["study"] != study:
            learned, study = {}, r["study"]
        fam, micro = r["backbone"], r["micro_batch"]
        at = learned.get((fam, micro)) or learned.get(fam) or [1.0]
        if r["estimate_admitted"]:
            r["predicted"] = r["estimate_admitted"] * max(at[-32:]) + CUDA_CONTEXT_BYTES
        if r["measured_over_estimate"]:
            for k in (fam, (fam, micro)):
                learned.setdefault(k, []).append(r["measured_over_estimate"])


def peaks(work):
    """Measured peaks against estimates over every study of the check. The
    item's figure: the executor's prediction at admission (corrected, before
    the safety margin, context included; hpo:predicted_bytes) against NVML's
    per-process peak, within 15%."""
    rows = []
    for db in ("tiny", "oom", "jobs_auto", "jobs_2"):
        for t in trials(os.path.join(work, f"{db}.db")):
            m = t["user"].get("peak_device_bytes")
            if not m:
                continue
            rows.append({"study": db, "number": t["number"], "backbone": t["params"].get("backbone"),
                         "micro_batch": t["system"].get("hpo:micro_batch"),
                         "measured": m, "nvml_process": t["user"].get("nvml_process_peak_bytes"),
                         "in_use": t["user"].get("peak_in_use_bytes"),
                         "estimate_admitted": t["system"].get("hpo:estimate_bytes"),
                         "estimate_fit": t["user"].get("estimated_peak_bytes"),
                         "estimate_activations": t["user"].get("estimated_activation_bytes"),
                         "sized_len": t["user"].get("sized_len"),
                         "reserved": t["system"].get("hpo:reserved_bytes"),
                         "predicted": t["system"].get("hpo:predicted_bytes")})
    for r in rows:
        e = r["estimate_admitted"]
        r["measured_over_estimate"] = r["measured"] / e if e else None
        r["nvml_minus_measured"] = r["nvml_process"] - r["measured"] if r["nvml_process"] else None
    source = "executor" if rows and all(r["predicted"] for r in rows) else "replay"
    if source == "replay":
        replay_prediction(rows)
    errs = []
    for r in rows:
        if r.get("predicted") and r["nvml_process"]:
            r["corrected_vs_nvml"] = r["predicted"] / r["nvml_process"] - 1
            errs.append(abs(r["corrected_vs_nvml"]))
    context = [r["nvml_minus_measured"] for r in rows if r["nvml_minus_measured"] is not None]
    # Live allocations between steps over what cubecl reserved: how much of
    # a footprint is the allocator's pages kept for reuse (trials that
    # recorded peak_in_use_bytes).
    in_use = [r["in_use"] / r["measured"] for r in rows if r.get("in_use")]
    return {"trials": rows,
            "in_use_over_reserved_median": statistics.median(in_use) if in_use else None,
            "corrected_within_15pct_of_nvml": (sum(e <= 0.15 for e in errs), len(errs)),
            "prediction_source": source,
            "context_bytes_median": statistics.median(context) if context else None}


def compile_step(out):
    """The tiny trial with each product kernel and kernel cache (step 2b):
    the trial's seconds and its first optimizer step's, from each log."""
    runs = []
    for m, cache in (("table", "cold"), ("burn", "cold"), ("table", "warm")):
        log = re.sub(r"\x1b\[[0-9;]*m", "", read(os.path.join(out, f"compile_{m}_{cache}.log")))
        if not log:
            continue
        trial = re.search(r"time per trial: mean ([0-9.]+)s", log)
        first = re.search(r"optimizer step done .*?step=0 .*?seconds=([0-9.]+)", log)
        runs.append({"matmul": m, "kernel_cache": cache,
                     "trial_seconds": float(trial.group(1)) if trial else None,
                     "first_step_seconds": float(first.group(1)) if first else None})
    return runs


def main():
    out, work, dry = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
    budget_gib = float(sys.argv[4]) if len(sys.argv) > 4 else 24
    summary = {
        "dry_run": dry,
        "card": card(out),
        "steps": steps(out),
        "runtime_as_is": read(os.path.join(out, "runtime_as_is.log")).strip().splitlines()[-1:],
        "runtime": read(os.path.join(out, "runtime.log")).strip().splitlines()[-1:],
        "tiny": [label(t) for t in trials(os.path.join(work, "tiny.db"))],
        "bench": bench_ratios(out),
        "compile": compile_step(out),
        "products": load_json(os.path.join(out, "bench", "gpu_products.json")) or [],
        "profile": profile(out),
        "share": share_step(out),
        "pages": pages_step(out),
        "kernels": kernels_step(out),
        "oom": oom_step(work),
        "jobs": {j: jobs_step(out, work, j, budget_gib) for j in ("auto", "2")},
        "peaks": peaks(work),
    }
    summary["forced_oom_recovered"] = summary["oom"].get("forced_oom_recovered")
    summary["ratio_vs_torch"] = {f'{r["preset"]} {r["batch"]}x{r["len"]} {r["precision"]}{"" if r["variant"] == "plain" else " " + r["variant"]}': r.get("ratio_vs_torch_matched")
                                 for r in summary["bench"]["rows"]}
    with open(os.path.join(out, "gpu_check.json"), "w") as f:
        json.dump(summary, f, indent=1)

    def fmt(v, spec="{:.3g}"):
        return "-" if v is None else spec.format(v)

    md = [f"# GPU check ({summary['card']}{', dry run on the CPU' if dry else ''})", ""]
    md.append("| step | status | at (s) |\n| --- | --- | ---: |")
    md += [f"| {k} | {v['status']} | {v['at_seconds']} |" for k, v in summary["steps"].items()]
    md += ["", f"Runtime as found: `{' '.join(summary['runtime_as_is'])}`",
           "", f"Runtime: `{' '.join(summary['runtime'])}`", "",
           f"Tiny trial: {summary['tiny']}", "",
           f"f32 matrix products: relative error {fmt(summary['bench']['matmul_f32_relative_error'], '{:.1e}')} "
           f"({summary['bench']['matmul_f32_arithmetic']})", "",
           "| model | batch x len | precision | build | tokens/s | torch fp32 | torch tf32 | torch bf16 | ratio (matched) | MFU | peak GiB | NVML GiB | estimate GiB |",
           "| --- | --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in summary["bench"]["rows"]:
        mfu = r.get("mfu_vs_bf16") or (r.get("mfu_vs_tf32") if r.get("matched_torch_mode") == "tf32" else r.get("mfu_vs_f32"))
        gib = lambda b: fmt(b / GIB if b else None, "{:.2f}")
        md.append(f"| {r['preset']} | {r['batch']} x {r['len']} | {r['precision']} | {r['variant']} | {fmt(r['tokens_per_s'], '{:.0f}')} | "
                  f"{fmt(r.get('torch_fp32_tokens_per_s'), '{:.0f}')} | {fmt(r.get('torch_tf32_tokens_per_s'), '{:.0f}')} | "
                  f"{fmt(r.get('torch_bf16_tokens_per_s'), '{:.0f}')} | {fmt(r.get('ratio_vs_torch_matched'), '{:.2f}')} "
                  f"({r.get('matched_torch_mode')}) | {fmt(mfu * 100 if mfu else None, '{:.1f}%')} | "
                  f"{gib(r.get('peak_device_bytes'))} | {gib(r.get('nvml_process_peak_bytes'))} | {gib(r.get('estimate_bytes'))} |")
    if summary["compile"]:
        md += ["", "The tiny trial by product kernel and kernel cache (compile cost):", "",
               "| products | kernel cache | trial s | first step s |", "| --- | --- | ---: | ---: |"]
        md += [f"| {c['matmul']} | {c['kernel_cache']} | {fmt(c['trial_seconds'])} | {fmt(c['first_step_seconds'])} |"
               for c in summary["compile"]]
    if summary["products"]:
        ours = summary["products"][0].get("ours", "table")
        md += ["", f"Matrix products of BERT-base 32 x 512, hpo-burn's ({ours}) against burn's default kernel "
                   "(ms per product; relative difference of the results):", "",
               f"| product | batch x m x k x n | {ours} ms | burn ms | {ours} TFLOP/s | burn TFLOP/s | rel. diff |",
               "| --- | --- | ---: | ---: | ---: | ---: | ---: |"]
        for p in summary["products"]:
            diff = p.get("relative_difference")
            if diff is None:
                diff = max(p.get("relative_difference_lhs_grad") or 0, p.get("relative_difference_rhs_grad") or 0)
            md.append(f"| {p['product']} | {p['batch']} x {p['m']} x {p['k']} x {p['n']} | {fmt(p.get('ms_table'))} | "
                      f"{fmt(p.get('ms_burn'))} | {fmt(p.get('tflops_table'))} | {fmt(p.get('tflops_burn'))} | {fmt(diff, '{:.1e}')} |")
    pr = summary["profile"]
    if pr.get("ran"):
        md += ["", f"Profile (cubecl's kernel profiler, BERT-base f32, every step): {pr['launches']} launches, "
                   f"{pr['kernel_seconds']:.2f} s of device time", "",
               "| kind | device s | share | launches |", "| --- | ---: | ---: | ---: |"]
        md += [f"| {c} | {v['seconds']:.3f} | {v['share'] * 100:.1f}% | {v['launches']} |" for c, v in pr["classes"].items()]
        md += ["", "| kernel | device s | share | launches |", "| --- | ---: | ---: | ---: |"]
        md += [f"| `{k['name'][:120]}` | {k['seconds']:.3f} | {k['share'] * 100:.1f}% | {k['launches']} |" for k in pr["top"][:15]]
    if summary["share"]:
        md += ["", "| processes at once | tokens/s each | tokens/s, all | over one process | wall s |",
               "| ---: | --- | ---: | ---: | ---: |"]
        md += [f"| {k} | {', '.join(fmt(t, '{:.0f}') for t in r['processes_tokens_per_s'])} | "
               f"{fmt(r['tokens_per_s'], '{:.0f}')} | {fmt(r['over_one_process'], '{:.2f}')} | {fmt(r['wall_seconds'], '{:.0f}')} |"
               for k, r in summary["share"].items()]
    if summary["pages"]:
        gib = lambda b: fmt(b / GIB if b else None, "{:.2f}")
        md += ["", "Memory pages sized from the card (cubecl-cuda's default) and from the budget "
                   "(HPO_DEVICE_MEMORY, hpo's patch):", "",
               "| shape | pages from | tokens/s | reserved GiB | in use GiB | NVML GiB | estimate GiB |",
               "| --- | --- | ---: | ---: | ---: | ---: | ---: |"]
        for way in ("card", "budget"):
            md += [f"| {shape} | {way} | {fmt(r['tokens_per_s'], '{:.0f}')} | {gib(r['peak_device_bytes'])} | "
                   f"{gib(r['peak_in_use_bytes'])} | {gib(r['nvml_process_peak_bytes'])} | {gib(r['estimate_bytes'])} |"
                   for shape, r in summary["pages"][way].items()]
    k = summary["kernels"]
    if k:
        md += ["", f"criteria's trials with cuBLAS over the table (step 5b): {k['paired']} paired, median "
                   f"{fmt(k['cublas_over_table_median'], '{:.2f}')}, range "
                   f"{', '.join(fmt(v, '{:.2f}') for v in (k['cublas_over_table_range'] or []))}"]
    o = summary["oom"]
    md += ["", f"Forced OOM: recovered {o.get('forced_oom_recovered')}, states {o.get('states')}, "
               f"study went on {o.get('study_went_on')}, complete with a meaningless score {o.get('complete_with_meaningless_score')}"]
    for c in o.get("lineage", []):
        md.append(f"- trial {c['number']}: {c['state']} at {c['micro_batch']} x {c['accumulation']} "
                  f"(retries {c['oom_retries']}, from {c['failed_trial']})")
    md += ["", "| --jobs | trials | useful | seconds | useful/h | OOM failures | relaunches | after learning | NVML max MiB | budget MiB |",
           "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for j, r in summary["jobs"].items():
        md.append(f"| {j} | {r['trials']} | {r['useful']} | {fmt(r['seconds'], '{:.0f}')} | {fmt(r['useful_per_hour'], '{:.0f}')} | "
                  f"{r['oom_failures']} | {r['oom_relaunches']} | {r['oom_after_learning']} | {fmt(r['nvml_used_max_mib'], '{:.0f}')} | {r['budget_mib']} |")
    for j, r in summary["jobs"].items():
        tl = r["timeline"]
        md.append(f"- --jobs {j} (from sampled to ended): mean trials in flight {fmt(tl['mean_running'], '{:.2f}')}; "
                  + "; ".join(f"{t['number']} {t['backbone']}/{t['micro_batch']} {t['state']} "
                              f"{t['start_s']:.0f}-{fmt(t['end_s'], '{:.0f}')}s" for t in tl["trials"]))
    p = summary["peaks"]
    how = ("the executor's own, recorded at admission" if p.get("prediction_source") == "executor"
           else "replayed with the executor's rule: these trials did not record it")
    md += ["", f"Measured peaks: {len(p['trials'])} trials; the executor's prediction (corrected, before the margin, "
               f"context included; {how}) within 15% of NVML's per-process figure: "
               f"{p['corrected_within_15pct_of_nvml'][0]} of {p['corrected_within_15pct_of_nvml'][1]}; "
               f"NVML minus allocator (context and driver), median {fmt(p['context_bytes_median'] / GIB if p['context_bytes_median'] else None, '{:.2f}')} GiB; "
               f"live allocations between steps over cubecl's reserved peak, median {fmt(p.get('in_use_over_reserved_median'), '{:.2f}')}"]
    with open(os.path.join(out, "gpu_check.md"), "w") as f:
        f.write("\n".join(md) + "\n")
    print("\n".join(md))


if __name__ == "__main__":
    main()
