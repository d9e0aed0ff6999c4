"""What a job runs: a `JobSpec` (`bertlab pretrain|finetune|interpret ARGS`, or `bertlab compress distill
ARGS` for kind distill, on a device), checked the way its recipe will check it before it is queued, and
turned into the command line a job runs, or into the torchrun line each machine of a several-machine job
runs (`node_commands`).

Also the Train page's forms as recipe arguments (`pretrain_args`, `finetune_args`), where this
workspace keeps each fine-tuning task's data, and which paths a shared app may read.

Imports the standard library and bertlab.config / data_config / errors / compress.distill_args /
finetune.args / interpret.args / hardware / pretrain_config (the pretraining arguments) / runfolder, all
torch-free: checking a spec imports no recipe.
"""

from __future__ import annotations

import argparse
import contextlib
import ipaddress
import os
import shlex
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from bertlab.compress.distill_args import add_args as add_distill_args
from bertlab.config import PRESETS
from bertlab.data.corpus import NAMED_SOURCES
from bertlab.data.data_config import check_masked_lm_prob, max_predictions_for
from bertlab.errors import InputError
from bertlab.finetune.args import add_args as add_finetune_args
from bertlab.finetune.args import check_features
from bertlab.hardware import gpu_count
from bertlab.interpret.args import DATA_ARGS as INTERPRET_DATA_ARGS
from bertlab.interpret.args import add_args as add_interpret_args
from bertlab.storage.runfolder import REPO_ROOT
from bertlab.training.pretrain_config import PretrainConfig, load_config_file
from bertlab.training.pretrain_config import add_args as add_pretrain_args

TRAINING_KINDS = ("pretrain", "finetune", "distill")  # the recipes that train (and so have an estimate)
KINDS = (*TRAINING_KINDS, "interpret")  # interpret: a probe or head study, saved beside its model
DEVICES = ("auto", "cpu", "cuda")
# the command a kind runs, where it is not `bertlab <kind>`: a distillation is `bertlab compress distill`
RECIPE_COMMANDS = {"distill": ("compress", "distill")}


def recipe_command(kind: str) -> tuple[str, ...]:
    """The words after `bertlab` that run a job of `kind` (("pretrain",), ("compress", "distill"))."""
    return RECIPE_COMMANDS.get(kind, (kind,))


# Fine-tuning tasks of the `bertlab finetune` CLI and where their data lies in this workspace.
FINETUNE_TASKS = ("sst2", "cola", "mrpc", "rte", "qnli", "mnli", "stsb", "upos", "ner", "squad")
_SHARED_DATA = REPO_ROOT.parent / "shared" / "data"
DEFAULT_TASK_DATA = {
    "sst2": "glue/SST-2",
    "cola": "glue/CoLA",
    "mrpc": "glue/MRPC",
    "rte": "glue/RTE",
    "qnli": "glue/QNLI",
    "mnli": "glue/MNLI",
    "stsb": "glue/STS-B",
    "upos": "ud_en_ewt",
    "ner": "wnut17",
    "squad": "squad",
}


class JobError(InputError):
    """A job cannot be submitted, found, cancelled, resumed or deleted; the message says why and what to do."""


@dataclass(frozen=True)
class JobSpec:
    """A job before it runs: `bertlab <kind> <args>` on a device."""

    kind: str  # pretrain | finetune | interpret | distill
    args: tuple[str, ...] = ()  # arguments of `bertlab <kind>` (`recipe_command`), without --run-dir / --resume
    device: str = "auto"  # auto | cpu | cuda; decides which queue the job waits in
    num_gpus: int = 1  # processes (one per GPU) under torchrun when > 1
    name: str = ""  # prefix of the run folder's name (default: from the config or the task)
    after: tuple[str, ...] = ()  # ids of jobs (in the same runs folder) that must finish before this one starts


class _RaisingParser(argparse.ArgumentParser):
    """argparse that raises JobError instead of printing usage and exiting."""

    def error(self, message: str):
        raise JobError(f"{self.prog}: {message}")


