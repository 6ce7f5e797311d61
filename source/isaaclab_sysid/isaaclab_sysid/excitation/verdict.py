"""The pre-flight's verdict: PASS / WARN / FAIL per check, one overall line, and what to change.

Safety checks (a ratio to a limit; the worst joint counts):

=================  =========================================================  ======  ======
check              ratio                                                      WARN    FAIL
=================  =========================================================  ======  ======
joint range        |q - mid| / half-range of the joint reference              > 0.8   > 1.0
joint speed        |qd| / v_max of the joint reference                        > 0.8   > 1.0
replay             the nominal replay diverged                                        yes
joint torque       predicted |tau_J| / torque limit                           > 0.8   > 1.0
torque slew        torque step per setpoint / slew limit per tick             > 0.8   > 1.0
=================  =========================================================  ======  ======

(WARN at ``warn_frac``, 0.8 by default, ``--warn-frac``; FAIL at ``fail_frac`` = 1.0: past
the limit.) A torque step at 83 % of the slew limit is WARN, one at 101 % is FAIL: the real
controller ramps it, a delay the sim does not have. A safety check that did not run
(``--no-replay``) is WARN ("not checked").

Usefulness checks never FAIL (a poorly conditioned design is safe, only less informative):

* conditioning: cond(W_b) of the base regressor above :data:`COND_WARN` (1e4) is WARN
  (infinite: rank-deficient, the inertials cannot all be identified from this run);
* identifiability: a fitted parameter whose ``dL_cond`` (what the fit can see of a 5 % step
  after the others re-fit) is below :data:`IDENT_WARN_REL` (1e-2: two decades) times the median
  over all parameters is WARN; the parameters are named (e.g. joint 1's armature when joint 1
  barely moves).

Overall: ``safe to run: no`` when any check FAILs (each FAIL then names what to change:
the generator's flag when the run's sidecar names its design), else ``safe to run: yes``
(with the number of WARNs). The CLIs exit :data:`EXIT_FAIL` (3) on a FAIL.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np

#: A ratio above this fraction of its limit warns (``--warn-frac``).
WARN_FRAC = 0.8
#: A ratio above this fraction of its limit fails (past the limit).
FAIL_FRAC = 1.0
#: cond(W_b) of the base regressor above this warns (never fails).
COND_WARN = 1e4
#: A parameter whose dL_cond is below this times the median dL_cond of all parameters warns.
IDENT_WARN_REL = 1e-2
#: Exit status of the pre-flight CLIs when a check FAILs (the outputs are still written).
EXIT_FAIL = 3

PASS, WARN, FAIL = "PASS", "WARN", "FAIL"
_RANK = {PASS: 0, WARN: 1, FAIL: 2}


@dataclass
class Check:
    """One check: its status, what was measured (one phrase) and, on WARN/FAIL, what to change."""

    name: str
    status: str
    detail: str
    fix: str = ""
    safety: bool = True


@dataclass
class Verdict:
    checks: list[Check]
    thresholds: dict = field(default_factory=dict)

    @property
    def safe(self) -> bool:
        return not any(c.status == FAIL for c in self.checks)

    @property
    def status(self) -> str:
        return max((c.status for c in self.checks), key=_RANK.__getitem__, default=PASS)

    def count(self, status: str) -> int:
        return sum(c.status == status for c in self.checks)

    def overall_line(self) -> str:
        if not self.safe:
            names = ", ".join(c.name for c in self.checks if c.status == FAIL)
            return f"safe to run: no ({self.count(FAIL)} FAIL: {names})"
        n = self.count(WARN)
        return "safe to run: yes" + (f" ({n} WARN: {', '.join(c.name for c in self.checks if c.status == WARN)})"
                                      if n else "")

    def format(self) -> str:
        th = self.thresholds
        lines = [f"verdict (WARN above {th['warn_frac']:.0%} of a limit, FAIL above {th['fail_frac']:.0%}; "
                 "conditioning and identifiability at most WARN):"]
        for c in self.checks:
            lines.append(f"  {c.status}  {c.name:<16} {c.detail}")
            if c.status == WARN and c.fix:  # a FAIL's fix is under the overall line
                lines.append(f"{'':<24}-> {c.fix}")
        lines.append(self.overall_line())
        if not self.safe:
            lines += [f"  change ({c.name}): {c.fix}" for c in self.checks if c.status == FAIL and c.fix]
        return "\n".join(lines)

    def to_dict(self) -> dict:
        return {"safe_to_run": self.safe, "status": self.status, "line": self.overall_line(),
                "checks": [asdict(c) for c in self.checks], "thresholds": self.thresholds}


def _status(ratio: float, warn: float, fail: float) -> str:
    if not np.isfinite(ratio) or ratio > fail:
        return FAIL
    return WARN if ratio > warn else PASS


#: What to change per design (the generator's flags), per check; "generic" for a run no generator wrote.
_FIXES = {
    "chirp": {
        "joint range": "lower --amplitude (the rotation axes first) or move --q-init away from that joint's limit",
        "joint speed": "lower --amplitude or the band's top (--f-end-hz)",
        "joint torque": "lower --amplitude or --f-end-hz, or the stiffness (--kp-trans / --kp-rot)",
        "torque slew": "--f-end-hz (the band's top), --amplitude or --kp-trans / --kp-rot "
                       "(--band high: a larger --amp-taper-exp)",
        "replay": "lower the stiffness (--kp-trans / --kp-rot) or --amplitude",
    },
    "multiband": {
        "joint range": "lower --amplitude (the rotation axes first) or move --q-init away from that joint's limit",
        "joint speed": "lower --amplitude or --corner-hz (tapers the high tones)",
        "joint torque": "lower --amplitude or the stiffness (--kp-trans / --kp-rot)",
        "torque slew": "--amplitude, --corner-hz (tapers the high tones) or --kp-trans / --kp-rot",
        "replay": "lower the stiffness (--kp-trans / --kp-rot) or --amplitude",
    },
    "fourier": {
        "joint range": "raise --joint-margin-rad or move --q-init away from that joint's limit",
        "joint speed": "lower --speed-frac",
        "joint torque": "lower --acc-frac / --speed-frac, or the stiffness (--kp)",
        "torque slew": "--speed-frac (a setpoint step is qd x 20 ms) or the stiffness --kp",
        "replay": "lower the stiffness (--kp / --kd) or --acc-frac",
    },
    "generic": {
        "joint range": "lower the design's amplitude or move its start posture away from that joint's limit",
        "joint speed": "lower the design's amplitude or its frequency band",
        "joint torque": "lower the design's amplitude or frequency band, or the controller's stiffness",
        "torque slew": "the design's amplitude or frequency band, or the controller's stiffness",
        "replay": "lower the controller's stiffness or the design's amplitude",
    },
}
_FIXES["chirp"]["not checked"] = _FIXES["multiband"]["not checked"] = _FIXES["fourier"]["not checked"] = \
    _FIXES["generic"]["not checked"] = "run the pre-flight with the replay (drop --no-replay) before the arm moves"


def design_kind(excitation: dict) -> str:
    """``chirp`` / ``multiband`` / ``fourier`` from a run's ``excitation`` sidecar block, else ``generic``."""
    kind = str(excitation.get("kind") or excitation.get("generator") or "")
    for k in ("chirp", "multiband", "fourier"):
        if kind.startswith(k):
            return k
    return "generic"


