"""Generate a Python module of Isaac Lab configs from the fit, its intervals and ranges.

The module imports only Isaac Lab (``isaaclab.actuators.DelayedPDActuatorCfg``,
``isaaclab.managers.EventTermCfg``/``SceneEntityCfg``, ``isaaclab.envs.mdp``,
``isaaclab.utils.configclass``) and holds every number as a literal, so it can be
copied into a task package. It defines:

* ``FITTED``, ``INTERVALS``, ``RANGES``: plain dicts (also read back by tests with ``ast``);
* ``make_actuator_cfg(stiffness=0.0, damping=0.0, randomize_delay=True)``: one
  ``DelayedPDActuatorCfg`` over the arm's joints with per-joint ``armature``,
  ``friction`` (Coulomb = static), ``dynamic_friction`` (= the same Coulomb level:
  the fitted model has one friction level; Newton ignores it, PhysX uses it),
  ``viscous_friction``, and ``min_delay``/``max_delay`` in physics steps (the
  delay range, or the fitted delay twice). Gains default to 0: with a torque
  controller (task impedance) computing efforts in the environment, the explicit
  actuator passes the effort through its delay buffer, as the replay does;
* ``apply_to(articulation_cfg)``: the articulation config with that actuator;
* ``SysidEventsCfg``: ``EventTermCfg`` terms, mode ``startup``:
  per joint, one ``mdp.randomize_joint_parameters`` term (see ``friction_term_params``
  below for how static/dynamic/viscous share its one friction distribution), and
  per identified link, one ``mdp.randomize_rigid_body_mass`` term (``abs``).

Isaac Lab's ``randomize_joint_parameters`` applies its one
``friction_distribution_params`` to the static, dynamic and viscous friction
together. With ``operation="scale"`` each is multiplied by the same sampled
factor from its default (the actuator config's fitted value), so the friction
term's factor range is chosen to cover both the Coulomb and the viscous range:
[min(lo_c/c, lo_v/v), max(hi_c/c, hi_v/v)] (``viscous="envelope"``, default: both
ranges covered, the two perfectly correlated) or the Coulomb range alone
(``viscous="coulomb"``: the viscous friction gets the same relative spread). A
fitted value of 0 cannot be scaled: that joint's friction term uses ``add``
with the Coulomb range's offsets (the same offsets are added to the viscous
coefficient, a documented limitation), and an armature of 0 gets its own
``abs`` term.
"""

from __future__ import annotations

import math
import pprint
from collections.abc import Mapping
from datetime import datetime

from isaaclab_sysid.timebase import TICK_S

MODULE_HEADER = '"""Isaac Lab configs exported by isaaclab_sysid (scripts/export_dr.py). Generated file: do not edit.\n\n{doc}\n"""\n'


def _r(v: float | None) -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "None"
    return repr(float(v))


def friction_term_params(c: float, v: float, rc: tuple[float, float] | None, rv: tuple[float, float] | None,
                         viscous: str = "envelope") -> tuple[str, tuple[float, float]] | None:
    """(operation, distribution params) of one joint's friction randomization, or None (no range)."""
    if rc is None and rv is None:
        return None
    if c > 0 and rc is not None:
        lo, hi = rc[0] / c, rc[1] / c
        if viscous == "envelope" and rv is not None and v > 0:
            lo, hi = min(lo, rv[0] / v), max(hi, rv[1] / v)
        return "scale", (max(lo, 0.0), hi)
    if rc is not None:
        return "add", (rc[0] - c, rc[1] - c)
    # Coulomb fixed/unknown range but viscous has one
    if v > 0 and rv is not None:
        return "scale", (max(rv[0] / v, 0.0), rv[1] / v)
    return None


def generate_module(payload: Mapping, asset_name: str = "robot", viscous: str = "envelope",
                    physics_dt: float = TICK_S) -> tuple[str, list[str]]:
    """The module's source text and warnings.

    Args:
        payload: the neutral export dict (``joint_names``, ``fitted``, ``intervals``, ``ranges``, ``masses``, ``delay``).
        asset_name: the scene entity name of the arm (``SceneEntityCfg(asset_name)``).
        viscous: ``envelope`` or ``coulomb`` (see module docstring).
        physics_dt: the Isaac Lab task's physics step [s]; the delay in 1 ms ticks is converted
            to steps, rounded outward for the range and to nearest for the fitted value.
    """
    if viscous not in ("envelope", "coulomb"):
        raise ValueError(f"viscous must be 'envelope' or 'coulomb', got {viscous!r}")
    warns: list[str] = []
    joints: list[str] = list(payload["joint_names"])
    fitted = payload["fitted"]
    act = {}
    for g, key in (("armature", "armature"), ("friction", "friction"), ("friction", "dynamic_friction"), ("viscous", "viscous_friction")):
        if g in fitted:
            act[key] = {j: float(v) for j, v in zip(joints, fitted[g])}
    delay_steps = _delay_steps(payload.get("delay"), physics_dt, warns)
    terms = _joint_terms(payload, asset_name, viscous, warns) + _mass_terms(payload, asset_name)
    return _module_source(payload, asset_name, physics_dt, act, delay_steps, terms), warns


