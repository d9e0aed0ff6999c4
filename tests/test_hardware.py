"""bertlab/hardware.py: process and GPU probes, the torch device, the hardware line of a card."""

import os
import subprocess
import sys

import pytest
import torch

from bertlab.errors import InputError
from bertlab.hardware import (
    gpu_count,
    gpu_stats,
    hardware_description,
    own_start_time,
    pick_device,
    pid_alive,
    process_start_time,
)


def test_hardware_in_the_model_card_counts_threads_in_english(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert hardware_description(1).endswith(", 1 thread)")  # not "1 threads"
    assert hardware_description(2).endswith(", 2 threads)")


def test_hardware_in_the_model_card_is_the_run_s_device_not_the_machine_s(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # a GPU machine
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "NVIDIA H200")
    on_cpu = hardware_description(4, "cpu")
    assert on_cpu.startswith("CPU (") and on_cpu.endswith(", 4 threads)")
    assert hardware_description(4, torch.device("cpu")) == on_cpu
    assert hardware_description(4, "cuda") == hardware_description(4, "auto") == "NVIDIA H200 x1"


def test_a_process_is_known_by_pid_and_start_time():
    assert own_start_time() == process_start_time(os.getpid())
    assert pid_alive(os.getpid()) and pid_alive(os.getpid(), own_start_time())
    assert not pid_alive(os.getpid(), (own_start_time() or 0) + 1)  # a reused pid is another process
    assert not pid_alive(None) and not pid_alive(0)


def test_an_ended_child_is_not_alive():
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    assert not pid_alive(child.pid)


def test_gpus_follow_cuda_visible_devices(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,2")
    assert gpu_count() == 2
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "-1")
    assert gpu_count() == 0
    assert isinstance(gpu_stats(), list)


def test_pick_device():
    assert pick_device("cpu") == torch.device("cpu")
    assert pick_device("auto").type in ("cpu", "cuda")
    with pytest.raises(InputError):
        pick_device("gpu")
    with pytest.raises(InputError, match="not available on this machine"):  # torch knows it; this machine not
        pick_device("xpu")
    # a bare number is torch's GPU index: refused with what this machine has, on a CPU and on a GPU machine
    expected = "numbered from 0" if torch.cuda.is_available() else "no CUDA GPU is available"
    with pytest.raises(InputError, match=expected):
        pick_device(5 + torch.cuda.device_count())
    with pytest.raises(InputError, match="unknown device"):
        pick_device("five")
