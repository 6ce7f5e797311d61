"""Which state-age model the fit applies to rows logged below 1 kHz: the flag, else the sidecars, else refuse.

A 50 Hz row's state is a frame of unknown age (:mod:`isaaclab_sysid.sim.state_age`). The log may
state the age model (a schema-1 sidecar's ``"state_age": {"model": "uniform", "max_ms": N}``, read into
``RunMeta.state_age_ms``); ``--state_age_ms N`` states it for every run and overrides the sidecars.
The Franka tooling's schema-2 sidecars do not record their state stream's rate, so such runs still
need the flag. The replay applies one age to every run below 1 kHz.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from isaaclab_sysid.data.run import Run
from isaaclab_sysid.objective.errors import FitError

SIDECAR_KEY_HINT = '"state_age": {"model": "uniform", "max_ms": N}'


def resolve_state_age(flag_ms: int | None, runs: Sequence[Run], log: Callable[[str], None] = print) -> int | None:
    """The state age [ms] the replay applies to ``runs`` logged below 1 kHz (0..N ms, uniform).

    ``flag_ms`` (``--state_age_ms``) wins when given; otherwise every run below 1 kHz must state the
    same age in its sidecar. Runs logged at 1 kHz have fresh rows and need neither. Logs one line
    saying which applied (nothing when every run is at 1 kHz).

    Returns:
        ``flag_ms`` when given or when no run is below 1 kHz; else the sidecars' common age [ms].
    Raises:
        FitError: a negative flag; a run below 1 kHz whose sidecar does not state its age (without the flag);
            sidecars stating different ages (without the flag).
    """
    if flag_ms is not None and flag_ms < 0:
        raise FitError("--state_age_ms must be >= 0 (0 = fresh states)")
    slow = [r for r in runs if not r.is_1khz]
    if not slow:
        return flag_ms
    names = ", ".join(r.name for r in slow)
    stated = {r.name: r.meta.state_age_ms for r in slow if r.meta.state_age_ms is not None}
    if flag_ms is not None:
        other = sorted({f"{v} ms" for v in stated.values() if v != flag_ms})
        note = (f"; overrides the sidecar state_age of {', '.join(n for n, v in stated.items() if v != flag_ms)} "
                f"({', '.join(other)})") if other else (" (the sidecars state the same)" if stated else "")
        log(f"state age of {names}: {_words(flag_ms)} from --state_age_ms{note}")
        return flag_ms
    missing = [r for r in slow if r.meta.state_age_ms is None]
    if missing:
        rates = ", ".join(f"{r.name} ({r.meta.log_rate_hz:g} Hz)" for r in missing)
        v2 = [r.name for r in missing if r.meta.schema_version == 2]
        why = (f" ({', '.join(v2)}: the Franka tooling's schema-2 sidecar does not record its state stream's rate)"
               if v2 else "")
        raise FitError(f"{rates}: logged below 1 kHz, so each row's state has an age the log does not record{why}; give "
                       "--state_age_ms N (0..N ms, uniform: 10 for the Franka tooling's 100 Hz state stream, 0 for fresh "
                       f"states), state it in the sidecar ({SIDECAR_KEY_HINT}) or record at 1 kHz (docs/fit.md)")
    ages = sorted(set(stated.values()))
    if len(ages) > 1:
        each = ", ".join(f"{n}: {v} ms" for n, v in stated.items())
        raise FitError(f"the sidecars of the runs below 1 kHz state different state ages ({each}); the replay applies "
                       "one: give --state_age_ms N (it overrides them) or fit them separately")
    age = int(ages[0])
    log(f"state age of {names}: {_words(age)} from the sidecar{'s' if len(slow) > 1 else ''} (state_age; "
        "--state_age_ms overrides)")
    return age


def _words(age_ms: int) -> str:
    return ("rows scored as fresh (0 ms)" if age_ms == 0 else
            f"rows scored at their expected state age (0..{age_ms} ms, uniform)")
