"""What a lent GPU machine brings back from the ablation suites, and putting it back here.

On the device (`ablate.sh` calls these; the runs folder is $BERTLAB_RUNS):

    python -m bench.device.pack wait --out OUT --work WORK --until EPOCH SUITE...  # follow, pack every minute
    python -m bench.device.pack pack --out OUT --work WORK SUITE...                # collect, export, pack once
    python -m bench.device.pack pending                                           # suites with runs not ended
    python -m bench.device.pack wait|pack ... --jobs JOB...   # also jobs outside any suite (the successors'
                                                              # pretraining runs, bench/device/successors.py)

Here, after the call (the files came back under the run tool's files_at):

    python -m bench.device.pack restore FILES_AT DEST    # DEST/runs/... and DEST/collected/..., then what to run

$OUT after each pack holds at most 8 files, as a run call brings back (ablate.sh's summary.txt is one):

    results.tar.gz       collected/<suite>/<table>.csv|json (`bertlab ablate collect`'s set, curves included),
                         runs/ablations/<suite>/suite.json, and every run folder of the suites without weights
                         or checkpoints (runs/<job>/: metrics, status, config, log, model card), the --jobs' too
    models.tar.part-NN   runs/<job>/model/: each finished pretraining run's model in fp16 (`bertlab export`),
                         the suites' and the finished --jobs',
                         smallest first up to --models-mb and what $OUT has room for, in parts of PART_BYTES

so that a CPU session can fine-tune more seeds of the same models and merge columns with
`bertlab --runs DEST/runs ablate collect SUITE --into results/ablations/<table>.csv`.

Imports bertlab (ablations.results and suites, jobs.registry, runfolder; bertlab.training.export, with torch, only
when a model is exported).
"""

from __future__ import annotations

import argparse
import csv
import io
import os
import shutil
import sys
import tarfile
import time
from collections import Counter
from pathlib import Path

from bertlab.ablations import results
from bertlab.ablations import suites as ab
from bertlab.jobs.registry import JobRegistry
from bertlab.jobs.runs import Job
from bertlab.storage.runfolder import CHECKPOINT_DIR, MODEL_DIR, SNAPSHOT_DIR, TENSORBOARD_DIR

PART_BYTES = 14 * 2**20  # each models part: under 15 MB, and a run call brings back files of up to 16 MiB
MAX_PARTS = 6  # with summary.txt and results.tar.gz: 8 files, a run call's most
OUT_LIMIT = 64 * 2**20  # what a run call brings back in all
SUMMARY_FILE = "summary.txt"  # ablate.sh's log, still growing while this packs
WEIGHT_SUFFIXES = (".safetensors", ".pt", ".pth", ".bin")
SKIPPED_DIRS = (CHECKPOINT_DIR, SNAPSHOT_DIR, TENSORBOARD_DIR)
RESULTS_FILE = "results.tar.gz"
MODELS_PREFIX = "models.tar.part-"


def say(text: str) -> None:
    print(text, flush=True)


def suite_records(registry: JobRegistry, ids: list[str]) -> list[dict]:
    """The suites' records (suite.json), in the order given; a clear error for an id not in the runs folder."""
    out = []
    for suite in ids:
        record = ab.read_suite(ab.suites_root(registry) / suite)
        if record is None:
            raise SystemExit(f"no suite {suite!r} in {ab.suites_root(registry)}")
        out.append(record)
    return out


def pending(registry: JobRegistry) -> list[str]:
    """Suites in the runs folder with a run not yet ended (an earlier call on this machine ran out of time)."""
    return [
        r["id"] for r in ab.list_suites(registry) if any(s.state not in ab.ENDED for s in ab.suite_runs(r, registry))
    ]


def progress(record: dict, registry: JobRegistry) -> str:
    """'table6-...: 40/63 finished, 14 running, 1 failed'."""
    states = Counter(r.state for r in ab.suite_runs(record, registry))
    active = states["running"] + states["preparing"]
    bad = sum(states[s] for s in ("failed", "cancelled", "missing"))
    text = f"{record['id']}: {states['finished']}/{sum(states.values())} finished, {active} running"
    return text + (f", {bad} failed" if bad else "")


def collect(records: list[dict], registry: JobRegistry, work: Path) -> None:
    """Each suite's set as `bertlab ablate collect` writes it, into work/collected/<suite>/ (finished runs only)."""
    for record in records:
        try:
            results.write_results(record, work / "collected" / record["id"], registry)
        except Exception as exc:  # a half-written run must not cost the rest of the pack: said, not hidden
            say(f"collect {record['id']}: {type(exc).__name__}: {exc}")