def _recipe_parser(kind: str) -> argparse.ArgumentParser:
    add_args = {
        "pretrain": add_pretrain_args,
        "finetune": add_finetune_args,
        "interpret": add_interpret_args,
        "distill": add_distill_args,
    }.get(kind)
    if add_args is None:
        raise JobError(f"unknown job kind {kind!r}; use one of {', '.join(KINDS)}")
    p = _RaisingParser(prog=f"bertlab {' '.join(recipe_command(kind))}", add_help=False)
    add_args(p)
    return p


def parse_recipe_args(kind: str, args: tuple[str, ...]) -> argparse.Namespace:
    """The recipe's own parse of a job's arguments; JobError instead of a usage message."""
    for a in args:
        if a.split("=", 1)[0] in ("--run-dir", "--resume"):
            raise JobError(
                f"leave out {a.split('=', 1)[0]}: the job registry chooses the run folder and resumes for you"
            )
    return _recipe_parser(kind).parse_args(list(args))


def spec_device(spec: JobSpec) -> str:
    """The device a spec asks for: its own field, or one given in its args."""
    device = spec.device
    for i, a in enumerate(spec.args):
        if spec.kind == "pretrain" and a.startswith("train.device="):
            device = a.split("=", 1)[1]
        elif a == "--device" and i + 1 < len(spec.args):
            device = spec.args[i + 1]
        elif a.startswith("--device="):
            device = a.split("=", 1)[1]
    return device


def _resolve_device(device: str, gpus: int) -> str:
    if device not in DEVICES:
        raise JobError(f"device must be auto, cpu or cuda, not {device!r}")
    if device == "auto":
        return "cuda" if gpus > 0 else "cpu"
    if device == "cuda" and gpus == 0:
        raise JobError("device cuda was asked for, but this machine has no CUDA GPU; choose cpu or auto")
    return device


def is_loopback_address(address: str | None) -> bool:
    """True when a server bound to `address` answers only this machine (127.0.0.1, ::1, localhost);
    an empty address means every interface, i.e. shared."""
    address = (address or "").strip().strip("[]")
    if address == "localhost":
        return True
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False


def data_roots() -> list[Path]:
    """The folders a shared app's Train page may read from: $BERTLAB_DATA_ROOTS (separated by
    os.pathsep), else the repository and ../shared/data."""
    env = os.environ.get("BERTLAB_DATA_ROOTS", "")
    roots = (
        [p for p in env.split(os.pathsep) if p.strip()]
        if env.strip()
        else [REPO_ROOT, REPO_ROOT.parent / "shared" / "data"]
    )
    return [Path(r).expanduser().resolve() for r in roots]


def check_path_allowed(path: str, roots: list[Path] | None = None, cwd: str | Path = REPO_ROOT) -> None:
    """Raise JobError unless `path` (relative to `cwd`; symlinks followed) lies under one of `roots`
    (default: data_roots()). Used when the app is shared, so that whoever reaches it cannot make a
    job read any file on the server."""
    roots = data_roots() if roots is None else [Path(r).expanduser().resolve() for r in roots]
    resolved = (Path(cwd) / Path(path).expanduser()).resolve()
    if not any(resolved.is_relative_to(r) for r in roots):
        raise JobError(
            f"{path} is outside the data folders this shared app may read ({', '.join(map(str, roots))}); "
            "put the data there, or list its folder in BERTLAB_DATA_ROOTS (separated by "
            f"{os.pathsep!r}) where the app is started"
        )


