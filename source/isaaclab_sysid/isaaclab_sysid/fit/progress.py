"""The fit's progress lines: one per CMA-ES generation and per refinement iteration, at most
:data:`MAX_WIDTH` characters, each with the elapsed time and the time left.

Every line starts with its counter and clock, e.g.::

    [gen 3/8 12s, ~20s left] best 1.234e-04 med 2.35e-04 so far 1.000e-04 | diverged 0/16 | sigma 0.123 | w*L of best: ...
    [refine  4 ph 1/2 (<=12/ph) 1m05s, <=2m10s left] best 9.5058e-07 | 39 rollouts | tracks: delay 2: ... | at bound: ...

The time left is this stage's budget at the pace so far: generations left (``--max_iter``) x
the mean time per generation; for the refinement the iterations its budget still allows
(``--refine_iter`` per phase, two phases when the delay is fitted) x the mean time per
iteration, an upper bound (``<=``: a refinement stops early when it converges). Optional
parts (each run's w*L, the delay tracks, the parameters at a bound) are cut to fit, with
``+N more`` saying what was left out; a longer one-off line (the fast path's verdict) is
wrapped onto indented continuation lines.

Where the fit logs with ``print`` and stdout is a terminal, a ``rich`` progress bar of the
current stage sits below the lines (elapsed and time left); in logs, CI and tests (stdout not
a terminal, or another ``log``) only the plain lines are written.
"""

from __future__ import annotations

import atexit
import builtins
import re
import sys
import time
from collections.abc import Callable, Sequence

#: A progress line is at most this many characters.
MAX_WIDTH = 160


def fmt_duration(s: float) -> str:
    """``12s``, ``3m05s``, ``1h02m`` (``?`` when not finite)."""
    if not s == s or s in (float("inf"), float("-inf")):
        return "?"
    s = max(0.0, float(s))
    if s < 60:
        return f"{s:.0f}s" if s >= 9.5 else f"{s:.1f}s"
    m, sec = divmod(int(round(s)), 60)
    if m < 60:
        return f"{m}m{sec:02d}s"
    h, m = divmod(m, 60)
    return f"{h}h{m:02d}m"


def track_label(t: dict) -> str:
    """``"<start> (delay <d>): "`` of a track record: which start it came from and its delay ("" when neither)."""
    start, delay = t.get("start") or "", f"delay {t['delay']}" if t.get("delay") is not None else ""
    if start and delay:
        return f"{start} ({delay}): "
    return f"{start or delay}: " if start or delay else ""


def fit_line(head: str, parts: Sequence[str], optional: Sequence[tuple[str, Sequence[str]]] = (),
             width: int = MAX_WIDTH) -> str:
    """``head`` + `` | ``-joined ``parts``, then each optional ``(label, items)`` with as many items as fit in
    ``width`` (the rest as ``+N more``; every optional part keeps at least its label and its count); hard-cut
    with ``...`` if even that is too long."""
    line = head + "".join(f" | {p}" if i else f" {p}" for i, p in enumerate(parts))
    opts = [(label, list(items)) for label, items in optional if items]

    def piece(label: str, items: list[str], k: int) -> str:
        if k == 0:
            return f" | {label} {len(items)}"
        return f" | {label} {', '.join(items[:k])}" + (f" +{len(items) - k} more" if k < len(items) else "")

    shown = [0] * len(opts)
    for i, (label, items) in enumerate(opts):  # in order, each as far as the room the later ones leave allows
        rest = sum(len(piece(lb, it, 0)) for lb, it in opts[i + 1:])
        done = "".join(piece(lb, it, k) for (lb, it), k in zip(opts[:i], shown[:i]))
        for k in range(len(items), -1, -1):
            if len(line) + len(done) + len(piece(label, items, k)) + rest <= width or k == 0:
                shown[i] = k
                break
    line += "".join(piece(lb, it, k) for (lb, it), k in zip(opts, shown))
    return line if len(line) <= width else line[: width - 3] + "..."


