"""Shared test fixtures: small synthetic runs in the run format."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from isaaclab_sysid.data import Run, RunMeta
from isaaclab_sysid.data.run import ImpedanceLaw

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"


def load_script(name: str) -> ModuleType:
    """Import ``scripts/<name>.py`` as a module (its ``Args`` and ``main`` callable in-process)."""
    spec = importlib.util.spec_from_file_location(name, SCRIPTS / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod  # dataclasses resolve their annotations through sys.modules
    spec.loader.exec_module(mod)
    return mod


Q_HOME = np.array([0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785])


def make_run(controller: str = "task_impedance", log_rate_hz: float = 50.0, n: int = 60, seed: int = 0) -> Run:
    """A plausible Panda run (values random but within limits; quaternions unit)."""
    rng = np.random.default_rng(seed)
    is_1khz = log_rate_hz == 1000.0
    t = np.arange(n) / log_rate_hz + 0.123456789
    q = Q_HOME + 0.05 * rng.standard_normal((n, 7))
    quat = rng.standard_normal((n, 4))
    quat /= np.linalg.norm(quat, axis=1, keepdims=True)
    quat_des = rng.standard_normal((n, 4))
    quat_des /= np.linalg.norm(quat_des, axis=1, keepdims=True)
    gains_n = 7 if controller == "joint_pd" else 6
    meta = RunMeta(
        robot="franka_panda",
        controller=controller,
        control_rate_hz=50.0,
        log_rate_hz=log_rate_hz,
        num_samples=n,
        q_init=Q_HOME.copy(),
        anchor_pos=np.array([0.3, 0.0, 0.5]),
        anchor_quat=np.array([1.0, 0.0, 0.0, 0.0]),
        kp=np.full(gains_n, 200.0),
        kd=np.full(gains_n, 20.0),
        impedance=ImpedanceLaw(),
        excitation={"kind": "test"},
        summary={"note": "synthetic"},
    )
    tick = np.arange(n, dtype=np.int64) + 1000 if is_1khz else None
    sp = (tick // 20) * 20 if is_1khz else None
    return Run(
        name=f"synthetic_{controller}_{int(log_rate_hz)}",
        meta=meta,
        t=t,
        q=q,
        dq=rng.standard_normal((n, 7)),
        ee_pos=rng.standard_normal((n, 3)),
        ee_quat=quat,
        tau=rng.standard_normal((n, 7)),
        tau_J=rng.standard_normal((n, 7)),
        q_des=q + 0.01 if controller == "joint_pd" else None,
        x_des=rng.standard_normal((n, 3)) if controller == "task_impedance" else None,
        quat_des=quat_des if controller == "task_impedance" else None,
        tick=tick,
        setpoint_tick=sp,
    )


@pytest.fixture
def synthetic_run():
    return make_run
