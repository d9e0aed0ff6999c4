"""How close the Train page's time estimate comes to the training time a job then takes.

    python -m bench.bench_estimates --data ../shared/data                 # five jobs, a few minutes
    python -m bench.bench_estimates --data ../shared/data --steps 200 --out bench/results/estimates/NAME.json
    python -m bench.bench_estimates --data ../shared/data --estimates 5    # each estimate 5 times: its spread

(from the repository root). For each job it does what a user of the Train page does: estimate the job
(`bertlab.jobs.estimates.spec.estimate_spec`, which times a few steps of the job's own model, head and batch on this
machine, with no earlier runs to read from), then run it as the jobs runner does (`python -m bertlab
<kind> ... --run-dir DIR`, one thread unless told) and read the training time the run records (its last
evaluation's `train_s`: steps only, no data preparation or evaluation, as the estimate counts). The ratio
estimate / measured is printed per job; 1.0 is exact, above 1 the estimate was pessimistic.

The jobs: pretraining the mini shape from scratch (bf16 where the CPU has it) on WikiText-2, and
fine-tuning the shipped model on SST-2 (sentence classification), UPOS (tagging), UPOS through the frozen
last four layers and a BiLSTM (the feature-based head, the costliest) and SQuAD (answer spans in windows of
the model's length; trained on 80% of dev, as the train file is not in the shared data).
Other load on the machine moves both the timing inside the estimate and the run: run it on a quiet machine.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bertlab.jobs.estimates.spec import estimate_spec
from bertlab.jobs.estimates.timed_step import measured_step_seconds
from bertlab.jobs.spec import JobSpec, build_command, finetune_args, pretrain_args

REPO = Path(__file__).resolve().parents[1]


def jobs(data: Path, steps: int, threads: int) -> dict[str, JobSpec]:
    """The jobs to estimate and run, by name: each `steps` optimizer steps on one thread."""
    t = ("--threads", str(threads))
    wikitext = data / "corpus" / "wikitext-2-raw"
    pretrain = pretrain_args(
        "configs/mini.yaml",
        corpus=str(wikitext),
        max_steps=steps,
        batch_size=32,
        overrides=(f"train.num_threads={threads}", "train.eval_every=0", "train.save_every=0", "data.dupe_factor=1"),
    )

    def ft(task: str, folder: str, *extra: str) -> JobSpec:
        return JobSpec("finetune", (*finetune_args(task, str(data / folder), max_steps=steps), *t, *extra), "cpu")

    return {
        "pretrain mini (batch 32 x 128)": JobSpec("pretrain", pretrain, "cpu"),
        "fine-tune SST-2": ft("sst2", "glue/SST-2"),
        "fine-tune UPOS": ft("upos", "ud_en_ewt"),
        "feature-based UPOS (last four + BiLSTM)": ft("upos", "ud_en_ewt", "--mode", "feature", "--features", "cat4"),
        "fine-tune SQuAD (answer spans)": ft("squad", "squad", "--batch-size", "16", "--split-dev", "0.8"),
    }


def train_seconds(run_dir: Path) -> float:
    """The training time a finished run recorded (its last evaluation's `train_s`)."""
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]
    timed = [r["train_s"] for r in records if r.get("split") == "eval" and "train_s" in r]
    if not timed:
        raise RuntimeError(f"{run_dir} recorded no training time; see {run_dir / 'log.txt'}")
    return float(timed[-1])


def measure(name: str, spec: JobSpec, workdir: Path, estimates: int = 1) -> dict:
    """Estimate one job with no earlier runs to read (`estimates` times, each timing its steps afresh, for
    the estimate's own spread: the median is compared), run it, and compare."""
    runs = workdir / "no-earlier-runs"
    runs.mkdir(exist_ok=True)
    made, took = [], []
    for _ in range(max(1, estimates)):
        measured_step_seconds.cache_clear()
        t0 = time.perf_counter()
        made.append(estimate_spec(spec, cwd=REPO, runs_dir=runs))
        took.append(time.perf_counter() - t0)
    est = sorted(made, key=lambda e: e.seconds)[len(made) // 2]
    run_dir = workdir / name.split(" (")[0].replace(" ", "-")
    log = run_dir.with_suffix(".log")
    with log.open("w") as out:
        done = subprocess.run(build_command(spec, run_dir), cwd=REPO, stdout=out, stderr=subprocess.STDOUT)
    if done.returncode:
        raise RuntimeError(f"{name} failed; its output is in {log}:\n{log.read_text()[-2000:]}")
    measured = train_seconds(run_dir)
    return {
        "job": name,
        "command": " ".join(["bertlab", spec.kind, *spec.args]),
        "steps": est.steps,
        "estimate_s": round(est.seconds, 1),
        "throughput_source": est.throughput_source,
        "measured_s": round(measured, 1),
        "ratio": round(est.seconds / measured, 2),
        "estimate_took_s": round(statistics.median(took), 1),
        **(
            {
                "estimates_s": [round(e.seconds, 1) for e in made],
                "ratio_range": [
                    round(min(e.seconds for e in made) / measured, 2),
                    round(max(e.seconds for e in made) / measured, 2),
                ],
                "rows_timed": [e.throughput_source.removeprefix("timed here now (").split(" x ")[0] for e in made],
            }
            if len(made) > 1
            else {}
        ),
    }


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", default="../shared/data", help="the shared data folder (glue, ud_en_ewt, squad, corpus)")
    p.add_argument("--steps", type=int, default=120, help="optimizer steps per job")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--only", default="", help="run only the jobs whose name contains this text")
    p.add_argument("--out", default="", help="write the results here as JSON")
    p.add_argument(
        "--estimates", type=int, default=1, help="estimate each job this many times (its steps timed afresh each time)"
    )
    a = p.parse_args(argv)
    data = Path(a.data).resolve()
    if not (data / "ud_en_ewt").is_dir():
        sys.exit(f"{data} has no ud_en_ewt folder: give --data the shared data folder")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, spec in jobs(data, a.steps, a.threads).items():
            if a.only and a.only.lower() not in name.lower():
                continue
            row = measure(name, spec, Path(tmp), a.estimates)
            rows.append(row)
            spread = " (estimates {}-{})".format(*row["ratio_range"]) if "ratio_range" in row else ""
            print(
                f"{row['job']:<42} estimate {row['estimate_s']:7.1f} s  measured {row['measured_s']:7.1f} s  "
                f"ratio {row['ratio']:.2f}{spread}  ({row['throughput_source']})",
                flush=True,
            )
    ratios = [r["ratio"] for r in rows]
    if ratios:
        print(f"estimate / measured: median {statistics.median(ratios):.2f}, range {min(ratios):.2f}-{max(ratios):.2f}")
    if a.out:
        out = Path(a.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
        meta = {"machine": f"{platform.machine()} {platform.system()}, {os.cpu_count()} CPU cores", "load_1min": load}
        run = {"steps": a.steps, "threads": a.threads, "estimates": a.estimates}
        out.write_text(json.dumps({**meta, **run, "jobs": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
