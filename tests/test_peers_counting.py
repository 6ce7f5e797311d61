"""benchmarking.counting.CountingBackend (the peers benchmark's backend wrapper) is a ReplayBackend that forwards
every declared member and counts rollouts."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

from isaaclab_sysid.benchmarking.counting import CountingBackend
from isaaclab_sysid.sim.interface import CandidateBatch, ReplayBackend, ReplayOptions


class _Run:
    def __init__(self, last_tick: int) -> None:
        self.last_tick = last_tick

    def sample_ticks(self) -> np.ndarray:
        return np.arange(0, self.last_tick + 1, 10)


class _Inner(ReplayBackend):
    name = "fake"
    supported_groups = frozenset({"armature", "delay"})
    scores_loss = True

    def __init__(self) -> None:
        self.options = ReplayOptions(warmup_ticks=7)
        self.calls: list[str] = []

    def rollout(self, batch, runs, **kw):
        self.calls.append(f"rollout {batch.size} {len(runs)} {sorted(kw)}")
        return ["rolled"] * len(runs)

    def windows_of(self, runs):
        self.calls.append("windows_of")
        return [np.array([[0, 5]])] * len(runs)

    def loss(self, batch, runs, score):
        self.calls.append(f"loss {score}")
        return 0.25

    def close(self) -> None:
        self.calls.append("close")


def test_every_declared_member_is_the_inner_backends_and_rollouts_are_counted():
    inner = _Inner()
    be = CountingBackend(inner)
    assert isinstance(be, ReplayBackend) and be.inner is inner
    # the contract's attributes (the ABC's annotations) are the inner backend's
    for attr in ReplayBackend.__annotations__:
        if attr != "inner":
            assert getattr(be, attr) == getattr(inner, attr), attr
    # and every method of the contract is the wrapper's own, forwarding
    methods = {n for n, f in inspect.getmembers(ReplayBackend, inspect.isfunction) if not n.startswith("_")}
    assert methods == {"rollout", "rollout_states", "windows_of", "loss", "close"}
    assert all(getattr(CountingBackend, n) is not getattr(ReplayBackend, n) for n in methods)
    batch = CandidateBatch(armature=np.zeros((3, 2)))
    runs = [_Run(99), _Run(49)]
    assert be.rollout(batch, runs, note=1) == ["rolled", "rolled"]
    assert be.rollouts == 6 and be.env_steps == 3 * ((7 + 91) + (7 + 41))  # last sample ticks 90 and 40
    assert be.loss(batch, runs[:1], "score") == 0.25 and be.rollouts == 9
    assert len(be.windows_of(runs)) == 2
    assert be.rollout_states(batch, runs[1:]) == ["rolled"] and be.rollouts == 12  # the inner's default: its rollout
    be.close()
    assert inner.calls == ["rollout 3 2 ['note']", "loss score", "windows_of", "rollout 3 1 []", "close"]
    with pytest.raises(AttributeError):  # nothing outside the contract is forwarded silently
        be.calls
