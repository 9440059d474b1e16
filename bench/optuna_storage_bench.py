"""Optuna 5.0 on PostgreSQL: the peer of hpo's storage benchmark.

    python bench/optuna_storage_bench.py postgresql://postgres@127.0.0.1:5432/test

Same objective as `hpo-core/benches/storage.rs --storage URL` (x^2 + k, x float
in [-10, 10], k int in [1, 4], RandomSampler), the same 800 trials shared by 1, 4
and 8 processes on one study, in a fresh database `optuna_bench_<pid>` on the
server (dropped afterwards). Throughput is completed trials divided by the
time from the first worker's first trial to the last worker's last one
(process start-up excluded); statements and commits are counted with
SQLAlchemy's engine events in every worker. The median of three runs is kept
(`BENCH_REPEATS=1` for one run).

Writes bench/results/optuna_storage_postgres.json, which the hpo benchmark
reads to print both side by side. Needs optuna==5.0.0 and psycopg (the venv
of .ci/python-venv.sh).
"""

import json
import os
import subprocess
import sys
import time
import warnings

TRIALS = 800
PROCESSES = [1, 4, 8]
REPEATS = int(os.environ.get("BENCH_REPEATS", "3"))
STUDY = "bench"


def sqlalchemy_url(url):
    for scheme in ("postgresql://", "postgres://"):
        if url.startswith(scheme):
            return "postgresql+psycopg://" + url[len(scheme):]
    raise SystemExit(f"not a PostgreSQL URL: {url}")


def with_db(url, db):
    base = url.split("?")[0]
    return base.rsplit("/", 1)[0] + "/" + db


def worker(url, n, seed):
    import optuna
    import sqlalchemy

    optuna.logging.set_verbosity(optuna.logging.ERROR)
    warnings.simplefilter("ignore")
    storage = optuna.storages.RDBStorage(sqlalchemy_url(url))
    counts = {"statements": 0, "commits": 0}

    def on_execute(*_args, **_kw):
        counts["statements"] += 1

    def on_commit(*_args, **_kw):
        counts["commits"] += 1

    sqlalchemy.event.listen(storage.engine, "before_cursor_execute", on_execute)
    sqlalchemy.event.listen(storage.engine, "commit", on_commit)
    study = optuna.load_study(
        study_name=STUDY, storage=storage, sampler=optuna.samplers.RandomSampler(seed=seed)
    )
    before = dict(counts)

    def objective(trial):
        x = trial.suggest_float("x", -10.0, 10.0)
        k = trial.suggest_int("k", 1, 4)
        return x * x + k

    start = time.time()
    study.optimize(objective, n_trials=n)
    end = time.time()
    print(
        json.dumps(
            {
                "start": start,
                "end": end,
                "statements": counts["statements"] - before["statements"],
                "commits": counts["commits"] - before["commits"],
            }
        )
    )


def run(url, processes):
    import optuna
    import psycopg

    optuna.logging.set_verbosity(optuna.logging.ERROR)
    name = f"optuna_bench_{os.getpid()}"
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        admin.execute(f"CREATE DATABASE {name}")
    db = with_db(url, name)
    optuna.create_study(study_name=STUDY, storage=sqlalchemy_url(db), direction="minimize")
    per = TRIALS // processes
    children = [
        subprocess.Popen(
            [sys.executable, __file__, "--worker", db, str(per), str(i)],
            stdout=subprocess.PIPE,
            text=True,
        )
        for i in range(processes)
    ]
    reports = []
    for c in children:
        out, _ = c.communicate()
        if c.returncode != 0:
            raise SystemExit(f"a worker failed: {c.returncode}")
        reports.append(json.loads(out.strip().splitlines()[-1]))
    study = optuna.load_study(study_name=STUDY, storage=sqlalchemy_url(db))
    complete = sum(t.state.name == "COMPLETE" for t in study.trials)
    numbers = sorted(t.number for t in study.trials)
    optuna.storages.RDBStorage(sqlalchemy_url(db)).engine.dispose()
    del study
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
    start = min(r["start"] for r in reports)
    end = max(r["end"] for r in reports)
    n = per * processes
    return {
        "processes": processes,
        "trials": n,
        "complete": complete,
        "numbers_contiguous": numbers == list(range(len(numbers))),
        "trials_per_s": round(n / (end - start), 1),
        "statements_per_trial": round(sum(r["statements"] for r in reports) / n, 2),
        "commits_per_trial": round(sum(r["commits"] for r in reports) / n, 2),
    }


def main(argv):
    if argv[1] == "--worker":
        worker(argv[2], int(argv[3]), int(argv[4]))
        return
    import optuna
    import psycopg

    url = argv[1]
    rows = []
    for p in PROCESSES:
        runs = sorted((run(url, p) for _ in range(REPEATS)), key=lambda r: r["trials_per_s"])
        row = runs[REPEATS // 2]
        print(f"{p} process(es): {row['trials_per_s']} trials/s", file=sys.stderr)
        rows.append(row)
    with psycopg.connect(url) as c:
        server = c.execute("SELECT version()").fetchone()[0]
    doc = {
        "benchmark": "optuna_storage_postgres",
        "optuna": optuna.__version__,
        "psycopg": psycopg.__version__,
        "server": server,
        "objective": "x^2 + k, x float in [-10, 10], k int in [1, 4]; RandomSampler",
        "repeats": REPEATS,
        "statistic": "median trials/s of the repeats; counts from that run",
        "rows": rows,
    }
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "optuna_storage_postgres.json"), "w") as f:
        json.dump(doc, f, indent=2)
        f.write("\n")
    print(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main(sys.argv)
