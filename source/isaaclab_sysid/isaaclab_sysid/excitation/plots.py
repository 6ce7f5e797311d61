"""Plots of a design (matplotlib, Agg backend): offsets, spectra and the joint reference."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from isaaclab_sysid.utils.atomic import atomic_path  # noqa: E402


def _save(fig, path: Path) -> Path:
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=110)
    plt.close(fig)
    return path


def plot_task_design(design, jref, robot, path: str | Path) -> Path:
    """Offsets per axis, their amplitude spectra, and the joint reference vs limits."""
    t = design.t
    off = design.offsets.v
    axes_names = design.description.get("axes", [f"a{i}" for i in range(6)])
    fig, ax = plt.subplots(3, 1, figsize=(10, 10))
    for i in range(6):
        unit = "m" if i < 3 else "rad"
        ax[0].plot(t, off[:, i], label=f"{axes_names[i]} [{unit}]")
    ax[0].set_xlabel("t [s]")
    ax[0].set_title(f"{design.kind}: task-space offsets from the anchor")
    ax[0].legend(ncol=6, fontsize=8)
    nfft = 1 << int(np.ceil(np.log2(len(t) * 4)))
    f = np.fft.rfftfreq(nfft, t[1] - t[0])
    for i in range(6):
        a = np.abs(np.fft.rfft(off[:, i], nfft)) * 2 / len(t)
        ax[1].plot(f, a, label=axes_names[i])
    ax[1].set_xlim(0, 4)
    ax[1].set_xlabel("f [Hz]")
    ax[1].set_title("amplitude spectrum (including the envelope)")
    ax[1].legend(ncol=6, fontsize=8)
    span = 0.5 * (robot.q_upper - robot.q_lower)
    mid = 0.5 * (robot.q_upper + robot.q_lower)
    for j in range(robot.n_dof):
        ax[2].plot(t, (jref.q[:, j] - mid[j]) / span[j], label=f"j{j + 1}")
    ax[2].axhline(1, color="k", lw=0.5)
    ax[2].axhline(-1, color="k", lw=0.5)
    ax[2].set_title("joint reference (IK), as a fraction of each joint's half-range")
    ax[2].set_xlabel("t [s]")
    ax[2].legend(ncol=7, fontsize=8)
    fig.tight_layout()
    return _save(fig, Path(path))


def plot_joint_design(t, q, dq, robot, title: str, path: str | Path) -> Path:
    """Joint positions (fraction of half-range) and speeds (fraction of v_max) of a joint-space design."""
    span = 0.5 * (robot.q_upper - robot.q_lower)
    mid = 0.5 * (robot.q_upper + robot.q_lower)
    fig, ax = plt.subplots(2, 1, figsize=(10, 7))
    for j in range(robot.n_dof):
        ax[0].plot(t, (q[:, j] - mid[j]) / span[j], label=f"j{j + 1}")
        ax[1].plot(t, dq[:, j] / robot.v_max[j], label=f"j{j + 1}")
    ax[0].set_title(f"{title}: q as a fraction of the half-range")
    ax[1].set_title("qd / v_max")
    for a in ax:
        a.axhline(1, color="k", lw=0.5)
        a.axhline(-1, color="k", lw=0.5)
        a.set_xlabel("t [s]")
        a.legend(ncol=7, fontsize=8)
    fig.tight_layout()
    return _save(fig, Path(path))


def plot_preflight(report, robot, path: str | Path) -> Path:
    """Predicted joint torques (replay + gravity) as fractions of each joint's limit."""
    rep = report.replay
    fig, ax = plt.subplots(1, 1, figsize=(10, 4))
    for j in range(robot.n_dof):
        ax.plot(rep["t"], rep["tau_J"][:, j] / robot.tau_max[j], label=f"j{j + 1}")
    ax.axhline(1, color="k", lw=0.5)
    ax.axhline(-1, color="k", lw=0.5)
    ax.set_title(f"{report.numbers['run']}: predicted tau_J / torque limit")
    ax.set_xlabel("t [s]")
    ax.legend(ncol=7, fontsize=8)
    fig.tight_layout()
    return _save(fig, Path(path))