def job_states(registry: JobRegistry, jobs: list[str]) -> list[Job]:
    """The jobs outside any suite (the successors' pretraining runs), read afresh; one gone reads as missing."""
    out = []
    for job in jobs:
        try:
            out.append(registry.get(job))
        except Exception:  # a folder removed under us: said as missing, not a crash of the follow
            out.append(Job(job, registry.root / job, None, "missing", False, False, 0.0))
    return out


def jobs_progress(jobs: list[Job]) -> str:
    """'pretraining: 3/5 finished, 1 running, 1 queued (succ-bert-... 64%)'."""
    states = Counter(j.state for j in jobs)
    active = [j for j in jobs if j.state not in ab.ENDED and j.state != "queued"]
    text = f"pretraining: {states['finished']}/{len(jobs)} finished, {len(active)} running"
    text += f", {states['queued']} queued" if states["queued"] else ""
    bad = sum(states[s] for s in ("failed", "cancelled", "missing"))
    text += f", {bad} failed" if bad else ""
    shown = [f"{j.id} {j.progress:.0%}" for j in active if j.progress is not None]
    return text + (f" ({', '.join(shown)})" if shown else "")


def export_models(records: list[dict], registry: JobRegistry, work: Path, jobs: list[str] = ()) -> list[Path]:
    """Export each finished pretraining run of the suites, and each finished job of `jobs`, not exported yet
    into work/models/<job>/model (fp16, with its card); returns every exported model folder."""
    done = []
    finished = [
        run.job
        for record in records
        for run in ab.suite_runs(record, registry)
        if run.column == "pretraining" and run.state == "finished"
    ]
    finished += [j.id for j in job_states(registry, list(jobs)) if j.state == "finished" and j.id not in finished]
    for job in finished:
        target = work / "models" / job / MODEL_DIR
        if not (target / "config.json").is_file():
            from bertlab.training.export import export_run  # deferred: torch

            tmp = target.with_name("model.tmp")
            shutil.rmtree(tmp, ignore_errors=True)
            try:
                export_run(registry.root / job, tmp)
            except Exception as exc:  # one model that will not load must not stop the others
                say(f"export {job}: {type(exc).__name__}: {exc}")
                continue
            tmp.rename(target)
        done.append(target)
    return done


def _folder_bytes(folder: Path) -> int:
    return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())


def _small_files(run_dir: Path):
    """A run folder's files without weights, checkpoints, snapshots or TensorBoard mirrors."""
    for f in sorted(run_dir.rglob("*")):
        rel = f.relative_to(run_dir)
        if f.is_file() and rel.parts[0] not in SKIPPED_DIRS and f.suffix not in WEIGHT_SUFFIXES:
            yield f


def _replace(path: Path, write) -> None:
    """Write `path` through a .tmp beside it, so a call cut off mid-write keeps the last whole file."""
    tmp = path.with_name(path.name + ".tmp")
    write(tmp)
    tmp.replace(path)


def pack_results(records: list[dict], registry: JobRegistry, work: Path, out: Path, jobs: list[str] = ()) -> int:
    """out/results.tar.gz: the collected sets, the suite records and the run folders without weights (the
    suites' and `jobs`')."""

    def write(tmp: Path) -> None:
        with tarfile.open(tmp, "w:gz") as tar:
            collected = work / "collected"
            if collected.is_dir():
                tar.add(collected, arcname="collected")
            folders = []
            for record in records:
                suite_dir = Path(record["dir"])
                tar.add(suite_dir, arcname=f"runs/{ab.SUITES_DIR}/{suite_dir.name}")
                folders += [str(run.get("job")) for run in record["runs"]]
            for job in dict.fromkeys([*folders, *jobs]):
                run_dir = registry.root / job
                for f in _small_files(run_dir) if run_dir.is_dir() else ():
                    tar.add(f, arcname=f"runs/{run_dir.name}/{f.relative_to(run_dir).as_posix()}", recursive=False)
            info = work / "device.json"
            if info.is_file():
                tar.add(info, arcname="device.json")

    _replace(out / RESULTS_FILE, write)
    return (out / RESULTS_FILE).stat().st_size


def pack_models(models: list[Path], out: Path, budget: int) -> tuple[list[Path], list[Path]]:
    """out/models.tar.part-NN: the models smallest first while they fit `budget` bytes (and MAX_PARTS parts);
    returns (brought, left behind). Parts from an earlier pack are replaced."""
    budget = min(budget, MAX_PARTS * PART_BYTES - 2**20)  # tar's headers and padding
    brought, left, used = [], [], 0
    for m in sorted(models, key=_folder_bytes):
        size = _folder_bytes(m)
        if used + size <= budget:
            brought.append(m)
            used += size
        else:
            left.append(m)
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:  # fp16 weights hardly compress
        for m in brought:
            tar.add(m, arcname=f"runs/{m.parent.name}/{MODEL_DIR}")
    data = buffer.getvalue() if brought else b""
    for old in out.glob(MODELS_PREFIX + "*"):
        old.unlink()
    for i in range(0, len(data), PART_BYTES):
        part = out / f"{MODELS_PREFIX}{i // PART_BYTES:02d}"
        _replace(part, lambda tmp, chunk=data[i : i + PART_BYTES]: tmp.write_bytes(chunk))
    return brought, left


