"""Link-mass intervals from the rigid-body identification (``rb_params.json``).

A link's mass has its own interval only when it is a base parameter by itself
(a base-parameter group whose only term is ``<link>.m`` with coefficient 1):
then its standard error is that base parameter's, ``estimate.std``. A mass that
enters only in combinations with other standard parameters (the usual case for
the proximal links of a fixed-base arm, and for every mass when gravity is
compensated) cannot be pinned down by the data: its interval is unbounded with a
warning. The value is the SDP reconstruction's (``link_inertials``).
The structure allowance's rho here is the held-out torque MSE over the fit's
residual variance (``validation.rmse_pooled`` vs ``estimate.sigma_joint``).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from isaaclab_sysid.intervals.common import Interval, z_of
from isaaclab_sysid.utils.json_io import read_json


def mass_intervals(rb_path: str | Path, level: float = 0.95) -> tuple[list[Interval], float | None, list[str]]:
    """(intervals per link, rho, warnings) from an ``rb_params.json``."""
    path = Path(rb_path)
    rb = read_json(path, "rigid-body parameters")
    try:
        links = rb["link_inertials"]["links"]
        groups = rb["base_parameters"]["groups"]
        std = rb["estimate"]["std"]
    except (KeyError, TypeError) as exc:
        raise ValueError(f"{path}: not an rb_params.json (missing {exc})") from None
    z = z_of(level)
    alone = {}
    for g in groups:
        terms = g.get("terms", [])
        if len(terms) == 1 and terms[0][0].endswith(".m") and abs(float(terms[0][1]) - 1.0) < 1e-9:
            alone[terms[0][0][:-2]] = int(g["base"])
    out, warns = [], []
    for link, body in links.items():
        m = float(body["mass"])
        label = f"mass[{link}]"
        k = alone.get(link)
        s = float(std[k]) if k is not None and std[k] is not None else math.nan
        if k is None or not math.isfinite(s):
            why = "enters the dynamics only in combination with other parameters (not a base parameter alone)"
            warns.append(f"masses: {label} is not identifiable from the rigid-body data ({why}); interval unbounded")
            out.append(Interval(label, "mass", link, m, None, None, None, False, why))
            continue
        out.append(Interval(label, "mass", link, m, max(1e-6, m - z * s), m + z * s, s, True, "base parameter alone"))
    rho = None
    try:
        pooled = rb["validation"]["rmse_pooled"]
        key = "SDP (standard)" if "SDP (standard)" in pooled else next(iter(pooled))
        held = np.asarray(pooled[key], dtype=float)
        sig = np.asarray(rb["estimate"]["sigma_joint"], dtype=float)
        rho = float(np.mean(held**2) / np.mean(sig**2))
    except (KeyError, StopIteration, TypeError, ValueError):
        warns.append("masses: rb_params.json has no held-out validation: no structure-error allowance for masses")
    return out, rho, warns
