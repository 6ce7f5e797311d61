"""A twin of a Franka without its hand (or with a tool of known mass), recorded with torque (issue 43).

The hidden arm is ``franka_panda_nohand`` (or that config with a stated tool) with perturbed link inertials (mass
x U(0.9, 1.2), centre of mass +- 1 cm, inertia x 1.1, as the rigid-body twin's) and the torque twin's joint terms
and timing (:mod:`.torque_twin`: armature, Coulomb and viscous friction, the logged torque leading the acting one by
:data:`~.torque_twin.DELAY` ticks, white noise on it). Its log is what a real Panda's libfranka log is: ``tau_J``
(and ``tau``) hold gravity (g(q) of the hidden arm at each logged q), the sidecar names ``franka_panda`` and says
what its torque holds (``summary.includes_gravity``). Runs: joint-PD multisines about three postures for the
rigid-body least squares (:func:`ls_target`), and a fit and a held-out run (other gains) for the torque replay.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np

from isaaclab_sysid.arm_model import with_body_inertials
from isaaclab_sysid.data import write_run
from isaaclab_sysid.data.run import Run
from isaaclab_sysid.robots import LinkInertial, Robot, load_robot
from isaaclab_sysid.robots.regressor import Regressor
from isaaclab_sysid.twin.demo import JOINT_AMP, JOINT_KD, JOINT_KP, joint_target
from isaaclab_sysid.twin.targets import Q_READY, envelope, multisine, skeleton_run
from isaaclab_sysid.twin.torque_twin import torque_logged

#: the torque replay's held-out stiffness (the torque twin's: 1.6x kp, 1.4x kd)
HELD_KP = 1.6 * np.array([600, 600, 600, 600, 250, 150, 50.0])
HELD_KD = 1.4 * np.array([50, 50, 50, 50, 30, 25, 15.0])


#: the rigid-body runs' postures about the ready pose [rad]: gravity changes between them, so the LS tells a joint's
#: constant torque offset from its gravity (around one posture the two are nearly collinear on joints 2 and 4)
LS_POSTURES = (np.zeros(7), np.array([0.0, 0.4, 0.0, 0.5, 0.0, -0.3, 0.0]), np.array([0.0, -0.35, 0.0, -0.3, 0.0, 0.4, 0.0]))


def ls_target(robot: Robot, duration: float, seed: int, posture: np.ndarray, name: str) -> Run:
    """A 50 Hz joint-PD target for the least squares: the demo's three tones per joint (:func:`~.demo.joint_target`)
    at 1.6x its amplitude about ``Q_READY + posture`` (7,) [rad], clipped 0.1 rad inside the limits."""
    t = np.arange(int(round(duration * 50.0)) + 1) / 50.0
    rng = np.random.default_rng(seed)
    n = robot.n_dof
    freqs = np.stack([rng.uniform(lo, hi, n) for lo, hi in ((0.15, 0.3), (0.4, 0.7), (0.8, 1.2))], axis=1)
    amps = 1.6 * JOINT_AMP[:n, None] * np.minimum(1.0, 0.25 / freqs)
    env = envelope(t, 1.5, 1.5)[:, None]
    center = Q_READY[:n] + np.asarray(posture, dtype=float)[:n]
    q = center[None] + multisine(t, amps, freqs, rng.uniform(0, 2 * np.pi, (n, 3))) * env
    q = np.clip(q, robot.q_lower + 0.1, robot.q_upper - 0.1)
    return skeleton_run(robot, "joint_pd", t, q, JOINT_KP, JOINT_KD, q_init=q[0], control_rate_hz=50.0, name=name,
                        excitation={"kind": "joint_multisine", "generator": "isaaclab_sysid.twin.nohand_twin",
                                    "seed": seed, "duration_s": duration})


def hidden_arm(config: str | Path = "franka_panda_nohand", tool: LinkInertial | None = None,
               seed: int = 7) -> tuple[Robot, dict[str, LinkInertial]]:
    """The hidden arm: ``config`` (plus ``tool`` at the flange) with its moving bodies' inertials perturbed (module
    docstring); returns (the robot, moving body -> true inertial with its fixed children merged in)."""
    robot = load_robot(config)
    if tool is not None:
        robot = robot.with_tool(tool)
    reg = Regressor(robot)
    rng = np.random.default_rng(seed)
    true = {n: LinkInertial(li.mass * rng.uniform(0.9, 1.2), li.com + rng.normal(0, 0.01, 3), li.inertia * 1.1)
            for n, li in reg.link_inertials(reg.prior()).items()}
    return with_body_inertials(robot, true), true  # bodies, not links: a tool is not counted twice


def with_gravity(run: Run, robot: Robot) -> Run:
    """``run`` with g(q) of ``robot`` (Pinocchio, at each logged q) [N m] added to ``tau`` and ``tau_J``, the sidecar
    saying so (``summary.includes_gravity``) and naming the arm ``franka_panda`` as a real Panda's log does."""
    import pinocchio as pin

    model = robot.build_pinocchio(gravity=True)
    data = model.createData()
    g = np.array([pin.computeGeneralizedGravity(model, data, q) for q in run.q])
    summary = {**run.meta.summary, "includes_gravity": {"tau": True, "tau_J": True}}
    meta = dataclasses.replace(run.meta, robot=robot.config.arm, summary=summary)
    return dataclasses.replace(run, tau=run.tau + g, tau_J=run.tau + g, meta=meta)


@dataclasses.dataclass(frozen=True)
class NohandTwinFiles:
    """The twin's CSV files (sidecars beside them) and its hidden inertials.

    Attributes:
        ls: the rigid-body runs (identification first, the last held out); replay: the torque replay's fit run;
        heldout: its held-out run; truth: body -> true lumped inertial.
    """

    ls: tuple[Path, ...]
    replay: Path
    heldout: Path
    truth: dict[str, LinkInertial]


def write_nohand_twin(folder: Path, tool: LinkInertial | None = None, noise: float = 0.02, ls_s: float = 12.0,
                      replay_s: float = 4.0, seed: int = 7) -> NohandTwinFiles:
    """Record and write the hand-less twin (``tool``: a known mass at the flange instead of nothing): three ``ls_s``
    rigid-body runs, a ``replay_s`` torque-replay fit run and a 4 s held-out run at other gains, torque noise
    ``noise`` [N m]; returns the files and the truth."""
    robot, true = hidden_arm(tool=tool, seed=seed)
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)

    def write(run: Run) -> Path:
        return write_run(with_gravity(run, robot), folder / f"{run.name}.csv")[0]

    ls = tuple(write(torque_logged(robot, ls_target(robot, ls_s, 40 + s, LS_POSTURES[s - 1], f"ls_multisine_{s}"),
                                   seed=s, noise=noise)) for s in (1, 2, 3))
    fit = write(torque_logged(robot, joint_target(robot, replay_s, seed=11, name="fit_multisine"), seed=4, noise=noise))
    held = write(torque_logged(robot, joint_target(robot, 4.0, seed=29, name="heldout_multisine", kp=HELD_KP,
                                                   kd=HELD_KD), seed=5, noise=noise))
    return NohandTwinFiles(ls, fit, held, true)