def _ratio_check(name: str, fracs, what: str, warn: float, fail: float, fixes: dict, values=None,
                 limits=None, unit: str = "") -> Check:
    fracs = np.asarray(fracs, dtype=float)
    j = int(np.nanargmax(np.where(np.isfinite(fracs), fracs, np.inf)))
    worst = fracs[j]
    status = _status(worst, warn, fail)
    detail = f"peak {worst:.0%} of {what} (j{j + 1}"
    detail += f" {values[j]:.3g} / {limits[j]:.3g} {unit})" if values is not None else ")"
    others = [f"j{k + 1} {f:.0%}" for k, f in enumerate(fracs) if k != j and f > warn]
    if others:
        detail += "; also " + ", ".join(others)
    return Check(name, status, detail, fixes[name] if status != PASS else "")


def build_verdict(numbers: dict, table, excitation: dict, warn_frac: float = WARN_FRAC, fail_frac: float = FAIL_FRAC,
                  replay_error: str | None = None, slew_limit=None, tau_limit=None) -> Verdict:
    """The verdict of a pre-flight's numbers (``PreflightReport.numbers``) and identifiability table."""
    fixes = _FIXES[design_kind(excitation)]
    n = numbers
    checks = [
        _ratio_check("joint range", n["joint_range_frac"], "the half-range", warn_frac, fail_frac, fixes),
        _ratio_check("joint speed", n["joint_speed_frac"], "v_max", warn_frac, fail_frac, fixes),
    ]
    if replay_error is not None:
        checks.append(Check("replay", FAIL, replay_error, fixes["replay"]))
    elif "tau_peak_nm" not in n:
        for name in ("joint torque", "torque slew"):
            checks.append(Check(name, WARN, "not checked (no replay)", fixes["not checked"]))
    else:
        checks.append(Check("replay", PASS, f"stable at the nominal candidate; EE motion {n['tracking_ratio']:.2f}x "
                                            "the reference's RMS"))
        checks.append(_ratio_check("joint torque", n["tau_limit_frac"], "the torque limit", warn_frac, fail_frac, fixes,
                                   n["tau_peak_nm"], tau_limit, "N m"))
        c = _ratio_check("torque slew", n["tau_step_slew_frac"], "the slew limit per tick", warn_frac, fail_frac,
                         fixes, n["tau_step_peak_nm"], slew_limit, "N m")
        if n.get("tau_step_over_slew_count", 0):
            c.detail += f"; {n['tau_step_over_slew_count']} setpoint(s) above the limit"
        if c.status != PASS:
            worst = float(np.nanmax(n["tau_step_slew_frac"]))
            c.fix = ("the real controller ramps a step this large (a delay the sim lacks); to lower it: " + c.fix
                     + f". Steps scale with amplitude and with stiffness: x{warn_frac / worst:.2f} on either brings the worst under "
                     f"{warn_frac:.0%}" + (f", x{fail_frac / worst:.2f} to the limit" if c.status == FAIL else ""))
        checks.append(c)
    cond = float(n["regressor_cond"])
    checks.append(Check(
        "conditioning", WARN if not cond <= COND_WARN else PASS,
        f"cond(W_b) {cond:.3g} of {n['n_base_params']} base params (WARN above {COND_WARN:.0e})"
        + ("; rank-deficient: not every inertial is identifiable from this run" if not np.isfinite(cond) else ""),
        "more joints moving, larger or more varied motion (a Fourier design for the inertials)"
        if not cond <= COND_WARN else "", safety=False))
    if table is not None:
        vals = np.array([r.conditional for r in table.rows])
        med = float(np.median(vals))
        weak = [r for r in table.rows if not r.conditional >= IDENT_WARN_REL * med]
        label = lambda r: r.group + ("" if r.joint is None else f" j{r.joint}")  # noqa: E731
        if weak:
            names = ", ".join(label(r) for r in weak[:6]) + (f" +{len(weak) - 6} more" if len(weak) > 6 else "")
            detail = f"{len(weak)} parameter(s) with dL_cond < {IDENT_WARN_REL:g} x the median {med:.2e}: {names}"
            fix = "the fit will return their start or prior: move those joints more (amplitude, axes) or fix them"
            checks.append(Check("identifiability", WARN, detail, fix, safety=False))
        else:
            lo = min(table.rows, key=lambda r: r.conditional)
            checks.append(Check("identifiability", PASS, f"every dL_cond >= {IDENT_WARN_REL:g} x the median {med:.2e} "
                                                         f"(lowest {label(lo)} {lo.conditional:.2e})", safety=False))
    thresholds = {"warn_frac": warn_frac, "fail_frac": fail_frac, "cond_warn": COND_WARN,
                  "ident_warn_rel": IDENT_WARN_REL}
    return Verdict(checks, thresholds)
