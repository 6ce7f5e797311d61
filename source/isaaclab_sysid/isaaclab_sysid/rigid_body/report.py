"""Held-out report: measured vs predicted output per joint (PNG, Markdown)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from isaaclab_sysid.utils.atomic import atomic_path, atomic_write_text


def rmse_per_joint(measured: np.ndarray, predicted: np.ndarray) -> np.ndarray:
    """(N,) RMSE over samples of (T, N) arrays."""
    return np.sqrt(np.mean((np.asarray(measured) - np.asarray(predicted)) ** 2, axis=0))


def plot_run(
    path: str | Path,
    t: np.ndarray,
    measured: np.ndarray,
    predictions: dict[str, np.ndarray],
    joint_names: tuple[str, ...],
    unit: str,
    title: str,
) -> Path:
    """One PNG: a panel per joint with the measured signal and every model's prediction (atomic write)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path = Path(path)
    n = measured.shape[1]
    fig, axes = plt.subplots((n + 1) // 2, 2, figsize=(12, 2.2 * ((n + 1) // 2)), sharex=True)
    for j, ax in enumerate(np.ravel(axes)[:n]):
        ax.plot(t - t[0], measured[:, j], "k-", lw=1.2, label="measured")
        for k, (name, pred) in enumerate(predictions.items()):
            ax.plot(t - t[0], pred[:, j], lw=0.9, ls=["-", "--", ":", "-."][k % 4], label=name)
        ax.set_ylabel(f"{joint_names[j]}\n[{unit}]", fontsize=7)
        ax.grid(alpha=0.3)
    np.ravel(axes)[0].legend(fontsize=7)
    for ax in np.ravel(axes)[n:]:
        ax.set_visible(False)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    try:
        with atomic_path(path) as tmp:
            fig.savefig(tmp, dpi=90, format="png")
    finally:
        plt.close(fig)
    return path


def markdown_table(rows: dict[str, dict[str, np.ndarray]], joint_names: tuple[str, ...], unit: str) -> str:
    """Markdown table: one row per (run, model) with per-joint RMSE."""
    head = "| run | model | " + " | ".join(joint_names) + " |\n"
    head += "|---|---|" + "---|" * len(joint_names) + "\n"
    body = ""
    for run, models in rows.items():
        for model, r in models.items():
            body += f"| {run} | {model} | " + " | ".join(f"{v:.3f}" for v in r) + " |\n"
    return f"Per-joint RMSE [{unit}]\n\n" + head + body


def write_report(path: str | Path, sections: list[str]) -> Path:
    """Write the Markdown report atomically."""
    atomic_write_text(path, "\n\n".join(sections) + "\n")
    return Path(path)