def _delay_steps(delay: Mapping | None, physics_dt: float, warns: list[str]) -> tuple[int, int, int]:
    """(fitted, lowest, highest) delay in physics steps from the payload's ``delay`` (1 ms ticks)."""

    def steps(ticks: float, how: str) -> int:
        x = ticks * TICK_S / physics_dt
        return int(math.floor(x + 1e-9) if how == "floor" else math.ceil(x - 1e-9) if how == "ceil" else round(x))

    delay_fit = delay_lo = delay_hi = 0
    if delay is not None:
        delay_fit = steps(delay["value_ticks"], "round")
        rng = delay.get("range_ticks")
        if rng is not None:
            delay_lo, delay_hi = steps(rng[0], "floor"), steps(rng[1], "ceil")
        else:
            delay_lo = delay_hi = delay_fit
    if physics_dt != TICK_S:
        warns.append(f"delay converted from 1 ms ticks to physics steps of {physics_dt * 1e3:g} ms (range rounded outward)")
    return delay_fit, delay_lo, delay_hi


def _joint_terms(payload: Mapping, asset_name: str, viscous: str, warns: list[str]) -> list[tuple[str, str]]:
    """One ``randomize_joint_parameters`` term per joint (plus an ``abs`` armature term where scaling cannot work)."""
    joints: list[str] = list(payload["joint_names"])
    fitted = payload["fitted"]
    ranges = payload["ranges"]  # label -> {lower, upper, ...}
    keys = payload["labels_per_joint"]  # group -> list of labels in joint order
    terms: list[tuple[str, str]] = []
    for jk, j in enumerate(joints):
        c = float(fitted["friction"][jk]) if "friction" in fitted else 0.0
        v = float(fitted["viscous"][jk]) if "viscous" in fitted else 0.0
        a = float(fitted["armature"][jk]) if "armature" in fitted else 0.0

        def rng_of(g):
            lab = keys[g][jk] if g in keys else None
            r = ranges.get(lab) if lab else None
            return None if r is None else (float(r["lower"]), float(r["upper"]))

        fr = friction_term_params(c, v, rng_of("friction"), rng_of("viscous"), viscous)
        ar = rng_of("armature")
        p_main: dict[str, str] = {}
        extra_terms = []
        op = None
        if fr is not None:
            op = fr[0]
            p_main["friction_distribution_params"] = f"({_r(fr[1][0])}, {_r(fr[1][1])})"
            if op == "add":
                warns.append(f"{j}: fitted Coulomb friction is 0: friction term uses 'add' (the same offset reaches viscous)")
        if ar is not None:
            if a > 0 and op in (None, "scale"):
                op = "scale"
                p_main["armature_distribution_params"] = f"({_r(max(ar[0] / a, 0.0))}, {_r(ar[1] / a)})"
            else:
                extra_terms.append((f"armature_{_ident(j)}", _joint_term(asset_name, j, {"armature_distribution_params": f"({_r(ar[0])}, {_r(ar[1])})"}, "abs")))
        if p_main:
            terms.append((f"joint_{_ident(j)}", _joint_term(asset_name, j, p_main, op or "scale")))
        terms += extra_terms
    return terms


def _mass_terms(payload: Mapping, asset_name: str) -> list[tuple[str, str]]:
    """One ``randomize_rigid_body_mass`` term per link mass with a range."""
    terms = []
    for m in payload.get("masses", []):
        r = payload["ranges"].get(m["label"])
        if r is None:
            continue
        terms.append((f"mass_{_ident(m['link'])}", (
            "EventTermCfg(\n        func=mdp.randomize_rigid_body_mass,\n        mode=\"startup\",\n        params={\n"
            f"            \"asset_cfg\": SceneEntityCfg({asset_name!r}, body_names=[{m['link']!r}]),\n"
            f"            \"mass_distribution_params\": ({_r(max(r['lower'], 1e-6))}, {_r(r['upper'])}),\n"
            "            \"operation\": \"abs\",\n            \"distribution\": \"uniform\",\n"
            "            \"recompute_inertia\": True,\n        },\n    )")))
    return terms