def _check_paths(kind: str, ns: argparse.Namespace, cwd: Path, after: tuple[str, ...] = ()) -> None:
    def exists(p: str) -> bool:
        return (cwd / Path(p).expanduser()).exists()

    if kind in ("pretrain", "distill"):
        if ns.config and not exists(ns.config):
            raise JobError(f"config file {ns.config} not found (looked in {cwd}); pick one of configs/*.yaml")
    if kind == "distill":
        teacher = ns.teacher or ""
        if not teacher or ns.layers is None:
            raise JobError("a distillation needs --teacher MODEL and --layers N")
        if (teacher.startswith((".", "/", "~")) or teacher.count("/") != 1) and not exists(teacher) and not after:
            raise JobError(
                f"teacher {teacher} not found (looked in {cwd}); give a checkpoint folder with a masked-LM head"
            )
    elif kind != "pretrain":
        for name, what in INTERPRET_DATA_ARGS.items() if kind == "interpret" else ():
            path = getattr(ns, name, None)
            if path and not exists(path):
                raise JobError(f"--{name} {path} not found (looked in {cwd}); give {what}")
        data = getattr(ns, "data", None)
        if data and not exists(data):
            raise JobError(f"data {data} not found (looked in {cwd}); give the folder or file of the task's data")
        model = getattr(ns, "model", None)
        looks_local = bool(model) and (model.startswith((".", "/", "~")) or model.count("/") != 1)  # else a Hub id
        if looks_local and not exists(model) and not after:  # with `after`, an earlier job writes it
            raise JobError(
                f"starting model {model} not found; give a checkpoint folder (config.json, model.safetensors, vocab.txt)"
            )


def pretrain_config(ns: argparse.Namespace, cwd: Path) -> PretrainConfig:
    """The pretraining config a job's arguments give, read from `cwd` and checked (size, corpus, shapes)."""
    with in_folder(cwd):
        cfg = load_config_file(ns.config, ns.overrides)
        if cfg.size not in PRESETS:
            raise JobError(f"unknown model size {cfg.size!r}; choose one of {', '.join(PRESETS)}")
        for source in cfg.corpus:
            if (
                source not in NAMED_SOURCES
                and not str(source).startswith("hf:")
                and not Path(source).expanduser().exists()
            ):
                raise JobError(
                    f"corpus {source} not found (looked in {cwd}); give a file or folder of text, "
                    f"or one of {', '.join(NAMED_SOURCES)}"
                )
        try:
            cfg.model_config(cfg.vocab_size)
        except (ValueError, TypeError) as exc:
            raise JobError(f"model settings do not fit together: {exc}") from exc
    return cfg


@contextlib.contextmanager
def in_folder(path: Path) -> Iterator[None]:
    """Work in `path` for the block (recipe paths are relative to where a job runs)."""
    old = os.getcwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(old)


def check_recipe_args(spec: JobSpec, cwd: str | Path) -> None:
    """Check a spec's kind, arguments, paths (relative to `cwd`) and pretraining config the way
    its recipe will; JobError with a fix-it message. Devices are `validate`'s."""
    if spec.kind not in KINDS:
        raise JobError(f"unknown job kind {spec.kind!r}; use one of {', '.join(KINDS)}")
    ns = parse_recipe_args(spec.kind, spec.args)
    _check_paths(spec.kind, ns, Path(cwd), spec.after)
    if spec.kind in ("pretrain", "distill"):
        pretrain_config(ns, Path(cwd))


def validate(spec: JobSpec, cwd: str | Path | None = None, gpus: int | None = None) -> JobSpec:
    """Check a spec the way its recipe will (arguments, config, paths, devices) before it is queued.

    Returns the spec with `device` resolved to cpu or cuda. Raises JobError with a fix-it message.
    """
    cwd = Path(cwd or os.getcwd())
    gpus = gpu_count() if gpus is None else gpus
    check_recipe_args(spec, cwd)
    device = _resolve_device(spec_device(spec), gpus)
    if spec.num_gpus < 1:
        raise JobError("number of GPUs must be at least 1")
    if spec.num_gpus > 1:
        if device != "cuda":
            raise JobError(
                f"{spec.num_gpus} GPUs asked for on {device}; several processes need device cuda (or set GPUs to 1)"
            )
        if spec.num_gpus > gpus:
            raise JobError(f"{spec.num_gpus} GPUs asked for, but this machine has {gpus}; lower the number of GPUs")
    return JobSpec(spec.kind, tuple(spec.args), device, spec.num_gpus, spec.name, tuple(spec.after))


