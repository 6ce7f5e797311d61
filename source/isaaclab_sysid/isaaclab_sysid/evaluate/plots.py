"""Report plots (PNG): convergence, real vs sim per joint and EE (each with error panels: sim - real of the
nominal and of the fitted parameters), per-joint RMS baseline vs fitted.

A run that states no servo gains has no baseline (evaluate/heldout.py: ``EvalResult.has_baseline``, why): its plots
show the fitted parameters only and say :data:`~isaaclab_sysid.evaluate.heldout.NO_BASELINE` in the title, the
legend and the RMS panel's title, as the tables, report.md, report.html and ``eval_result.json`` do."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402

from isaaclab_sysid.data.run import Run  # noqa: E402
from isaaclab_sysid.evaluate.heldout import NO_BASELINE, EvalResult  # noqa: E402
from isaaclab_sysid.utils.atomic import atomic_path  # noqa: E402


def _save(fig, path: Path) -> Path:
    path = Path(path)
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=90, format="png")
    plt.close(fig)
    return path


def plot_convergence(history: Sequence, run_names: Sequence[str], path: str | Path) -> Path:
    """Best, median and best-so-far loss per generation, and each run's w*L of the generation's best."""
    it = np.array([h.iteration for h in history])
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    ax = axes[0]
    ax.semilogy(it, [h.median for h in history], label="median")
    ax.semilogy(it, [h.best for h in history], label="generation best")
    ax.semilogy(it, [h.best_ever for h in history], "k--", label="best so far")
    ax.set_xlabel("generation")
    ax.set_ylabel("loss")
    ax.legend()
    ax.grid(True, which="both", alpha=0.3)
    ax = axes[1]
    contrib = np.array([h.contrib_best for h in history])
    for r, name in enumerate(run_names):
        ax.semilogy(it, contrib[:, r], label=name)
    ax.set_xlabel("generation")
    ax.set_ylabel("w*L of the generation's best")
    ax.legend(fontsize=8)
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    return _save(fig, path)


def _panel_grid(panels: int, cols: int = 3):
    """A figure of ``panels`` panels, ``cols`` a row, sharing x; returns (fig, flat axes)."""
    rows = int(np.ceil(panels / cols))
    fig, axes = plt.subplots(rows, cols, figsize=(13, 2.3 * rows), sharex=True)
    return fig, axes.ravel()


def _finish_grid(fig, axes, panels: int, title: str, cols: int = 3) -> None:
    """Blank the unused panels, legend the first, label the bottom row's time axis, title and lay out."""
    for ax in axes[panels:]:
        ax.axis("off")
    axes[0].legend(fontsize=7)
    for ax in axes[max(0, panels - cols):panels]:
        ax.set_xlabel("t [s]")
    fig.suptitle(title)
    fig.tight_layout()


def _rms(e: np.ndarray) -> float:
    e = np.asarray(e, dtype=float)
    return float(np.sqrt(np.nanmean(e**2))) if e.size else float("nan")


def _error_panel(ax, t: np.ndarray, err: np.ndarray, label: str, unit: str, color: str | None) -> None:
    """One parameter set's sim - real on its own linear axis (autoscaled: a 0.1 mrad error fills it), RMS in the corner."""
    ax.plot(t, err, color=color, lw=0.8)
    ax.axhline(0.0, color="k", lw=0.5)
    ax.text(0.01, 0.95, f"{label} sim - real, RMS {_rms(err):.3g} {unit}", transform=ax.transAxes, fontsize=7,
            va="top", ha="left", color=color, bbox=dict(facecolor="white", edgecolor="none", alpha=0.8, pad=1))
    ax.set_ylabel(f"[{unit}]", fontsize=7)
    ax.tick_params(labelsize=7)
    ax.yaxis.get_offset_text().set_fontsize(7)


