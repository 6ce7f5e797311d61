"""The white noise of a logged torque, measured from the log itself (first differences; issue 28, item 1).

A torque replay is driven by the logged torque, so the noise on it drives the replay (errors in
variables). Its white part is measured from the torque's first differences ``d_k = tau_{k+1} - tau_k``:
for a smooth torque s plus white noise of std sigma, ``mean(d_k^2) = 2 sigma^2 + v`` and
``mean(d_k d_{k+1}) = -sigma^2 + v'`` with ``v ~ v'`` the (small, slowly varying) increments of s, so::

    sigma^2 = (mean(d_k^2) - mean(d_k d_{k+1})) / 3

per joint. It needs rows much faster than the torque's own bandwidth (1 kHz logs); at ~100 Hz (the
UR10e's) real torque changes between rows count as noise, so it is an upper bound there. Torque that
really acted at high frequency (a stiff loop's response to its own encoder noise) is counted too: the
figure is the white part of the *logged* signal, sensor noise and real chatter together.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from isaaclab_sysid.data.run import Run


def white_noise_std(x: np.ndarray) -> np.ndarray:
    """(N,) std of the white part of ``x`` (T, N) from its first differences (module docstring) [x's unit].

    Raises:
        ValueError: fewer than 4 rows.
    """
    x = np.asarray(x, dtype=float)
    if x.ndim != 2 or x.shape[0] < 4:
        raise ValueError(f"white_noise_std needs (T >= 4, N) samples, got {x.shape}")
    d = np.diff(x, axis=0)
    g0 = np.mean(d * d, axis=0)
    g1 = np.mean(d[1:] * d[:-1], axis=0)
    return np.sqrt(np.maximum(g0 - g1, 0.0) / 3.0)


def torque_noise(runs: Sequence[Run]) -> np.ndarray:
    """(N,) white-noise std of the runs' logged torque ``tau`` [N m], pooled over the runs (weighted by rows)."""
    if not runs:
        raise ValueError("torque_noise needs at least one run")
    var = [white_noise_std(r.tau) ** 2 * (r.n_samples - 1) for r in runs]
    return np.sqrt(np.sum(var, axis=0) / sum(r.n_samples - 1 for r in runs))