def _module_source(payload: Mapping, asset_name: str, physics_dt: float, act: dict,
                   delay_steps: tuple[int, int, int], terms: list[tuple[str, str]]) -> str:
    """The generated module's text."""
    delay_fit, delay_lo, delay_hi = delay_steps
    joints = list(payload["joint_names"])
    ranges = payload["ranges"]
    doc = (f"Source: {payload.get('source')}\nCreated: {datetime.now().isoformat(timespec='seconds')}\n"
           f"Interval method: {payload.get('interval_method')} (level {payload.get('level')}); range policy: "
           f"{payload.get('range_policy')}\nrho (held-out / fit loss): {payload.get('rho')}\n"
           "Units: armature kg m^2, friction N m, viscous N m s/rad, delay physics steps "
           f"({physics_dt * 1e3:g} ms), mass kg.\nSee docs/intervals_and_export.md of isaaclab_sysid.")
    src = [MODULE_HEADER.format(doc=doc), "from __future__ import annotations\n",
           "import isaaclab.envs.mdp as mdp",
           "from isaaclab.actuators import DelayedPDActuatorCfg",
           "from isaaclab.managers import EventTermCfg, SceneEntityCfg",
           "from isaaclab.utils import configclass\n",
           f"JOINT_NAMES = {joints!r}",
           f"ASSET_NAME = {asset_name!r}",
           f"PHYSICS_DT = {physics_dt!r}",
           "#: fitted values (per joint, joint order of JOINT_NAMES); delay in physics steps",
           "FITTED = " + pprint.pformat({**{k: list(map(float, v)) for k, v in payload["fitted"].items()}, "delay_steps": delay_fit}, width=110, sort_dicts=False),
           "#: intervals: label -> (lower, upper); None = unbounded (not identifiable)",
           "INTERVALS = " + pprint.pformat({k: (v["lower"], v["upper"]) for k, v in payload["intervals"].items()}, width=110, sort_dicts=False),
           "#: randomization ranges: label -> (lower, upper) in the label's units",
           "RANGES = " + pprint.pformat({k: (v["lower"], v["upper"]) for k, v in ranges.items()}, width=110, sort_dicts=False),
           f"DELAY_RANGE_STEPS = ({delay_lo}, {delay_hi})\n",
           "ACTUATOR_VALUES = " + pprint.pformat(act, width=110, sort_dicts=False) + "\n",
           _ACT_FUNC.format(lo=delay_lo, hi=delay_hi, fit=delay_fit),
           "@configclass",
           "class SysidEventsCfg:",
           '    """Domain-randomization event terms from the identification (mode "startup")."""\n']
    if not terms:
        src.append("    pass\n")
    for name, body in terms:
        src.append(f"    {name} = {body}\n")
    return "\n".join(src)


def _ident(name: str) -> str:
    return "".join(ch if ch.isalnum() else "_" for ch in name)


def _joint_term(asset: str, joint: str, params: Mapping[str, str], op: str) -> str:
    lines = ["EventTermCfg(", "        func=mdp.randomize_joint_parameters,", '        mode="startup",', "        params={",
             f'            "asset_cfg": SceneEntityCfg({asset!r}, joint_names=[{joint!r}]),']
    lines += [f'            "{k}": {v},' for k, v in params.items()]
    lines += [f'            "operation": "{op}",', '            "distribution": "uniform",', "        },", "    )"]
    return "\n".join(lines)


_ACT_FUNC = '''
def make_actuator_cfg(stiffness: float = 0.0, damping: float = 0.0, randomize_delay: bool = True) -> DelayedPDActuatorCfg:
    """The arm's actuator with the fitted joint properties.

    Args:
        stiffness, damping: joint PD gains of the explicit actuator (0 = the environment
            sends efforts, e.g. a task-space impedance controller, delayed as on the real arm).
        randomize_delay: min/max delay = the delay's randomization range (per env at reset);
            False: both = the fitted delay.
    """
    lo, hi = (({lo}, {hi}) if randomize_delay else ({fit}, {fit}))
    return DelayedPDActuatorCfg(
        joint_names_expr=list(JOINT_NAMES),
        stiffness=stiffness,
        damping=damping,
        min_delay=lo,
        max_delay=hi,
        **{{k: dict(v) for k, v in ACTUATOR_VALUES.items()}},
    )


def apply_to(articulation_cfg, group_name: str = "sysid_arm", **kwargs):
    """``articulation_cfg`` with its actuators replaced by :func:`make_actuator_cfg` (kwargs go to it)."""
    return articulation_cfg.replace(actuators={{group_name: make_actuator_cfg(**kwargs)}})

'''
