"""A starting point for the CMA-ES replay fit from the rigid-body identification.

The least-squares regressor carries per-joint armature, viscous and Coulomb columns:
the same quantities the replay fit tunes. They make a ``best_params_decoded`` file
that ``sysid_franka_osc.py --x0 FILE`` starts from; groups the file lacks keep the
fit's default start. The Gaz sigmoid law's groups (``sigmoid_amplitude``, ``sigmoid_slope``, ``sigmoid_offset``)
are fitted per joint to the torque the LS attributes to friction (:mod:`.friction_seed`) when the identification
runs the file records can be re-read, and written beside the Coulomb model under ``law_starts`` (``--x0`` starts a
sigmoid fit from them; ``--eval_params`` evaluates the Coulomb model the file describes); :func:`sigmoid_start` is
the sigmoid law's whole start, written as the model itself. Its constant per-joint ``offset`` column (logged = model + offset) seeds the torque
replay's ``torque_offset`` group (the torque that acted is logged - offset, the same sign) when the identification had that column; a fit that does not
fit the group ignores it.

The actuator delay is seeded only when asked: by a given value, or by the
cross-correlation of commanded and measured torque (the lag of its peak) on runs
whose command is not fed back from the response (a step or open-loop test).
Under closed-loop control the disturbance reaches both signals within the same
tick and the correlation peaks at lag 0 whatever the delay: on the Franka twin
(true delay 2 ticks) it says 0. :func:`delay_from_runs` reports the peak and the
contrast; the caller decides.

Values come from the SDP-reconstructed standard set of ``rb_params.json`` (joint
terms consistent with the base parameters; a joint term grouped with link
inertia, e.g. joint 1's armature, is split there by the prior). Negative values
are clipped to 0 and reported.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from isaaclab_sysid.data import Run
from isaaclab_sysid.data.schema import TICK_HZ
from isaaclab_sysid.robots.identified import RbParams
from isaaclab_sysid.rigid_body.friction_seed import SigmoidSeed, sigmoid_seed_from_rb_params
from isaaclab_sysid.rigid_body.seeding import DelayEstimate, estimate_delay
from isaaclab_sysid.utils.atomic import atomic_write_text

#: rigid-body joint term -> replay-fit result key
TERM_TO_FIT = {"armature": "armature", "viscous": "viscous", "coulomb": "friction"}


@dataclass
class FitSeed:
    """Starting values for the replay fit.

    Attributes:
        values: fit key (``armature`` [kg m^2], ``friction`` [N m], ``viscous`` [N m s/rad],
            ``torque_offset`` [N m, of the identified signal] when the LS had the offset column; after
            :func:`sigmoid_start`, ``sigmoid_amplitude`` [N m], ``sigmoid_slope`` [s/rad], ``sigmoid_offset``
            [rad/s] in place of ``friction``) -> (N,) values, and ``motor_delay_steps`` -> int [1 kHz ticks] when
            estimated.
        sources: where each value came from.
        clipped: "<key>[<joint>]" entries that were negative and set to 0.
        delay: the cross-correlation result, if any.
        sigmoid: the per-joint sigmoid fit (its RMS, ramp counts, weak joints), if fitted.
        sigmoid_skipped: why the sigmoid was not seeded ('' when it was, or was not asked for).
        joint_names: the joints, for the sigmoid's per-joint entry.
    """

    values: dict
    sources: dict = field(default_factory=dict)
    clipped: list[str] = field(default_factory=list)
    delay: DelayEstimate | None = None
    sigmoid: SigmoidSeed | None = None
    sigmoid_skipped: str = ""
    joint_names: tuple[str, ...] = ()

    def to_json(self) -> dict:
        """The file ``--x0`` reads (``best_params_decoded``) plus provenance."""
        dec = {k: (int(v) if k == "motor_delay_steps" else [float(a) for a in np.asarray(v).ravel()])
               for k, v in self.values.items()}
        out = {"best_params_decoded": dec, "seed_sources": self.sources, "clipped_to_zero": self.clipped}
        if self.delay is not None:
            out["delay_cross_correlation"] = {
                "lag_samples": self.delay.lag_samples,
                "lag_s": self.delay.lag_s,
                "peak_correlation": self.delay.peak_correlation,
            }
        if self.sigmoid is not None:
            out["sigmoid_fit"] = self.sigmoid.to_json(self.joint_names)
            if "sigmoid_amplitude" not in self.values:  # the Coulomb start: the sigmoid's beside it, not in it
                out[LAW_STARTS_KEY] = {"sigmoid": {g: [float(a) for a in np.asarray(v).ravel()]
                                                   for g, v in self.sigmoid.values.items()}}
        elif self.sigmoid_skipped:
            out["sigmoid_fit"] = {"skipped": self.sigmoid_skipped}
        return out


#: the seed file's key for other friction laws' starts (law -> group -> (N,) values): ``--x0`` starts a fit of that law
#: from them; ``best_params_decoded`` stays the Coulomb model the file describes (``--eval_params`` evaluates it)
LAW_STARTS_KEY = "law_starts"


def joint_terms_from_rb_params(path: str | Path, joint_names: Sequence[str]) -> tuple[dict, list[str], str]:
    """(fit key -> (N,) values, clipped entries, source) from an ``rb_params.json``.

    Raises:
        ValueError: the file has no reconstruction or misses a joint term (names the file and key).
    """
    rb = RbParams.read(path)
    path, std = rb.path, rb.standard
    if std is None:
        raise ValueError(f"{path}: not an rb_params.json with a reconstruction (no 'reconstruction.standard')")
    values, clipped = {}, []
    for term, key in TERM_TO_FIT.items():
        names = [f"{j}.{term}" for j in joint_names]
        missing = [n for n in names if n not in std]
        if missing:
            raise ValueError(f"{path}: reconstruction has no {missing[0]!r} (identify with that joint term)")
        v = np.array([float(std[n]) for n in names])
        clipped += [f"{key}[{j}]" for j, x in zip(joint_names, v) if x < 0]
        values[key] = np.maximum(v, 0.0)
    offsets = [f"{j}.offset" for j in joint_names]
    if all(n in std for n in offsets):  # signed: logged = model + offset, so the torque that acted is logged - offset
        values["torque_offset"] = np.array([float(std[n]) for n in offsets])
    src = f"{path} (reconstruction.standard, output {rb.signal} [{rb.unit}])"
    return values, clipped, src


def delay_from_runs(runs: Sequence[Run], max_lag_ticks: int = 20) -> tuple[int, DelayEstimate]:
    """Actuator delay [1 kHz ticks] maximizing the correlation of the commanded torque
    ``tau`` with the measured ``tau_J`` (first differences, all joints, all runs stacked).

    The resolution is one log sample: 1 tick for 1 kHz logs, 20 ticks for 50 Hz logs.
    """
    if not runs:
        raise ValueError("delay_from_runs needs at least one run")
    rates = {float(r.meta.log_rate_hz) for r in runs}
    if len(rates) != 1:
        raise ValueError(f"runs mix log rates {sorted(rates)} Hz; estimate the delay per rate")
    rate = rates.pop()
    ticks_per_sample = TICK_HZ / rate
    max_lag = max(1, int(np.ceil(max_lag_ticks / ticks_per_sample)))
    cmd = np.vstack([np.diff(np.asarray(r.tau, float), axis=0) for r in runs])
    resp = np.vstack([np.diff(np.asarray(r.tau_J, float), axis=0) for r in runs])
    est = estimate_delay(cmd, resp, 1.0 / rate, max_lag=max_lag)
    return int(round(est.lag_samples * ticks_per_sample)), est


def build_seed(
    rb_params: str | Path,
    joint_names: Sequence[str],
    delay_runs: Sequence[Run] = (),
    max_lag_ticks: int = 20,
    delay_ticks: int | None = None,
    sigmoid: bool = True,
    sigmoid_bounds: Mapping[str, tuple[float, float]] | None = None,
) -> FitSeed:
    """Joint terms (and the torque offsets, when identified) from ``rb_params``; the delay from ``delay_ticks`` if given, else by
    cross-correlation on ``delay_runs`` (open-loop or step runs), else left out.

    With ``sigmoid`` (default), each joint's Gaz sigmoid is fitted to the LS's friction torque on the identification
    runs the file records (:func:`~.friction_seed.sigmoid_seed_from_rb_params`, within ``sigmoid_bounds``: group ->
    (lower, upper), default the replay fit's default bounds); where they cannot be re-read (a file gone, an
    identification without them), :attr:`FitSeed.sigmoid_skipped` says why and the other values are unchanged."""
    values, clipped, src = joint_terms_from_rb_params(rb_params, joint_names)
    sources = {k: src for k in values}
    sig, skipped = None, ""
    if sigmoid:
        try:
            sig = sigmoid_seed_from_rb_params(rb_params, joint_names, sigmoid_bounds)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            skipped = str(exc)
    delay = None
    runs = delay_runs
    if delay_ticks is not None:
        if delay_ticks < 0:
            raise ValueError(f"delay must be >= 0 ticks; got {delay_ticks}")
        values["motor_delay_steps"] = int(delay_ticks)
        sources["motor_delay_steps"] = "given"
    elif runs:
        ticks, delay = delay_from_runs(runs, max_lag_ticks)
        values["motor_delay_steps"] = ticks
        sources["motor_delay_steps"] = (
            f"cross-correlation of d(tau) and d(tau_J) over {len(runs)} run(s): lag {delay.lag_samples} samples "
            f"({delay.lag_s * 1e3:.0f} ms), peak correlation {delay.peak_correlation:.3f}"
        )
    return FitSeed(values, sources, clipped, delay, sig, skipped, tuple(joint_names))


def sigmoid_start(seed: FitSeed) -> FitSeed:
    """``seed`` in the sigmoid law's coordinates: its ``viscous`` and (when seeded) ``torque_offset`` replaced by the
    sigmoid fit's own (fitted with it, :class:`~.friction_seed.SigmoidSeed`), ``friction`` dropped (the sigmoid is the
    whole dry friction); the other values unchanged.

    Raises:
        ValueError: the seed holds no sigmoid (says why it was not fitted).
    """
    import dataclasses

    if seed.sigmoid is None:
        raise ValueError(f"the seed holds no sigmoid ({seed.sigmoid_skipped or 'not asked for'})")
    values, sources = dict(seed.values), dict(seed.sources)
    for g, v in seed.sigmoid.values.items():
        values[g] = v
        sources[g] = ("per-joint Gaz sigmoid + viscous + constant fitted to the LS's friction torque (Coulomb + "
                      "viscous + offset + residual) against qd on its identification runs")
    start = seed.sigmoid.start_values()
    keys = ["viscous"] + (["torque_offset"] if "torque_offset" in values else [])
    for k in keys:
        values[k] = start[k]
        sources[k] = "the sigmoid fit's own (fitted with the sigmoid to the LS's friction torque; --law sigmoid)"
    values.pop("friction", None)
    sources.pop("friction", None)
    return dataclasses.replace(seed, values=values, sources=sources)


def write_seed(path: str | Path, seed: FitSeed) -> Path:
    """Write the seed file atomically; returns its path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(seed.to_json(), indent=2) + "\n")
    return path