def plot_run(run: Run, q_sets: dict[str, np.ndarray], ee_sets: dict[str, np.ndarray], path: str | Path,
             joint_names: Sequence[str] | None = None, note: str | None = None) -> Path:
    """Real vs simulated joint positions and EE position (x, y, z), each with error panels beneath it.

    The top panel of a joint shows q [rad] of real and every parameter set; beneath it, one panel per set
    (nominal, fitted) shows that set's sim - real in mrad (EE: mm) on its own linear axis, with its RMS,
    so a fitted error of 0.1 mrad is as readable as a nominal one of 50 mrad. ``q_sets``: (T, N) [rad] per set,
    ``ee_sets``: (T, 3) [m] per set. ``note``: what the figure leaves out and why (e.g. ``"nominal: no baseline:
    ..."``), added to the first panel's legend and to the title.
    """
    n = run.n_dof
    jn = list(joint_names or [f"j{i + 1}" for i in range(n)])
    panels = n + 3
    cols = 3
    rows = int(np.ceil(panels / cols))
    labels = list(dict.fromkeys([*q_sets, *ee_sets]))
    # the same colour for a set whether or not the other is shown (nominal C0, fitted C1, any other set after them)
    colors = {"nominal": "C0", "fitted": "C1"}
    colors.update({label: f"C{2 + i}" for i, label in enumerate(x for x in labels if x not in colors)})
    n_err = max(len(q_sets), len(ee_sets))
    height = (2.0 + 1.0 * n_err) * rows + 0.6
    fig = plt.figure(figsize=(13, height))
    # fixed margins (constrained layout costs ~10 s for these ~30 axes)
    grid = fig.add_gridspec(rows, cols, left=0.06, right=0.99, top=1 - 0.8 / height, bottom=0.45 / height,
                            wspace=0.22, hspace=0.25)
    t = run.t - run.t[0]
    cells = [(run.q[:, j], {k: v[:, j] for k, v in q_sets.items()}, f"{jn[j]} q [rad]", 1e3, "mrad") for j in range(n)]
    cells += [(run.ee_pos[:, k], {lb: v[:, k] for lb, v in ee_sets.items()}, f"EE {c} [m]", 1e3, "mm")
              for k, c in enumerate("xyz")]
    for i, (real, sims, title, scale, unit) in enumerate(cells):
        r, c = divmod(i, cols)
        sub = grid[r, c].subgridspec(1 + len(sims), 1, height_ratios=[2.0] + [1.0] * len(sims), hspace=0.08)
        ax = fig.add_subplot(sub[0])
        ax.plot(t, real, "k", lw=1.2, label="real")
        for label, y in sims.items():
            ax.plot(t, y, color=colors[label], lw=0.9, label=label)
        ax.set_title(title, fontsize=9)
        ax.tick_params(labelbottom=False, labelsize=7)
        if i == 0:
            handles, names = ax.get_legend_handles_labels()
            if note:
                handles.append(Line2D([], [], linestyle="none"))
                names.append(note)
            ax.legend(handles, names, fontsize=7)
        for k, (label, y) in enumerate(sims.items()):
            err_ax = fig.add_subplot(sub[1 + k], sharex=ax)
            _error_panel(err_ax, t, scale * (y - real), label, unit, colors[label])
            last = k == len(sims) - 1
            err_ax.tick_params(labelbottom=last)
            if last and i >= panels - cols:
                err_ax.set_xlabel("t [s]")
    title = f"{run.name}: real vs sim; beneath each, sim - real per parameter set (own scale)"
    fig.suptitle(title + (f"; {note}" if note else ""), y=1 - 0.2 / height)
    return _save(fig, path)