def pack(
    records: list[dict], registry: JobRegistry, work: Path, out: Path, models_mb: float, jobs: list[str] = ()
) -> str:
    """Collect, export and pack once; returns a line saying what $OUT now holds."""
    collect(records, registry, work)
    models = export_models(records, registry, work, jobs)
    size = pack_results(records, registry, work, out, jobs)
    log = out / SUMMARY_FILE
    room = OUT_LIMIT - size - (log.stat().st_size if log.is_file() else 0) - 2**20  # the log grows a little yet
    brought, left = pack_models(models, out, min(int(models_mb * 2**20), room))
    mb = sum(_folder_bytes(m) for m in brought) / 2**20
    text = f"packed: {RESULTS_FILE} {size / 2**20:.1f} MiB, {len(brought)} models {mb:.1f} MiB"
    if left:
        text += f"; left on the device (past MODELS_MB or $OUT's 64 MiB): {', '.join(m.parent.name for m in left)}"
    return text


def wait(
    records: list[dict],
    registry: JobRegistry,
    work: Path,
    out: Path,
    until: float,
    models_mb: float,
    poll_s: float = 5.0,
    pack_every_s: float = 60.0,
    jobs: list[str] = (),
) -> bool:
    """Follow the suites (and `jobs`, outside any suite) until every run has ended (or waits on a failed one)
    or the clock reaches `until` (epoch seconds), moving the queue on and packing $OUT every `pack_every_s`;
    True when all finished."""
    t0, last, next_pack = time.time(), None, time.time() + pack_every_s
    while True:
        registry.tick()
        runs = [r for record in records for r in ab.suite_runs(record, registry)]
        own = job_states(registry, list(jobs))
        lines = [progress(record, registry) for record in records] + ([jobs_progress(own)] if own else [])
        if lines != last:
            say(f"[{time.time() - t0:5.0f} s] " + "; ".join(lines))
            last = lines
        if all(r.state in ab.ENDED or r.held for r in runs) and all(j.state in ab.ENDED for j in own):
            return all(r.state == "finished" for r in runs) and all(j.state == "finished" for j in own)
        if time.time() >= until:
            left = sum(r.state not in ab.ENDED for r in runs) + sum(j.state not in ab.ENDED for j in own)
            say(f"deadline: {left} runs not ended; they go on while the machine is held (RESUME=1 follows them)")
            return False
        if time.time() >= next_pack:
            say(pack(records, registry, work, out, models_mb, jobs))
            next_pack = time.time() + pack_every_s
        time.sleep(poll_s)


def summary(records: list[dict], registry: JobRegistry, work: Path, out: Path, jobs: list[str] = ()) -> str:
    """Per job outside a suite, its state and last held-out evaluation; per suite: its runs' states, the failed
    ones with their errors, and each pretrained row's held-out scores from the collected CSV; then the files in
    $OUT."""
    lines = []
    for j in job_states(registry, list(jobs)):
        evals = [m for m in registry.metrics(j.id) if m.get("split") == "eval"] if j.state != "missing" else []
        accs = {k: v for k, v in (evals[-1] if evals else {}).items() if k.endswith("_acc") and isinstance(v, float)}
        text = f"{j.id}: {j.state}" + (f" ({j.error})" if j.error and j.state != "finished" else "")
        text += f", {j.progress:.0%}" if j.progress is not None and j.state != "finished" else ""
        text += "".join(f", held-out {k} {v:.1%}" for k, v in accs.items())
        lines.append(text)
    for record in records:
        lines.append(progress(record, registry))
        for r in ab.suite_runs(record, registry):
            if r.state in ("failed", "missing"):
                lines.append(f"  {r.job}: {r.state}" + (f" ({r.error})" if r.error else ""))
        csv_path = work / "collected" / record["id"] / f"{record['table']}.csv"
        rows = list(csv.DictReader(csv_path.open())) if csv_path.is_file() else []
        scores: dict[str, list[str]] = {}
        for row in rows:
            if row["task"] == "pretraining":
                scores.setdefault(row["variant"], []).append(f"{row['metric']} {float(row['value']):.1f}")
        lines += [f"  {variant}: {', '.join(s)}" for variant, s in scores.items()]
        lines.append(f"  {len(rows)} rows in collected/{record['id']}/{record['table']}.csv")
    files = sorted(f for f in out.iterdir() if f.is_file())
    lines.append("in $OUT: " + ", ".join(f"{f.name} {f.stat().st_size / 2**20:.1f} MiB" for f in files))
    if len(files) > 8:
        lines.append("** more than 8 files in $OUT: a run call brings back 8 **")
    return "\n".join(lines)