def wrap(text: str, width: int = MAX_WIDTH, indent: str = "    ") -> list[str]:
    """``text`` split at spaces into lines of at most ``width`` characters (continuations indented)."""
    out, cur = [], ""
    for word in text.split(" "):
        cand = f"{cur} {word}" if cur else word
        if len(cand) > width and cur.strip():
            out.append(cur)
            cur = indent + word
        else:
            cur = cand
    out.append(cur)
    return [ln if len(ln) <= width else ln[: width - 3] + "..." for ln in out]


def _short(name: str, n: int = 14) -> str:
    """A run name cut to ``n`` characters, keeping its head and its last 4 (``twin_joint..._fit``)."""
    return name if len(name) <= n else name[: n - 6] + ".." + name[-4:]


class _Bar:
    """A ``rich`` bar of the current stage, below the lines printed meanwhile (stdout redirected above it)."""

    def __init__(self) -> None:
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

        self.progress = Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                                 TimeElapsedColumn(), TextColumn("elapsed,"), TimeRemainingColumn(), TextColumn("left"),
                                 redirect_stdout=True, redirect_stderr=True, transient=True)
        self.task = None
        self.stage = None
        self.started = False
        atexit.register(self.close)

    def update(self, stage: str, done: int, total: int) -> None:
        if not self.started:
            self.progress.start()
            self.started = True
        if stage != self.stage:
            if self.task is not None:
                self.progress.remove_task(self.task)
            self.task = self.progress.add_task(stage, total=max(total, 1), completed=0)
            self.stage = stage
        self.progress.update(self.task, completed=min(done, total), total=max(total, 1))

    def close(self) -> None:
        if self.started:
            if self.task is not None:
                self.progress.remove_task(self.task)
            self.progress.stop()
            self.started = False
            self.task = self.stage = None