def _recipe_args(spec: JobSpec, run_dir: str | Path, resume: bool, progress_flag: bool) -> list[str]:
    """`bertlab <kind>`'s arguments for a job: its own, then the device (last, so that it wins over
    a config or an earlier flag), the run folder and --resume."""
    args = list(spec.args)
    if spec.device in ("cpu", "cuda"):
        args += [f"train.device={spec.device}"] if spec.kind == "pretrain" else ["--device", spec.device]
    args += ["--run-dir", str(run_dir)]
    if resume:
        args.append("--resume")
    if progress_flag:
        args.append("--no-progress")  # a progress bar in log.txt is noise; metrics.jsonl has the numbers
    return args


def build_command(
    spec: JobSpec, run_dir: str | Path, resume: bool = False, python: str | None = None, progress_flag: bool = True
) -> list[str]:
    """The command line a job runs (no shell): `python -m bertlab <kind> ...` or torchrun for several GPUs."""
    python = python or sys.executable
    args = _recipe_args(spec, run_dir, resume, progress_flag)
    if spec.num_gpus > 1:
        torchrun = Path(python).with_name("torchrun")
        launcher = [str(torchrun)] if torchrun.is_file() else [python, "-m", "torch.distributed.run"]
        command = recipe_command(spec.kind)
        return launcher + ["--standalone", "--nproc_per_node", str(spec.num_gpus), "-m", "bertlab", *command, *args]
    return [python, "-m", "bertlab", *recipe_command(spec.kind), *args]


# --- a job across several machines --------------------------------------------------------
@dataclass(frozen=True)
class NodeCommand:
    """What one machine of a several-machine job runs."""

    node: int  # 0 .. nodes-1; with c10d rendezvous the line is the same on every machine
    argv: tuple[str, ...]  # the command, no shell

    @property
    def line(self) -> str:
        """The command as a shell line to paste."""
        return shlex.join(self.argv)


def parse_endpoint(text: str) -> tuple[str, int]:
    """(host, port) of 'HOST:PORT' (an IPv6 host in brackets: '[::1]:29500'); JobError when malformed."""
    host, sep, port = text.strip().rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise JobError(
            f"{text!r} is not HOST:PORT; give the address of the first machine and a free port, e.g. 10.0.0.1:29500"
        )
    return host, int(port)


def node_commands(
    spec: JobSpec,
    run_dir: str | Path,
    nodes: int,
    master: str,
    resume: bool = False,
    launcher: tuple[str, ...] = ("torchrun",),
) -> list[NodeCommand]:
    """The torchrun line each of `nodes` machines runs for `spec`: `spec.num_gpus` processes per
    machine, joined by a c10d rendezvous at `master` ('HOST:PORT' of one of the machines, which
    hosts the rendezvous), and the run folder's name as the rendezvous id.

    `run_dir` must be the same shared folder on every machine (NFS or similar): rank 0 writes the
    status, metrics, checkpoints and model there, every rank reads the vocabulary and, on
    --resume, the checkpoint from there. A failed job resumes with the same lines and `resume`.
    The data cache may be local to each machine (each one then builds its own).

    Raises:
        JobError: fewer than 2 machines, or `master` is not HOST:PORT.
    """
    if nodes < 2:
        raise JobError(f"a job across machines needs at least 2 of them, not {nodes}; for one machine submit it")
    host, port = parse_endpoint(master)
    endpoint = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    argv = (
        *launcher,
        "--nnodes",
        str(nodes),
        "--nproc-per-node",
        str(spec.num_gpus),
        "--rdzv-backend",
        "c10d",
        "--rdzv-endpoint",
        endpoint,
        "--rdzv-id",
        Path(run_dir).name,
        "-m",
        "bertlab",
        *recipe_command(spec.kind),
        *_recipe_args(spec, run_dir, resume, progress_flag=True),
    )
    return [NodeCommand(node, argv) for node in range(nodes)]


