"""``mujoco.sysid`` (the ``mujoco[sysid]`` extra, our ``[peers]`` extra) set up on the project's runs.

What it is given, per docs of ``mujoco.sysid`` ("Practical System Identification"):

* **Parameters** (``ParameterDict`` of ``Parameter`` with ``MjSpec`` modifiers): per-joint
  ``armature``, ``frictionloss`` (Coulomb) and ``damping`` (viscous) on the arm's own spec
  (:meth:`Robot.build_mjspec`: 1 ms step, implicitfast, no contacts, gravity off as the
  replay of gravity-compensated runs), and one actuator ``delay`` [s] written into every
  actuator (MuJoCo 3.12's actuator ``delay`` with ``nsample`` history and linear ``interp``,
  so the delay is continuous and its finite-difference column is not zero). Bounds: the
  fit's bounds (the delay's [0, 4] ticks as [0, 4] ms).
* **Joint PD runs** are expressible natively: a ``position`` actuator per joint (kp = Kp,
  kv = Kd of the run) fed the recorded setpoints as ``ctrl`` (zero-order held per tick),
  the delay on the actuator's control = the replay's delayed position target. One
  ``ModelSequences`` per gain set. The warm-up (50 ticks holding the first setpoint from
  ``q_init`` at rest) is part of the control sequence, and the actuators' control history
  is initialized to the first setpoint (``mj_initCtrlHistory``) so the delay line does not
  start from zero. The spec uses MuJoCo's ``Euler`` integrator: it keeps the joint damping
  implicit and the actuator's kv explicit, which is exactly the replay's implicitfast with the
  PD torque applied as a force (the truth replays bit-equal, 3e-14 mrad); under implicitfast
  MuJoCo would integrate kv implicitly too, 0.056 mrad RMS away from the real (explicit)
  controller on a 1.5 s run, as large as the encoder noise.
* **Task impedance runs** cannot be written as MJCF actuators (the law needs the Jacobian
  every tick). The documented tier for that is ``custom_rollout``; :func:`native_rollout`
  plugs in the project's own C closed loop (``MujocoBackend``, the same physics as the
  other contenders). Its delay is a whole number of ticks, so the delay parameter is
  rounded: a finite-difference step cannot move it and Gauss-Newton keeps its start value.
* **Residual**: the default one (measured minus predicted joint position and velocity
  sensors, each column divided by the measured column's RMS), **optimizer**: ``"mujoco"``
  (``mujoco.minimize.least_squares``, Gauss-Newton with batched finite differences), the
  budget ``max_iters``; **intervals**: ``calculate_intervals`` from the final Jacobian.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from isaaclab_sysid.data.run import Run
from isaaclab_sysid.robots.robot import Robot
from isaaclab_sysid.sim.interface import CandidateBatch, ReplayOptions
from isaaclab_sysid.sim.mujoco_backend import MujocoBackend
from isaaclab_sysid.timebase import TICK_S

#: history samples of each actuator's control (covers the 0-4 tick delay bounds with room to interpolate)
N_SAMPLE = 8


def import_sysid():
    """``mujoco.sysid``, or an ImportError naming the extra that installs it."""
    try:
        import mujoco.sysid as ms  # noqa: F401  (needs colorama, tabulate, jinja2, ...: the mujoco[sysid] extra)
    except ImportError as exc:
        raise ImportError(f"mujoco.sysid is not importable ({exc}); install the extra: pip install -e .[peers]") from None
    return ms


@dataclass
class SysidOutcome:
    """What one ``mujoco.sysid`` fit returned.

    Attributes:
        values: group -> fitted values (armature, friction, viscous (N,) arrays; delay [ticks], a float).
        half_width: group -> 95 % interval half-widths (inf where unidentifiable; delay included).
        wall_s: wall time of ``optimize`` [s]; rollouts, env_steps: its (candidate, run) rollouts and 1 ms steps.
        iterations: Gauss-Newton iterations it reported (None when not logged).
        delay_fitted: whether the setup lets Gauss-Newton move the delay.
    """

    values: dict[str, np.ndarray | float]
    half_width: dict[str, np.ndarray]
    wall_s: float
    rollouts: int
    env_steps: int
    iterations: int | None
    delay_fitted: bool


def _dense_setpoints(run: Run, warmup: int) -> np.ndarray:
    """(warmup + last_tick + 1, N) joint setpoint active at each tick from the warm-up start (zero-order hold)."""
    sp_ticks, values = run.setpoints()
    last = int(run.sample_ticks()[-1])
    ticks = np.arange(-warmup, last + 1)
    idx = np.maximum(np.searchsorted(sp_ticks, ticks, side="right") - 1, 0)
    return np.asarray(values)[idx]


def _spec(robot: Robot, run: Run | None, tag: int = 0):
    """The arm's spec with q/qd sensors and, for a joint-PD run, a delayed position actuator per joint
    (``tag``: a numeric ``run_index`` telling a custom rollout which run a model belongs to)."""
    import mujoco

    spec = robot.build_mjspec()
    spec.option.integrator = mujoco.mjtIntegrator.mjINT_EULER  # kv explicit, damping implicit: the replay's scheme
    spec.add_numeric(name="run_index", data=[float(tag)])
    for j in robot.joint_names:
        spec.add_sensor(name=f"{j}_pos", type=mujoco.mjtSensor.mjSENS_JOINTPOS, objtype=mujoco.mjtObj.mjOBJ_JOINT, objname=j)
    for j in robot.joint_names:
        spec.add_sensor(name=f"{j}_vel", type=mujoco.mjtSensor.mjSENS_JOINTVEL, objtype=mujoco.mjtObj.mjOBJ_JOINT, objname=j)
    if run is not None:
        for i, j in enumerate(robot.joint_names):
            a = spec.add_actuator(name=f"{j}_pd", target=j, trntype=mujoco.mjtTrn.mjTRN_JOINT)
            a.set_to_position(kp=float(run.meta.kp[i]), kv=float(run.meta.kd[i]))
            a.nsample = N_SAMPLE
            a.interp = 1  # linear: a continuous delay
            a.delay = 0.0
    return spec


def _initial_state(model, run: Run, warmup: int, first_ctrl: np.ndarray | None) -> np.ndarray:
    """Full-physics state at the warm-up start: q_init at rest, the control history holding the first setpoint."""
    import mujoco

    d = mujoco.MjData(model)
    d.qpos[:] = run.meta.q_init
    d.time = -warmup * TICK_S
    if first_ctrl is not None:
        times = d.time - TICK_S * np.arange(N_SAMPLE)[::-1]
        for i in range(model.nu):
            mujoco.mj_initCtrlHistory(model, d, i, times.reshape(-1, 1), np.full((N_SAMPLE, 1), float(first_ctrl[i])))
    st = np.empty(mujoco.mj_stateSize(model, mujoco.mjtState.mjSTATE_FULLPHYSICS))
    mujoco.mj_getState(model, d, st, mujoco.mjtState.mjSTATE_FULLPHYSICS)
    return st


def _params(robot: Robot, bounds: dict[str, tuple[float, float]], start: dict[str, np.ndarray | float]):
    ms = import_sysid()
    n = robot.n_dof
    names = robot.joint_names

    def joint_setter(attr):
        def mod(spec, p):
            for i, j in enumerate(names):
                if attr == "damping":
                    spec.joint(j).damping = [float(p.value[i]), 0.0, 0.0]
                else:
                    setattr(spec.joint(j), attr, float(p.value[i]))
        return mod

    def delay_setter(spec, p):
        for a in spec.actuators:
            a.delay = float(p.value[0])

    pd = ms.ParameterDict()
    for group, attr in (("armature", "armature"), ("friction", "frictionloss"), ("viscous", "damping")):
        lo, hi = bounds[group]
        pd.add(ms.Parameter(group, np.asarray(start[group], dtype=float), np.full(n, lo), np.full(n, hi),
                            modifier=joint_setter(attr)))
    lo, hi = bounds["delay"]
    pd.add(ms.Parameter("delay", float(start["delay"]) * TICK_S, lo * TICK_S, hi * TICK_S, modifier=delay_setter))
    return pd


class _Counter:
    def __init__(self) -> None:
        self.rollouts = 0
        self.env_steps = 0


def native_rollout(robot: Robot, runs: Sequence[Run], counter: _Counter, options: ReplayOptions = ReplayOptions()):
    """A ``custom_rollout`` for ``mujoco.sysid`` that replays candidates through the project's C closed loop.

    The run of each model is its numeric ``run_index`` (an index into ``runs``); the
    candidates' values come from ``param_dicts`` (the delay [s] rounded to whole ticks).
    """
    ms = import_sysid()
    from mujoco.sysid._src.trajectory import SystemTrajectory

    backend = MujocoBackend(robot, options)

    def rollout(models, datas, control_signal, initial_states, param_dicts, rollout_signal_mapping,
                rollout_state_mapping, ctrl_mapping, **_):
        n_chunks = len(models) // len(param_dicts)
        out = [None] * len(models)
        for c in range(n_chunks):
            run = runs[int(models[c].numeric("run_index").data[0])]
            P = len(param_dicts)
            batch = CandidateBatch(
                armature=np.array([p["armature"].value for p in param_dicts]),
                friction=np.array([p["friction"].value for p in param_dicts]),
                viscous=np.array([p["viscous"].value for p in param_dicts]),
                delay=np.array([int(round(float(p["delay"].value[0]) / TICK_S)) for p in param_dicts]))
            ro = backend.rollout(batch, [run])[0]
            counter.rollouts += P
            counter.env_steps += P * (options.warmup_ticks + int(run.sample_ticks()[-1]) + 1)
            model = models[c]
            nstate = int(initial_states[c].shape[0])
            t = run.sample_ticks() * TICK_S
            for i in range(P):
                q, dq = np.nan_to_num(ro.q[i], nan=1e3), np.nan_to_num(ro.dq[i], nan=1e3)
                state = np.zeros((len(t), nstate))
                state[:, 0] = t
                state[:, 1:1 + model.nq] = q
                state[:, 1 + model.nq:1 + model.nq + model.nv] = dq
                sens = np.hstack([q, dq])
                out[i * n_chunks + c] = SystemTrajectory(
                    model=model, control=control_signal[c],
                    sensordata=ms.TimeSeries(t, sens, rollout_signal_mapping),
                    initial_state=initial_states[c],
                    state=ms.TimeSeries(t, state, rollout_state_mapping))
        return out

    return rollout, backend


def fit_sysid(robot: Robot, runs: Sequence[Run], bounds: dict[str, tuple[float, float]],
              start: dict[str, np.ndarray | float], max_iters: int, warmup: int = 50) -> SysidOutcome:
    """Fit armature, Coulomb, viscous and the delay with ``mujoco.sysid.optimize`` (module docstring).

    Args:
        runs: fit runs, all joint_pd or all task_impedance, logged at 1 kHz.
        bounds: group -> (lower, upper) in decoded units (delay in ticks).
        start: group -> start values (per-joint (N,) arrays; delay in ticks).
        max_iters: the Gauss-Newton iteration budget.
    """
    ms = import_sysid()
    ctrls = {r.meta.controller for r in runs}
    if len(ctrls) != 1 or not all(r.is_1khz for r in runs):
        raise ValueError("fit_sysid: runs must share one controller and be logged at 1 kHz")
    joint_pd = ctrls == {"joint_pd"}
    counter = _Counter()
    custom = None
    native = None
    groups: dict[tuple, list[Run]] = {}
    for i, r in enumerate(runs):
        key = (tuple(r.meta.kp), tuple(r.meta.kd)) if joint_pd else ("task", i)  # task runs: one spec each (tagged)
        groups.setdefault(key, []).append(r)
    if not joint_pd:
        custom, native = native_rollout(robot, runs, counter, ReplayOptions(warmup_ticks=warmup))
    seqs = []
    for gi, grp in enumerate(groups.values()):
        spec = _spec(robot, grp[0] if joint_pd else None, tag=gi)
        model = spec.compile()
        inits, controls, sensors, names = [], [], [], []
        for r in grp:
            n_ticks = warmup + int(r.sample_ticks()[-1]) + 1
            tc = (np.arange(n_ticks) - warmup) * TICK_S
            if joint_pd:
                u = _dense_setpoints(r, warmup)
                controls.append(ms.TimeSeries.from_control_names(tc, u, model))
                inits.append(_initial_state(model, r, warmup, u[0]))
            else:
                controls.append(ms.TimeSeries(tc, np.zeros((n_ticks, 0))))
                inits.append(_initial_state(model, r, warmup, None))
            t = r.sample_ticks() * TICK_S
            sensors.append(ms.TimeSeries.from_names(t, np.hstack([r.q, r.dq]), model))
            names.append(r.name)
        seqs.append(ms.ModelSequences(f"group{gi}", spec, names, inits, controls, sensors))
    params = _params(robot, bounds, start)
    base = ms.build_residual_fn(models_sequences=seqs, custom_rollout=custom, n_threads=2)
    n_steps = [warmup + int(r.sample_ticks()[-1]) + 1 for g in groups.values() for r in g]

    def residual_fn(x, p, **kw):
        if joint_pd:
            cols = 1 if np.ndim(x) == 1 else np.shape(x)[1]
            counter.rollouts += cols * len(n_steps)
            counter.env_steps += cols * sum(n_steps)
        return base(x, p, **kw)

    t0 = time.perf_counter()
    try:
        opt, res = ms.optimize(params, residual_fn, optimizer="mujoco", verbose=False, max_iters=int(max_iters))
        wall = time.perf_counter() - t0
        rollouts, env_steps = counter.rollouts, counter.env_steps
        r_star, _, _ = base(opt.as_vector(), opt.copy())  # for the intervals: not counted
    finally:
        if native is not None:
            native.close()
    J = np.asarray(res.jac, dtype=float)
    _, hw = ms.calculate_intervals(r_star, J)
    n = robot.n_dof
    values = {"armature": opt["armature"].value.copy(), "friction": opt["friction"].value.copy(),
              "viscous": opt["viscous"].value.copy(), "delay": float(opt["delay"].value[0]) / TICK_S}
    half = {"armature": hw[0:n], "friction": hw[n:2 * n], "viscous": hw[2 * n:3 * n], "delay": hw[3 * n:] / TICK_S}
    iters = None
    obj = res.get("extras", {}).get("objective") if hasattr(res, "get") else None
    if obj:
        iters = len(obj)
    return SysidOutcome(values, half, wall, rollouts, env_steps, iters, joint_pd)
