"""bertlab/training/runtime.py: prefetching, signals, process rank, training state."""

import os
import signal

import pytest
import torch

from bertlab.training.runtime import (
    DistInfo,
    GracefulStop,
    all_reduce_sum,
    complete_checkpoint,
    load_training_state,
    lost_peer,
    prefetch,
    process_rank,
    rng_state,
    set_rng_state,
)


def test_prefetch_keeps_order_and_raises():
    assert list(prefetch(iter(range(20)), depth=2)) == list(range(20))

    def broken():
        yield 1
        raise ValueError("bad batch")

    with pytest.raises(ValueError, match="bad batch"):
        list(prefetch(broken()))


def test_graceful_stop_sets_flag_on_sigterm():
    with GracefulStop() as stop:
        os.kill(os.getpid(), signal.SIGTERM)
        assert stop.requested
    assert signal.getsignal(signal.SIGTERM) is not stop._handle


def test_process_rank_only_under_torchrun(monkeypatch):
    monkeypatch.setenv("RANK", "3")
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    assert process_rank() == 0
    monkeypatch.setenv("WORLD_SIZE", "4")
    assert process_rank() == 3


def test_rng_state_round_trip():
    state = rng_state()
    a = torch.rand(3)
    set_rng_state(state)
    assert torch.equal(torch.rand(3), a)


def test_all_reduce_is_the_identity_in_one_process():
    assert all_reduce_sum({"x": 2.0}, DistInfo(), torch.device("cpu")) == {"x": 2.0}


def test_training_state_errors_say_what_is_wrong(tmp_path):
    from bertlab.errors import InputError

    with pytest.raises(InputError, match="no saved training state"):
        load_training_state(tmp_path)
    (tmp_path / "trainer_state.pt").write_bytes(b"not a torch file")
    with pytest.raises(InputError, match="may be corrupt"):
        load_training_state(tmp_path)
    assert not complete_checkpoint(tmp_path)


def test_a_lost_peer_is_said_plainly():
    # (#24) what gloo raises when the other end of a collective was killed
    gloo = RuntimeError(
        "[/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:537] Read error "
        "[10.0.0.2]:31645: Connection reset by peer. This is typically caused by a remote worker hanging."
    )
    error = lost_peer(gloo, DistInfo(rank=1, world=4))
    assert str(error) == (
        "rank 1 lost contact with another process of this 4-process torchrun job (a process or its machine "
        "stopped, or the network between them failed: Read error [10.0.0.2]:31645: Connection reset by peer); "
        "run every machine's command again with --resume to continue from the last checkpoint"
    )
    assert lost_peer(gloo, DistInfo()) is None  # no group: not a lost peer
    assert lost_peer(ValueError("bad batch"), DistInfo(rank=0, world=2)) is None
    assert lost_peer(RuntimeError("CUDA out of memory"), DistInfo(rank=0, world=2)) is None