def restore(files_at: Path, dest: Path) -> str:
    """Unpack what came back into `dest` (runs/ with the fp16 models in their run folders, collected/) and say
    what to run next."""
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(files_at / RESULTS_FILE) as tar:
        tar.extractall(dest, filter="data")
    parts = sorted(files_at.glob(MODELS_PREFIX + "*"))
    if parts:
        data = b"".join(p.read_bytes() for p in parts)
        with tarfile.open(fileobj=io.BytesIO(data)) as tar:
            tar.extractall(dest, filter="data")
    runs = dest / "runs"
    lines = [f"restored into {dest}: {len(parts)} models parts"]
    in_suites = {
        str(r.get("job"))
        for suite_dir in ((runs / ab.SUITES_DIR).iterdir() if (runs / ab.SUITES_DIR).is_dir() else ())
        for r in (ab.read_suite(suite_dir) or {}).get("runs", [])
    }
    alone = sorted(
        d.name
        for d in (runs.iterdir() if runs.is_dir() else ())
        if d.name not in in_suites and d.name != ab.SUITES_DIR and (d / "job.json").is_file()
    )
    for job in alone:  # jobs outside any suite: the successors' pretraining runs
        has = any((runs / job / MODEL_DIR).rglob("model.safetensors"))  # ELECTRA's pair: one in each half
        lines.append(
            f"pretraining run {job}: " + (f"its fp16 model in {runs / job / MODEL_DIR}" if has else "no model")
        )
    for suite_dir in sorted((runs / ab.SUITES_DIR).iterdir()) if (runs / ab.SUITES_DIR).is_dir() else ():
        record = ab.read_suite(suite_dir)
        if record is None:
            continue
        models = [
            r["job"]
            for r in record["runs"]
            if r["column"] == "pretraining" and (runs / r["job"] / MODEL_DIR / "model.safetensors").is_file()
        ]
        table = record["table"]
        lines += [
            f"suite {record['id']} ({table}): {len(record['runs'])} runs, {len(models)} pretrained models here",
            f"  its set:         {dest}/collected/{record['id']}/{table}.csv (+ .json)",
            f"  as a new set:    cp {dest}/collected/{record['id']}/{table}.{{csv,json}} results/ablations/",
            f"  columns merged:  bertlab ablate --runs {runs} collect {record['id']} --into "
            f"results/ablations/{table}.csv",
            f"  pooled:          bertlab ablate pool results/ablations/{table}.csv "
            f"{dest}/collected/{record['id']}/{table}.csv",
        ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    for name in ("wait", "pack"):
        s = sub.add_parser(name)
        s.add_argument("suites", nargs="*")
        s.add_argument("--jobs", nargs="*", default=[], help="jobs outside any suite (successors' pretraining)")
        s.add_argument("--out", type=Path, required=True)
        s.add_argument("--work", type=Path, required=True)
        s.add_argument("--models-mb", type=float, default=60.0)
        if name == "wait":
            s.add_argument("--until", type=float, required=True, help="stop waiting at this time (epoch seconds)")
            s.add_argument("--poll-s", type=float, default=5.0)
            s.add_argument("--pack-every-s", type=float, default=60.0)
    sub.add_parser("pending")
    r = sub.add_parser("restore")
    r.add_argument("files_at", type=Path, help="the folder the run call's files came back to")
    r.add_argument("dest", type=Path, help="where to unpack (a new folder, e.g. runs-device)")
    args = p.parse_args(argv)
    if args.command == "restore":
        say(restore(args.files_at, args.dest))
        return 0
    registry = JobRegistry()
    if args.command == "pending":
        say(" ".join(pending(registry)))
        return 0
    records = suite_records(registry, args.suites)
    args.out.mkdir(parents=True, exist_ok=True)
    args.work.mkdir(parents=True, exist_ok=True)
    if args.command == "wait":
        finished = wait(
            records,
            registry,
            args.work,
            args.out,
            args.until,
            args.models_mb,
            args.poll_s,
            args.pack_every_s,
            args.jobs,
        )
        return 0 if finished else 1
    say(pack(records, registry, args.work, args.out, args.models_mb, args.jobs))
    say(summary(records, registry, args.work, args.out, args.jobs))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