def plot_rms_bars(result: EvalResult, path: str | Path, joint_names: Sequence[str] | None = None) -> Path:
    """Per-joint position RMS [mrad], baseline vs fitted, one panel per run; a run without a baseline
    (``result.has_baseline``) has the fitted bars only and says why in its panel's title."""
    R = len(result.runs)
    fig, axes = plt.subplots(1, R, figsize=(4.5 * R + 1, 3.5), squeeze=False)
    for r, name in enumerate(result.runs):
        ax = axes[0, r]
        f = np.array(result.fitted[r].q_rms_mrad)
        x = np.arange(len(f))
        if result.has_baseline(r):
            ax.bar(x - 0.2, np.array(result.baseline[r].q_rms_mrad), 0.4, label="nominal")
            ax.bar(x + 0.2, f, 0.4, label="fitted")
            ax.set_title(name, fontsize=9)
        else:
            ax.bar(x, f, 0.4, label="fitted", color="C1")
            ax.set_title(f"{name}\n(nominal: {NO_BASELINE})", fontsize=9)
        ax.set_xticks(x, list(joint_names or [f"j{i + 1}" for i in x]), fontsize=7, rotation=30, ha="right")
        ax.set_ylabel("q RMS [mrad]")
        ax.legend(fontsize=8)
    fig.tight_layout()
    return _save(fig, path)


def plot_windows(run: Run, q_fit: np.ndarray, windows: np.ndarray, path: str | Path,
                 joint_names: Sequence[str] | None = None, count: int = 3) -> Path:
    """A torque run's first ``count`` shooting windows: real vs fitted q per joint, each window restarted from the
    measured state (dotted lines mark the starts). ``q_fit``: (T, N) [rad]; ``windows``: (W, 2) sample ranges."""
    n = run.n_dof
    jn = list(joint_names or [f"j{i + 1}" for i in range(n)])
    fig, axes = _panel_grid(n)
    t = run.t - run.t[0]
    shown = windows[:count]
    for j in range(n):
        ax = axes[j]
        for k, (a, b) in enumerate(shown):
            ax.plot(t[a:b], 1e3 * (run.q[a:b, j] - run.q[a, j]), "k", lw=1.2, label="real" if k == 0 else None)
            ax.plot(t[a:b], 1e3 * (q_fit[a:b, j] - run.q[a, j]), "C1", lw=0.9, label="fitted" if k == 0 else None)
            ax.axvline(t[a], color="0.6", ls=":", lw=0.8)
        ax.set_title(f"{jn[j]}: q - q(window start) [mrad]", fontsize=9)
    _finish_grid(fig, axes, n, f"{run.name}: the first {len(shown)} shooting windows, real vs fitted torque replay")
    return _save(fig, path)


def plot_evaluation(out_dir: str | Path, runs: Sequence[Run], ev: EvalResult, joint_names: Sequence[str] | None = None,
                    windows: Sequence[np.ndarray] | None = None) -> list[Path]:
    """Real vs sim (nominal and fitted; fitted only for a run without a baseline, with the reason) per run and the
    per-joint RMS bars of an :class:`EvalResult`; for a torque run (``windows[r]`` given, more than one window) also
    its first shooting windows (:func:`plot_windows`)."""
    out_dir = Path(out_dir)
    paths = []
    for i, (run, ro) in enumerate(zip(runs, ev.rollouts)):
        q_sets, ee_sets, note = {"fitted": ro.q[1]}, {"fitted": ro.ee_pos[1]}, f"nominal: {NO_BASELINE}"
        if ev.has_baseline(i):
            q_sets, ee_sets, note = {"nominal": ro.q[0], **q_sets}, {"nominal": ro.ee_pos[0], **ee_sets}, None
        paths.append(plot_run(run, q_sets, ee_sets, out_dir / f"real_vs_sim_{run.name}.png", joint_names, note))
        if windows is not None and run.meta.controller == "torque" and len(windows[i]) > 1:
            paths.append(plot_windows(run, ro.q[1], windows[i], out_dir / f"windows_{run.name}.png", joint_names))
    paths.append(plot_rms_bars(ev, out_dir / "rms_per_joint.png", joint_names))
    return paths
