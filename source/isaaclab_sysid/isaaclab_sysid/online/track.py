"""Friction over a session of runs: the tracker's path, its band, and changes larger than the band.

Runs are placed on one session clock (their start times, or back to back), cut into chunks
of ``chunk_s`` seconds and fed to :class:`~.rls.FrictionRLS` one chunk per update. The
*reference* is the estimate at the end of the first run (or at ``reference_s``); a change is
flagged where a joint's term moves away from it by more than the band,
``|theta(t) - theta_ref| > sqrt(hw(t)^2 + hw_ref^2)``.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import numpy as np

from isaaclab_sysid.online.rls import FRICTION_TERMS, FrictionRLS, RLSOptions, TrackerError
from isaaclab_sysid.online.signal import FrictionSamples


@dataclass(frozen=True)
class TrackOptions:
    """Attributes:
    chunk_s: log seconds per update (default: one reading every 2 s).
    readings: readings used per update, evenly spaced in the chunk (None: every sample of the chunk;
        1: one reading per update).
    reference_s: session time of the reference estimate [s] (None: the end of the first run).
    """

    chunk_s: float = 2.0
    readings: int | None = None
    reference_s: float | None = None

    def validate(self) -> None:
        if not self.chunk_s > 0:
            raise TrackerError(f"--chunk_s must be > 0; got {self.chunk_s}")
        if self.readings is not None and self.readings < 1:
            raise TrackerError(f"--readings must be >= 1; got {self.readings}")


@dataclass
class ChangeFlag:
    """A term that moved away from its reference by more than the band.

    Attributes:
        joint, term: which number; t: first session time it did [s].
        reference, value: the reference and the estimate then; band: the combined half-width.
        max_change: the largest |change| over the session.
    """

    joint: str
    term: str
    t: float
    reference: float
    value: float
    band: float
    max_change: float


@dataclass
class TrackResult:
    """One tracker's path over a session.

    Attributes:
        joint_names; options: the RLS options; chunk_s.
        t: (U,) session time of each update [s]; run_index: (U,) the run it came from.
        theta, half_width, std: (U, N, 3) estimate, band half-width and noise std (Coulomb, viscous, offset).
        runs: run names; starts: (R,) session start of each run [s].
        reference_t: time of the reference; flags: changes larger than the band.
        converged: (N,) the final estimate is data-driven in every term (:meth:`FrictionRLS.verdict`;
            None in files written before it existed); warnings: the joints that are not, and why.
    """

    joint_names: tuple[str, ...]
    options: RLSOptions
    chunk_s: float
    t: np.ndarray
    run_index: np.ndarray
    theta: np.ndarray
    half_width: np.ndarray
    std: np.ndarray
    runs: list[str]
    starts: np.ndarray
    reference_t: float
    flags: list[ChangeFlag] = field(default_factory=list)
    converged: list[bool] | None = None
    warnings: list[str] = field(default_factory=list)

    def summary(self, truth: np.ndarray | None = None, last_fraction: float = 0.25) -> dict:
        """Per term: lag (mean error vs ``truth`` (U, N, 3) over the last part), shake (std over the last
        part, detrended against the truth when given), mean band half-width, coverage of the truth."""
        k0 = int(math.floor((1 - last_fraction) * self.t.size))
        out = {}
        for i, term in enumerate(FRICTION_TERMS):
            th = self.theta[k0:, :, i]
            d = {"half_width": np.nanmean(self.half_width[k0:, :, i], axis=0).tolist()}
            if truth is not None:
                err = th - truth[k0:, :, i]
                d["lag"] = err.mean(axis=0).tolist()
                d["shake"] = err.std(axis=0).tolist()
                inside = np.abs(self.theta[:, :, i] - truth[:, :, i]) <= self.half_width[:, :, i]
                d["coverage"] = inside.mean(axis=0).tolist()
            else:
                d["shake"] = th.std(axis=0).tolist()
            out[term] = d
        return out

    def to_json(self) -> dict:
        return {
            "schema": "isaaclab_sysid.friction_track/1",
            "joint_names": list(self.joint_names),
            "terms": list(FRICTION_TERMS),
            "options": asdict(self.options),
            "chunk_s": self.chunk_s,
            "t": self.t.tolist(),
            "run_index": self.run_index.tolist(),
            "theta": self.theta.tolist(),
            "half_width": self.half_width.tolist(),
            "std": self.std.tolist(),
            "runs": self.runs,
            "starts": self.starts.tolist(),
            "reference_t": self.reference_t,
            "flags": [asdict(f) for f in self.flags],
            "converged": None if self.converged is None else [bool(c) for c in self.converged],
            "warnings": list(self.warnings),
        }


def session_starts(samples: list[FrictionSamples], starts: list[float] | None) -> np.ndarray:
    """Each run's session start [s]: ``starts`` (checked: one per run, non-decreasing, runs not
    overlapping) or back to back (each run starts where the previous one's log ends)."""
    if starts is None:
        out, t = [], 0.0
        for s in samples:
            out.append(t)
            t += float(s.t[-1]) + 1e-3
        return np.asarray(out)
    st = np.asarray(starts, dtype=float)
    if st.shape != (len(samples),):
        raise TrackerError(f"--start_s needs one time per run: {len(samples)} runs, {st.size} times")
    for k in range(1, len(samples)):
        if st[k] < st[k - 1] + float(samples[k - 1].t[-1]):
            raise TrackerError(f"--start_s: run {samples[k].run} starts at {st[k]:g} s, before run "
                               f"{samples[k - 1].run} ends ({st[k - 1] + float(samples[k - 1].t[-1]):g} s)")
    return st


def track(samples: list[FrictionSamples], joint_names: tuple[str, ...], options: RLSOptions = RLSOptions(),
          track_options: TrackOptions = TrackOptions(), starts: list[float] | None = None,
          theta0: np.ndarray | None = None) -> TrackResult:
    """Run one tracker over a session (see module doc)."""
    track_options.validate()
    if not samples:
        raise TrackerError("no runs to track")
    n = len(joint_names)
    st = session_starts(samples, starts)
    rls = FrictionRLS(n, options, theta0)
    ts, idx, th, hw, sd = [], [], [], [], []
    for k, s in enumerate(samples):
        edges = np.arange(0.0, float(s.t[-1]) + 1e-9, track_options.chunk_s)
        for a in edges:
            m = np.flatnonzero((s.t >= a) & (s.t < a + track_options.chunk_s))
            if m.size == 0:
                continue
            if track_options.readings is not None and m.size > track_options.readings:
                m = m[np.linspace(0, m.size - 1, track_options.readings).round().astype(int)]
            state = rls.update(st[k] + float(s.t[m[-1]]), s.qd[m], s.y[m])
            ts.append(state.t)
            idx.append(k)
            th.append(state.theta)
            hw.append(state.half_width)
            sd.append(state.std)
    t = np.asarray(ts)
    result = TrackResult(tuple(joint_names), options, track_options.chunk_s, t, np.asarray(idx), np.asarray(th),
                         np.asarray(hw), np.asarray(sd), [s.run for s in samples], st, float("nan"))
    ref_t = track_options.reference_s if track_options.reference_s is not None else st[0] + float(samples[0].t[-1])
    result.reference_t = float(ref_t)
    result.flags = change_flags(result, ref_t)
    ok, warns = rls.verdict(tuple(joint_names))
    result.converged, result.warnings = [bool(c) for c in ok], warns
    return result


def change_flags(result: TrackResult, reference_t: float) -> list[ChangeFlag]:
    """The first update after ``reference_t`` where each term left its reference band."""
    t = result.t
    k_ref = int(np.searchsorted(t, reference_t, side="right")) - 1
    if k_ref < 0:
        raise TrackerError(f"--reference_s {reference_t:g} s is before the first update ({t[0]:g} s)")
    ref, ref_hw = result.theta[k_ref], result.half_width[k_ref]
    flags = []
    after = slice(k_ref + 1, None)
    change = result.theta[after] - ref[None]
    band = np.sqrt(result.half_width[after] ** 2 + ref_hw[None] ** 2)
    for j, joint in enumerate(result.joint_names):
        for i, term in enumerate(FRICTION_TERMS):
            out = np.flatnonzero(np.abs(change[:, j, i]) > band[:, j, i])
            if out.size:
                u = k_ref + 1 + int(out[0])
                flags.append(ChangeFlag(joint, term, float(t[u]), float(ref[j, i]), float(result.theta[u, j, i]),
                                        float(band[out[0], j, i]), float(np.max(np.abs(change[:, j, i])))))
    return flags