class FitProgress:
    """The clock and line formatting of one search's progress (see the module doc).

    Args:
        log: where lines go (``print`` on a terminal also gets the bar).
        max_iter: CMA-ES generations (``--max_iter``); refine_iter: refinement Jacobians per phase (the Broyden steps between them come on top).
        bar: force the bar on/off (default: ``log is print`` and stdout is a terminal).
    """

    def __init__(self, log: Callable[[str], None], max_iter: int, refine_iter: int, bar: bool | None = None,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        self.log = log
        self.max_iter = max_iter
        self.refine_iter = refine_iter
        self.clock = clock
        self.t0 = clock()
        self._stage: tuple | None = None  # (name, the count before the first one seen, when that unit started)
        self._last = self.t0
        self._phase2_start: int | None = None
        if bar is None:
            bar = log is builtins.print and sys.stdout is not None and sys.stdout.isatty()
        self.bar = _Bar() if bar else None

    # -- clock -----------------------------------------------------------------------------------------------------
    def _clock(self, stage: str, done: int, left: int, upper: bool, first_s: float | None = None) -> str:
        """``12s, ~20s left`` for ``done`` units of ``stage`` done and ``left`` still in its budget (at the mean
        pace of the units this process ran; ``first_s``: how long the first unit took, when the clock started late)."""
        now = self.clock()
        if self._stage is None or self._stage[0] != stage:
            t_start = self._last if self._stage is not None else (self.t0 if first_s is None else min(self.t0, now - first_s))
            self.t0 = min(self.t0, t_start)
            self._stage = (stage, done - 1, t_start)
        _, first, t_start = self._stage
        self._last = now
        pace = (now - t_start) / max(done - first, 1)
        rest = f"{'<=' if upper else '~'}{fmt_duration(pace * left)} left" if left > 0 else "0s left"
        return f"{fmt_duration(now - self.t0)}, {rest}"

    def _refine_budget(self, record: dict) -> tuple[int, int, int, int, bool]:
        """(iteration, phase, phases, iterations its budget still allows, finished) of a refinement record."""
        it, phase = int(record["iteration"]), int(record.get("phase", 1))
        phases = 2 if any(t.get("delay") is not None for t in record["tracks"]) else 1
        if phase == 2 and self._phase2_start is None:
            self._phase2_start = it - 1
        in_phase = it - self._phase2_start if phase == 2 else it
        finished = phase == phases and not any(t["active"] for t in record["tracks"])
        if finished:
            left = 0
        elif "iterations_left" in record:  # the refiner's own bound (Broyden steps between Jacobians come on top)
            left = max(int(record["iterations_left"]), 1)
        else:  # records of older refinements: one Jacobian per iteration
            left = max(self.refine_iter - in_phase, 1) + (self.refine_iter if phase < phases else 0)
        return it, phase, phases, left, finished

    def _emit(self, line: str, stage: str, done: int, total: int) -> None:
        self.log(line)
        if self.bar is not None:
            self.bar.update(stage, done, total)
            if done >= total:
                self.bar.close()

    # -- lines -----------------------------------------------------------------------------------------------------
    def generation_line(self, rec, run_names: Sequence[str], hits: Sequence = ()) -> str:
        """The line of a CMA-ES generation (:class:`~isaaclab_sysid.fit.optimizer.GenerationRecord`)."""
        left = self.max_iter - rec.iteration
        clock = self._clock("cmaes", rec.iteration, left, False, first_s=getattr(rec, "wall_s", None))
        head = f"[gen {rec.iteration:{len(str(self.max_iter))}d}/{self.max_iter} {clock}]"
        parts = [f"best {rec.best:.3e} med {rec.median:.2e} so far {rec.best_ever:.3e}",
                 f"diverged {rec.n_diverged}/{rec.popsize}", f"sigma {rec.sigma:.3f}"]
        named = [f"{_short(n)} {c:.2e}" for n, c in zip(run_names, rec.contrib_best)]
        bound = ("at bound:", _hits(hits))
        line = fit_line(head, parts, [("w*L of best:", named), bound])
        if ", ".join(named) not in line:  # no room for the names: the values in the runs' order
            line = fit_line(head, parts, [("w*L by run:", [f"{c:.2e}" for c in rec.contrib_best]), bound])
        return line

    def refine_line(self, record: dict, hits: Sequence = ()) -> str:
        """The line of a refinement iteration (the record :meth:`LMRefiner.step` returns)."""
        it, phase, phases, left, _ = self._refine_budget(record)
        head = f"[refine {it:2d} ph {phase}/{phases} (<={self.refine_iter} Jac/ph) {self._clock('refine', it, left, True)}]"
        tracks = [track_label(t) + f"{t['loss']:.3e}"
                  + ("" if t["active"] else " (done)") for t in record["tracks"]]
        return fit_line(head, [f"best {record['best']:.4e}", f"{record['evaluations']} rollouts"],
                        [("tracks:", tracks), ("at bound:", _hits(hits))])

    # -- what the search calls ---------------------------------------------------------------------------------------
    def generation(self, rec, run_names: Sequence[str], hits: Sequence = ()) -> None:
        self._emit(self.generation_line(rec, run_names, hits), "CMA-ES", rec.iteration, self.max_iter)

    def refinement(self, record: dict, hits: Sequence = ()) -> None:
        line = self.refine_line(record, hits)
        it, _, _, left, _ = self._refine_budget(record)
        self._emit(line, "refinement", it, it + left)

    def note(self, text: str) -> None:
        """A one-off line (e.g. the fast path's verdict) with the elapsed time, wrapped to :data:`MAX_WIDTH`."""
        if text.startswith("[") and "]" in text:
            tag, rest = text[1:].split("]", 1)
            text = f"[{tag} {fmt_duration(self.clock() - self.t0)}]{rest}"
        for ln in wrap(text):
            self.log(ln)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def _hits(hits: Sequence) -> list[str]:
    """``armature[panda_joint4] (lower)`` -> ``armature[j4] lo``."""
    return [re.sub(r"\[[^\]]*?(\d+)\]", r"[j\1]", h.label) + (" lo" if h.side == "lower" else " hi") for h in hits]
