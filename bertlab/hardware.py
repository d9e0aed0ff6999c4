"""What this machine has and what runs on it: processes, GPUs, the torch device to use.

Process probes read /proc (a pid's start time tells a reused pid apart); GPU probes read
CUDA_VISIBLE_DEVICES, the driver and nvidia-smi. None of them imports torch, so the jobs CLI and
the supervisor stay small; `pick_device` and `hardware_description` import it when called.

Imports the standard library and bertlab.errors.
"""

from __future__ import annotations

import contextlib
import os
import platform
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from bertlab.errors import InputError

if TYPE_CHECKING:
    import torch


# --- processes -------------------------------------------------------------------------
def _proc_stat(pid: int | str) -> list[str] | None:
    """Fields of /proc/PID/stat after the command name (state first), or None."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return raw[raw.rfind(")") + 2 :].split()


def process_start_time(pid: int) -> int | None:
    """Start time of a process in clock ticks since boot (tells a reused pid apart), or None."""
    fields = _proc_stat(pid)
    return int(fields[19]) if fields and len(fields) > 19 else None


def own_start_time() -> int | None:
    """This process's start time, as `process_start_time` reads it for other processes."""
    fields = _proc_stat("self")
    return int(fields[19]) if fields and len(fields) > 19 else None


def ancestors() -> set[int]:
    """This process and those above it (the job supervisor, torchrun), from /proc."""
    out, pid = set(), os.getpid()
    while pid > 1 and pid not in out:
        out.add(pid)
        fields = _proc_stat(pid)  # [state, ppid, ...]
        if not fields:
            break
        try:
            pid = int(fields[1])
        except (ValueError, IndexError):
            break
    return out


def pid_alive(pid: int | None, start: int | None = None) -> bool:
    """True if `pid` runs (not a zombie) and, when `start` is given, is the same process as then."""
    if not pid:
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    fields = _proc_stat(int(pid))
    if fields is None:  # no /proc (not Linux): trust kill(0)
        return True
    if fields[0] in ("Z", "X"):
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(int(pid), os.WNOHANG)  # reap our own finished child (the app launched it)
        return False
    return start is None or process_start_time(int(pid)) == start


# --- GPUs ------------------------------------------------------------------------------
def gpu_count() -> int:
    """GPUs this process may use, without importing torch (CUDA_VISIBLE_DEVICES, the driver, nvidia-smi)."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return len([v for v in visible.split(",") if v.strip() and v.strip() != "-1"])
    gpus = Path("/proc/driver/nvidia/gpus")
    if gpus.is_dir():
        return len(list(gpus.iterdir()))
    if shutil.which("nvidia-smi"):
        try:
            out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=10).stdout
            return sum(1 for line in out.splitlines() if line.startswith("GPU "))
        except (OSError, subprocess.SubprocessError):
            return 0
    return 0


@dataclass(frozen=True)
class GpuStat:
    index: int
    name: str
    utilization_pct: float
    memory_used_gb: float
    memory_total_gb: float


def gpu_stats() -> list[GpuStat]:
    """Live utilisation and memory per GPU from nvidia-smi; [] when there is none."""
    if not shutil.which("nvidia-smi"):
        return []
    try:
        out = subprocess.run(
            [
                "nvidia-smi",
                "--query-gpu=index,name,utilization.gpu,memory.used,memory.total",
                "--format=csv,noheader,nounits",
            ],
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    stats = []
    for line in out.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) != 5:
            continue
        try:
            stats.append(
                GpuStat(int(parts[0]), parts[1], float(parts[2]), float(parts[3]) / 1024, float(parts[4]) / 1024)
            )
        except ValueError:
            continue
    return stats


# --- CPU instructions ------------------------------------------------------------------
BF16_CPU_FLAGS = ("avx512_bf16", "amx_bf16")  # /proc/cpuinfo flags of CPUs that multiply bf16 natively


def cpu_flags() -> set[str]:
    """The instruction-set flags of this machine's first CPU, from /proc/cpuinfo (empty elsewhere)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def cpu_bf16_instructions() -> str | None:
    """The bf16 instructions this CPU has ('AVX-512 BF16' or 'AMX'), or None. Without them torch
    emulates bf16 matrix products, which ran ~60x slower than fp32 on an AVX2-only CPU here."""
    flags = cpu_flags()
    if "amx_bf16" in flags:
        return "AMX"
    if "avx512_bf16" in flags:
        return "AVX-512 BF16"
    return None