# --- specs from form fields (the Train page and `bertlab jobs submit` share these) ----------
def pretrain_args(
    config: str | None = "configs/tiny.yaml",
    size: str | None = None,
    corpus: str | None = None,
    max_steps: int = 0,
    max_time_s: float = 0.0,
    learning_rate: float | None = None,
    batch_size: int | None = None,
    max_seq_length: int | None = None,
    name: str | None = None,
    overrides: tuple[str, ...] = (),
    masked_lm_prob: float | None = None,
    snapshots: bool = False,
) -> tuple[str, ...]:
    """`bertlab pretrain` arguments from the Train page's fields; a budget given here replaces the config's.

    With a sequence length and a masking share, the cap on predictions per sequence follows
    them (max_seq_length x masked_lm_prob, rounded up, as Google's README says), so a 512-token
    run masks 15% of its tokens and not 20 of them."""
    args: list[str] = ["--config", config] if config else []
    if name:
        args.append(f"name={name}")
    if size:
        args.append(f"size={size}")
    if corpus:
        parts = [c.strip() for c in corpus.split(",") if c.strip()]
        args.append(f"corpus={parts[0]}" if len(parts) == 1 else "corpus=[" + ", ".join(parts) + "]")
    if max_steps or max_time_s:
        args += [f"train.max_steps={int(max_steps)}", f"train.max_time_s={float(max_time_s)}", "train.max_tokens=0"]
    if learning_rate:
        args.append(f"train.learning_rate={learning_rate}")
    if batch_size:
        args.append(f"train.batch_size={int(batch_size)}")
    if max_seq_length:
        args.append(f"data.max_seq_length={int(max_seq_length)}")
    if masked_lm_prob:
        try:
            check_masked_lm_prob(masked_lm_prob)
        except InputError as exc:
            raise JobError(str(exc)) from None
        args.append(f"data.masked_lm_prob={masked_lm_prob}")
    if max_seq_length and masked_lm_prob:
        args.append(f"data.max_predictions_per_seq={max_predictions_for(max_seq_length, masked_lm_prob)}")
    if snapshots:
        args.append("train.snapshots=true")
    return tuple(args) + tuple(overrides)


def finetune_args(
    task: str,
    data: str,
    model: str | None = None,
    mode: str = "finetune",
    max_steps: int = 0,
    max_time_s: float = 0.0,
    learning_rate: float | None = None,
    batch_size: int | None = None,
    max_seq_length: int | None = None,
    size: str | None = None,
    *,
    epochs: float = 0.0,
    features: str = "last",
    bilstm: bool = False,
    head_lr: float = 0.0,
    seed: int = 0,
) -> tuple[str, ...]:
    """`bertlab finetune` arguments from the Train page's fields (`size` without `model`: random init).
    The budget is the first of `max_steps`, `max_time_s` and `epochs` that is set; `features`, `bilstm`
    and `head_lr` shape the task layer (Tables 5 and 7), and appear only when they differ from the CLI's
    defaults, as does `seed`."""
    if task not in FINETUNE_TASKS:
        raise JobError(f"unknown task {task!r}; choose one of {', '.join(FINETUNE_TASKS)}")
    if not data:
        raise JobError("give the task's data folder")
    try:
        check_features(features)
    except InputError as exc:
        raise JobError(str(exc)) from exc
    if head_lr < 0 or epochs < 0 or seed < 0:
        raise JobError("the added layers' learning rate, the epochs and the seed cannot be negative")
    args = ["--task", task, "--data", data, "--mode", mode]
    if model:
        args += ["--model", model]  # without one: the shipped model, or random weights of --size
    if size:
        args += ["--size", size]
    if max_steps:
        args += ["--max-steps", str(int(max_steps))]
    elif max_time_s:
        args += ["--max-time-s", str(float(max_time_s))]
    elif epochs:
        args += ["--epochs", f"{epochs:g}"]
    if learning_rate:
        args += ["--lr", str(learning_rate)]
    if batch_size:
        args += ["--batch-size", str(int(batch_size))]
    if max_seq_length:
        args += ["--max-seq-length", str(int(max_seq_length))]
    if features != "last":
        args += ["--features", features]
    if bilstm:
        args.append("--bilstm")
    if head_lr:
        args += ["--head-lr", f"{head_lr:g}"]
    if seed:
        args += ["--seed", str(int(seed))]
    return tuple(args)


def default_task_data(task: str) -> str:
    """Where this workspace keeps a task's data (may not exist elsewhere)."""
    sub = DEFAULT_TASK_DATA.get(task)
    return str(_SHARED_DATA / sub) if sub else ""