# --- torch devices (import torch when called) ------------------------------------------
def pick_device(device: str | torch.device | None = None) -> torch.device:
    """'auto'/None -> CUDA when available, else CPU; a named device only when this machine has it
    (torch names 'xpu' or 'cuda:3' without one, and moving a model there fails deep inside torch)."""
    import torch

    if device in (None, "auto"):
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    # a bare number is torch's accelerator index (5 -> cuda:5)
    index_only = isinstance(device, int) and not isinstance(device, bool)
    if (str(device).startswith("cuda") or index_only) and not torch.cuda.is_available():
        raise InputError(f"device {device!r} names a CUDA GPU, but no CUDA GPU is available; use 'cpu' or 'auto'")
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise InputError(f"unknown device {device!r}; use 'auto', 'cpu' or 'cuda'") from exc
    if dev.type == "cpu":
        return dev
    backend = getattr(torch, dev.type, None)
    is_available = getattr(backend, "is_available", None)
    if not callable(is_available) or not is_available():
        raise InputError(f"device {str(device)!r} is not available on this machine; use 'auto', 'cpu' or 'cuda'")
    count = getattr(backend, "device_count", lambda: 1)()
    if dev.index is not None and dev.index >= count:
        raise InputError(
            f"device {str(device)!r}: this machine has {count} {dev.type} device(s), numbered from 0; "
            f"use '{dev.type}' or '{dev.type}:0'"
        )
    return dev


def cpu_slots_setting() -> int:
    """The job queue's CPU slots as $BERTLAB_CPU_SLOTS sets them (1 when it is unset or not a number)."""
    env = os.environ.get("BERTLAB_CPU_SLOTS", "")
    return int(env) if env.isdigit() else 1


def default_threads(cpu_slots: int | None = None) -> int:
    """The CPU threads torch trains on in a fresh process (a job that does not set --threads): its
    OMP_NUM_THREADS, else the physical cores shared among the job queue's CPU slots (`cpu_slots`, else
    $BERTLAB_CPU_SLOTS, else 1: all of them). The queue gives each CPU job that many
    (`JobRegistry._job_env`): two jobs of one thread a core each on a 2-core CPU ran at ~1.05x their time
    alone, two of torch's default (every core each) at 4-80x. The app runs its own calls on fewer, so it
    cannot ask torch.get_num_threads()."""
    wanted = os.environ.get("OMP_NUM_THREADS", "")
    if wanted.isdigit() and int(wanted) > 0:
        return int(wanted)
    if cpu_slots is None:
        cpu_slots = cpu_slots_setting()
    try:
        import psutil

        cores = psutil.cpu_count(logical=False)
    except ImportError:  # not a dependency: logical CPUs instead
        cores = None
    return max(1, (cores or os.cpu_count() or 1) // max(1, cpu_slots))


def hardware_description(num_threads: int = 0, device: str | torch.device | None = None) -> str:
    """What a run on `device` ('auto'/None, 'cpu', 'cuda', as `pick_device` reads it) trained on, for
    model cards: GPU name and count, or CPU and threads (a CPU run on a GPU machine is a CPU run)."""
    import torch

    dev = pick_device(device)
    if dev.type == "cuda":
        return f"{torch.cuda.get_device_name(dev)} x{torch.cuda.device_count()}"
    threads = num_threads or torch.get_num_threads()
    return f"CPU ({platform.processor() or platform.machine()}, {threads} thread{'' if threads == 1 else 's'})"
