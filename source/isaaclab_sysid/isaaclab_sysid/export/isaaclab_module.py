"""Generate a Python module of Isaac Lab configs from the fit, its intervals and ranges.

The module imports only Isaac Lab (and torch, which Isaac Lab requires) and holds
every number as a literal, so it can be copied into a task package. It defines:

* ``FITTED``, ``INTERVALS``, ``RANGES``, ``SAMPLED_RANGES``: plain dicts (also read
  back by tests with ``ast``). ``SAMPLED_RANGES`` is what the event terms actually
  draw each number from (label -> (lower, upper)); with ``viscous="independent"``
  it equals ``RANGES``;
* ``PHYSICS`` (``newton`` or ``physx``), ``PHYSICS_DT`` and ``check_physics_dt(sim_dt)``;
* ``make_actuator_cfg(stiffness=0.0, damping=0.0, randomize_delay=True)``: one
  ``DelayedPDActuatorCfg`` over the arm's joints with per-joint ``armature``,
  ``friction`` (Coulomb = static friction effort, N m), ``dynamic_friction``
  (PhysX only: the same level for the one-level Coulomb model, ``dynamic_ratio x
  mu_static`` for the static/dynamic model), ``viscous_friction``, and
  ``min_delay``/``max_delay`` in physics steps (the delay range, or the fitted
  delay twice). Gains default to 0: with a torque controller (task impedance)
  computing efforts in the environment, the explicit actuator passes the effort
  through its delay buffer, as the replay does;
* ``apply_to(articulation_cfg)``: the articulation config with that actuator;
* ``SysidEventsCfg``: ``EventTermCfg`` terms, mode ``startup``, and
  ``make_events_cfg(mode="startup", randomize_delay=True)`` (the same terms in
  another mode, e.g. ``reset`` to redraw at every reset).

Joint terms, by ``viscous``:

* ``independent`` (what ``scripts/export_dr.py`` writes by default): per joint one
  term of the module's own ``randomize_joint_dynamics``, which draws the armature,
  the Coulomb friction and the viscous friction each uniformly from its own range
  (``operation="abs"``), so every randomized number stays inside its exported range
  and covers all of it;
* ``envelope`` / ``coulomb``: per joint one stock ``mdp.randomize_joint_parameters``
  term. Isaac Lab applies its one ``friction_distribution_params`` to the static,
  dynamic and viscous friction together: under ``scale`` each is multiplied by
  the same factor from its default (the actuator config's fitted value), so the
  factor range is [min(lo_c/c, lo_v/v), max(hi_c/c, hi_v/v)] (``envelope``: both
  ranges covered, and the viscous one can be exceeded) or the Coulomb range alone
  (``coulomb``). A fitted value of 0 cannot be scaled: that joint's friction term
  uses ``add`` with the Coulomb range's offsets (the same offsets reach the viscous
  coefficient), and an armature of 0 gets its own ``abs`` term.

The delay: on the Lab actuator path (PhysX, or Newton with
``use_newton_actuators=False``) ``DelayedPDActuator`` draws a delay per env in
[min_delay, max_delay] at every reset. Newton's native actuators (Isaac Lab's
default on Newton) author ``delay_steps = max_delay`` for every env and ignore
``min_delay``; the module's ``randomize_actuator_delay`` term (``actuator_delay``)
draws the per-env delay there and writes it to the actuator (a no-op on the Lab
path). The delay is in physics steps of ``sim.dt``, whatever the env's decimation
(the actuator runs once per physics step).

Physics (``physics``): the fitted friction is a torque [N m]. Newton (MJWarp's
``dof_frictionloss``) and PhysX 5 (``PxJointFrictionParams``: static and dynamic
friction efforts, Isaac Sim >= 5) take it as such. PhysX before Isaac Sim 5 takes a
unitless coefficient that scales the spatial force through the joint: no torque
maps to it, so the module refuses to build the actuator there. Newton has one
Coulomb level: a static/dynamic fit (``mu_static`` with ``dynamic_ratio`` != 1)
is refused for Newton.
"""

from __future__ import annotations

import math
import pprint
from collections.abc import Mapping
from datetime import datetime

from isaaclab_sysid.timebase import TICK_S

MODULE_HEADER = '"""Isaac Lab configs exported by isaaclab_sysid (scripts/export_dr.py). Generated file: do not edit.\n\n{doc}\n"""\n'

#: joint-term styles (see module docstring)
VISCOUS_MODES = ("independent", "envelope", "coulomb")
#: physics backends the export writes for
PHYSICS = ("newton", "physx")


def _r(v: float | None) -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "None"
    return repr(float(v))


def friction_term_params(c: float, v: float, rc: tuple[float, float] | None, rv: tuple[float, float] | None,
                         viscous: str = "envelope") -> tuple[str, tuple[float, float]] | None:
    """(operation, distribution params) of one joint's stock friction randomization, or None (no range)."""
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


def delay_steps(delay: Mapping | None, physics_dt: float) -> tuple[int, int, int]:
    """(fitted, lowest, highest) delay in physics steps of ``physics_dt`` [s] from the dr_record's ``delay`` (1 ms ticks).

    Raises:
        ValueError: a delay (fitted or a range end) is not a whole number of physics steps.
    """
    if delay is None:
        return 0, 0, 0
    ticks = [float(delay["value_ticks"])]
    rng = delay.get("range_ticks")
    if rng is not None:
        ticks += [float(rng[0]), float(rng[1])]
    steps = []
    for t in ticks:
        x = t * TICK_S / physics_dt
        if abs(x - round(x)) > 1e-6:
            nz = [int(round(v)) for v in ticks if round(v) > 0]
            g = math.gcd(*nz) if nz else 1
            eg = " or ".join(f"{v:g} ms" for v in sorted({float(g), 1.0, 0.5}, reverse=True))
            raise ValueError(
                f"physics_dt {physics_dt * 1e3:g} ms cannot represent the delay of {t:g} ticks ({t * TICK_S * 1e3:g} ms = "
                f"{x:.4g} physics steps); delays {[int(round(v)) for v in ticks]} ms need a physics step of {g} ms / k "
                f"(k = 1, 2, ...), e.g. {eg}")
        steps.append(int(round(x)))
    if rng is None:
        return steps[0], steps[0], steps[0]
    return steps[0], steps[1], steps[2]


def actuator_values(dr_record: Mapping, physics: str = "newton") -> tuple[dict[str, dict[str, float]], list[str]]:
    """Per-joint ``DelayedPDActuatorCfg`` fields (``armature``, ``friction``, ``dynamic_friction``,
    ``viscous_friction``: joint -> value, SI units) of the dr_record's fitted values, and warnings.

    ``friction`` is the static (breakaway) Coulomb effort [N m]: the fitted ``friction``
    (one-level model: dynamic = static) or ``mu_static`` (dynamic = ``dynamic_ratio x mu_static``).

    Raises:
        ValueError: unknown ``physics``, or a static/dynamic fit for Newton (one Coulomb level).
    """
    if physics not in PHYSICS:
        raise ValueError(f"physics must be one of {PHYSICS}, got {physics!r}")
    joints: list[str] = list(dr_record["joint_names"])
    fitted = dr_record["fitted"]
    warns: list[str] = []
    per = lambda vals: {j: float(v) for j, v in zip(joints, vals)}  # noqa: E731
    act: dict[str, dict[str, float]] = {}
    if "armature" in fitted:
        act["armature"] = per(fitted["armature"])
    if "mu_static" in fitted:
        fs = [float(v) for v in fitted["mu_static"]]
        ratio = [float(v) for v in fitted.get("dynamic_ratio", [1.0] * len(fs))]
        if physics == "newton" and any(abs(r - 1.0) > 1e-9 for r in ratio):
            raise ValueError("the fit has static and dynamic friction (mu_static, dynamic_ratio != 1) but Newton has one "
                             "Coulomb level (MJWarp frictionloss): export it with --physics physx, or fit 'friction'")
        act["friction"] = per(fs)
        act["dynamic_friction"] = per([r * f for r, f in zip(ratio, fs)])
        warns.append("static/dynamic friction: the fit's Stribeck transition velocity has no Isaac Lab counterpart "
                     "(PhysX switches from static to dynamic friction at motion onset)")
    elif "friction" in fitted:
        act["friction"] = per(fitted["friction"])
        act["dynamic_friction"] = dict(act["friction"])  # one Coulomb level: dynamic = static
    if "viscous" in fitted:
        act["viscous_friction"] = per(fitted["viscous"])
    return act, warns


def generate_module(dr_record: Mapping, asset_name: str = "robot", viscous: str = "envelope",
                    physics_dt: float = TICK_S, physics: str = "newton") -> tuple[str, list[str]]:
    """The module's source text and warnings.

    Args:
        dr_record: the neutral export record, i.e. the randomization dict of ``sysid_dr.json`` (``joint_names``,
            ``fitted``, ``intervals``, ``ranges``, ``masses``, ``delay``); not the grasped part of ``payload/``.
        asset_name: the scene entity name of the arm (``SceneEntityCfg(asset_name)``).
        viscous: ``independent``, ``envelope`` or ``coulomb`` (see module docstring).
        physics_dt: the Isaac Lab task's physics step ``sim.dt`` [s]; every delay (1 ms ticks) must be a
            whole number of these steps.
        physics: ``newton`` or ``physx`` (how the friction torque is written; see module docstring).

    Raises:
        ValueError: bad ``viscous``/``physics``, a ``physics_dt`` that cannot represent the delay, or a
            static/dynamic friction fit for Newton.
    """
    if viscous not in VISCOUS_MODES:
        raise ValueError(f"viscous must be one of {VISCOUS_MODES}, got {viscous!r}")
    if not (physics_dt > 0 and math.isfinite(physics_dt)):
        raise ValueError(f"physics_dt must be > 0 [s], got {physics_dt!r}")
    act, warns = actuator_values(dr_record, physics)
    delay = delay_steps(dr_record.get("delay"), physics_dt)
    if physics_dt != TICK_S:
        warns.append(f"delay converted from 1 ms ticks to physics steps of {physics_dt * 1e3:g} ms")
    if viscous == "independent":
        terms, sampled = _independent_terms(dr_record, asset_name, act)
    else:
        terms, sampled = _stock_joint_terms(dr_record, asset_name, viscous, act, warns)
    mass_terms, mass_sampled = _mass_terms(dr_record, asset_name)
    terms += mass_terms
    sampled.update(mass_sampled)
    if delay[1] < delay[2]:
        terms.append(("actuator_delay", _delay_term(asset_name)))
        sampled["delay"] = (float(delay[1]), float(delay[2]))
    outside = [lab for lab, (lo, hi) in sampled.items() if lab in dr_record["ranges"] and lab != "delay"
               and not _inside((lo, hi), dr_record["ranges"][lab])]
    if outside:
        warns.append(f"viscous={viscous}: {len(outside)} randomized number(s) are drawn outside their exported range "
                     f"({', '.join(outside[:4])}{', ...' if len(outside) > 4 else ''}); --viscous independent keeps each inside")
    return _module_source(dr_record, asset_name, physics_dt, physics, act, delay, terms, sampled, viscous), warns


def _inside(r: tuple[float, float], ref: Mapping) -> bool:
    tol = 1e-9 * max(1.0, abs(float(ref["upper"])))
    return r[0] >= float(ref["lower"]) - tol and r[1] <= float(ref["upper"]) + tol


def _ranges_of(dr_record: Mapping):
    joints: list[str] = list(dr_record["joint_names"])
    keys = dr_record["labels_per_joint"]  # group -> list of labels in joint order
    ranges = dr_record["ranges"]  # label -> {lower, upper, ...}

    def rng_of(group: str, jk: int) -> tuple[str | None, tuple[float, float] | None]:
        lab = keys[group][jk] if group in keys else None
        r = ranges.get(lab) if lab else None
        return lab, (None if r is None else (float(r["lower"]), float(r["upper"])))

    return joints, rng_of


def _friction_group(dr_record: Mapping) -> str:
    return "mu_static" if "mu_static" in dr_record["fitted"] else "friction"


def _independent_terms(dr_record: Mapping, asset_name: str, act: Mapping) -> tuple[list[tuple[str, str]], dict]:
    """One ``randomize_joint_dynamics`` term per joint with a range, and the sampled ranges (= the exported ones)."""
    joints, rng_of = _ranges_of(dr_record)
    fg = _friction_group(dr_record)
    terms, sampled = [], {}
    for jk, j in enumerate(joints):
        params: dict[str, str] = {}
        for group, key in (("armature", "armature_range"), (fg, "friction_range"), ("viscous", "viscous_range"),
                           ("dynamic_ratio", "dynamic_ratio_range")):
            lab, r = rng_of(group, jk)
            if r is not None:
                params[key] = f"({_r(r[0])}, {_r(r[1])})"
                sampled[lab] = r
        if "dynamic_ratio_range" not in params and "dynamic_friction" in act:
            fs = act["friction"][j]
            params["dynamic_ratio"] = _r(act["dynamic_friction"][j] / fs if fs > 0 else 1.0)
        if any(k.endswith("_range") for k in params):
            terms.append((f"joint_{_ident(j)}", _call_term(
                "randomize_joint_dynamics", asset_name, f"joint_names=[{j!r}]", params)))
    return terms, sampled


def _stock_joint_terms(dr_record: Mapping, asset_name: str, viscous: str, act: Mapping,
                       warns: list[str]) -> tuple[list[tuple[str, str]], dict]:
    """One ``randomize_joint_parameters`` term per joint (plus an ``abs`` armature term where scaling cannot work)."""
    joints, rng_of = _ranges_of(dr_record)
    fg = _friction_group(dr_record)
    terms: list[tuple[str, str]] = []
    sampled: dict[str, tuple[float, float]] = {}
    for jk, j in enumerate(joints):
        c = float(act.get("friction", {}).get(j, 0.0))
        v = float(act.get("viscous_friction", {}).get(j, 0.0))
        a = float(act.get("armature", {}).get(j, 0.0))
        lab_c, rc = rng_of(fg, jk)
        lab_v, rv = rng_of("viscous", jk)
        lab_a, ar = rng_of("armature", jk)
        if rng_of("dynamic_ratio", jk)[1] is not None:
            warns.append(f"{j}: randomize_joint_parameters scales dynamic friction with static: the dynamic_ratio range is "
                         "not randomized (use --viscous independent)")
        fr = friction_term_params(c, v, rc, rv, viscous)
        p_main: dict[str, str] = {}
        extra_terms = []
        op = None
        if fr is not None:
            op, (lo, hi) = fr
            p_main["friction_distribution_params"] = f"({_r(lo)}, {_r(hi)})"
            if op == "add":
                warns.append(f"{j}: fitted Coulomb friction is 0: friction term uses 'add' (the same offset reaches viscous)")
                for lab, val in ((lab_c, c), (lab_v, v)):
                    if lab is not None:
                        sampled[lab] = (max(val + lo, 0.0), max(val + hi, 0.0))
            else:
                for lab, val in ((lab_c, c), (lab_v, v)):
                    if lab is not None:
                        sampled[lab] = (val * lo, val * hi)
        if ar is not None:
            if a > 0 and op in (None, "scale"):
                op = "scale"
                p_main["armature_distribution_params"] = f"({_r(max(ar[0] / a, 0.0))}, {_r(ar[1] / a)})"
                sampled[lab_a] = (a * max(ar[0] / a, 0.0), ar[1])
            else:
                extra_terms.append((f"armature_{_ident(j)}", _joint_term(asset_name, j, {"armature_distribution_params": f"({_r(ar[0])}, {_r(ar[1])})"}, "abs")))
                sampled[lab_a] = ar
        if p_main:
            terms.append((f"joint_{_ident(j)}", _joint_term(asset_name, j, p_main, op or "scale")))
        terms += extra_terms
    return terms, sampled


def _mass_terms(dr_record: Mapping, asset_name: str) -> tuple[list[tuple[str, str]], dict]:
    """One ``randomize_rigid_body_mass`` term per link mass with a range."""
    terms, sampled = [], {}
    for m in dr_record.get("masses", []):
        r = dr_record["ranges"].get(m["label"])
        if r is None:
            continue
        lo, hi = max(r["lower"], 1e-6), r["upper"]
        sampled[m["label"]] = (float(lo), float(hi))
        terms.append((f"mass_{_ident(m['link'])}", (
            "EventTermCfg(\n        func=mdp.randomize_rigid_body_mass,\n        mode=\"startup\",\n        params={\n"
            f"            \"asset_cfg\": SceneEntityCfg({asset_name!r}, body_names=[{m['link']!r}]),\n"
            f"            \"mass_distribution_params\": ({_r(lo)}, {_r(hi)}),\n"
            "            \"operation\": \"abs\",\n            \"distribution\": \"uniform\",\n"
            "            \"recompute_inertia\": True,\n        },\n    )")))
    return terms, sampled


def _module_source(dr_record: Mapping, asset_name: str, physics_dt: float, physics: str, act: dict,
                   delay: tuple[int, int, int], terms: list[tuple[str, str]], sampled: dict, viscous: str) -> str:
    """The generated module's text."""
    delay_fit, delay_lo, delay_hi = delay
    joints = list(dr_record["joint_names"])
    ranges = dr_record["ranges"]
    doc = (f"Source: {dr_record.get('source')}\nCreated: {datetime.now().isoformat(timespec='seconds')}\n"
           f"Interval method: {dr_record.get('interval_method')} (level {dr_record.get('level')}); range policy: "
           f"{dr_record.get('range_policy')}\nrho (held-out / fit loss): {dr_record.get('rho')}\n"
           f"Physics: {physics}; joint terms: {viscous}.\n"
           "Units: armature kg m^2, friction N m (a torque, on Newton and on PhysX 5), viscous N m s/rad, delay physics "
           f"steps of sim.dt = {physics_dt * 1e3:g} ms (not env steps), mass kg.\nSee docs/intervals_and_export.md of isaaclab_sysid.")
    src = [MODULE_HEADER.format(doc=doc), "from __future__ import annotations\n",
           "import torch\n",
           *(["import isaaclab.envs.mdp as mdp"] if any("mdp." in body for _, body in terms) else []),
           "from isaaclab.actuators import DelayedPDActuatorCfg",
           "from isaaclab.managers import EventTermCfg, ManagerTermBase, SceneEntityCfg",
           "from isaaclab.utils import configclass\n",
           f"JOINT_NAMES = {joints!r}",
           f"ASSET_NAME = {asset_name!r}",
           f"PHYSICS = {physics!r}",
           f"PHYSICS_DT = {physics_dt!r}",
           "#: fitted values (per joint, joint order of JOINT_NAMES); delay in physics steps",
           "FITTED = " + pprint.pformat({**{k: list(map(float, v)) for k, v in dr_record["fitted"].items()}, "delay_steps": delay_fit}, width=110, sort_dicts=False),
           "#: intervals: label -> (lower, upper); None = unbounded (not identifiable)",
           "INTERVALS = " + pprint.pformat({k: (v["lower"], v["upper"]) for k, v in dr_record["intervals"].items()}, width=110, sort_dicts=False),
           "#: randomization ranges: label -> (lower, upper) in the label's units",
           "RANGES = " + pprint.pformat({k: (v["lower"], v["upper"]) for k, v in ranges.items()}, width=110, sort_dicts=False),
           "#: what the event terms draw each randomized number from (label -> (lower, upper)); delay in physics steps",
           "SAMPLED_RANGES = " + pprint.pformat(sampled, width=110, sort_dicts=False),
           f"DELAY_RANGE_STEPS = ({delay_lo}, {delay_hi})\n",
           "ACTUATOR_VALUES = " + pprint.pformat(act, width=110, sort_dicts=False) + "\n",
           _ACT_FUNC.format(lo=delay_lo, hi=delay_hi, fit=delay_fit),
           _TERMS_SRC,
           "@configclass",
           "class SysidEventsCfg:",
           '    """Domain-randomization event terms from the identification (mode "startup")."""\n']
    if not terms:
        src.append("    pass\n")
    for name, body in terms:
        src.append(f"    {name} = {body}\n")
    src.append(_EVENTS_FUNC)
    return "\n".join(src)


def _ident(name: str) -> str:
    return "".join(ch if ch.isalnum() else "_" for ch in name)


def _joint_term(asset: str, joint: str, params: Mapping[str, str], op: str) -> str:
    lines = ["EventTermCfg(", "        func=mdp.randomize_joint_parameters,", '        mode="startup",', "        params={",
             f'            "asset_cfg": SceneEntityCfg({asset!r}, joint_names=[{joint!r}]),']
    lines += [f'            "{k}": {v},' for k, v in params.items()]
    lines += [f'            "operation": "{op}",', '            "distribution": "uniform",', "        },", "    )"]
    return "\n".join(lines)


def _call_term(func: str, asset: str, selector: str, params: Mapping[str, str]) -> str:
    lines = ["EventTermCfg(", f"        func={func},", '        mode="startup",', "        params={",
             f'            "asset_cfg": SceneEntityCfg({asset!r}{", " + selector if selector else ""}),']
    lines += [f'            "{k}": {v},' for k, v in params.items()]
    lines += ["        },", "    )"]
    return "\n".join(lines)


def _delay_term(asset: str) -> str:
    return _call_term("randomize_actuator_delay", asset, "",
                      {"group_name": '"sysid_arm"', "delay_range": "DELAY_RANGE_STEPS"})


_ACT_FUNC = '''
def check_physics_dt(sim_dt: float) -> None:
    """Refuse a task whose physics step is not the one the delay was exported for.

    Raises:
        ValueError: ``sim_dt`` [s] differs from ``PHYSICS_DT`` (the delay in steps would be wrong).
    """
    if abs(float(sim_dt) - PHYSICS_DT) > 1e-12:
        raise ValueError(
            f"this export's delays are in physics steps of {{PHYSICS_DT * 1e3:g}} ms but the task's sim.dt is "
            f"{{float(sim_dt) * 1e3:g}} ms: re-export with scripts/export_dr.py --physics_dt {{float(sim_dt)!r}} "
            "(refused there if that step cannot represent the delay)"
        )


def _check_friction_units() -> None:
    """PhysX before Isaac Sim 5 takes a unitless friction coefficient, not the fitted torque: refuse."""
    if PHYSICS != "physx":
        return
    from isaaclab.utils.version import get_isaac_sim_version, has_kit

    if has_kit() and get_isaac_sim_version().major < 5:
        raise RuntimeError(
            "PhysX joint friction before Isaac Sim 5 is a unitless coefficient of the spatial force through the joint; "
            "this export's friction is a torque [N m] (PhysX 5 friction efforts): use Isaac Sim >= 5"
        )


def make_actuator_cfg(stiffness: float = 0.0, damping: float = 0.0, randomize_delay: bool = True) -> DelayedPDActuatorCfg:
    """The arm's actuator with the fitted joint properties.

    Args:
        stiffness, damping: joint PD gains of the explicit actuator (0 = the environment
            sends efforts, e.g. a task-space impedance controller, delayed as on the real arm).
        randomize_delay: min/max delay = the delay's randomization range (drawn per env; on
            Newton's native actuators by the ``actuator_delay`` event term); False: both = the
            fitted delay (then use ``make_events_cfg(randomize_delay=False)``).
    """
    _check_friction_units()
    lo, hi = (({lo}, {hi}) if randomize_delay else ({fit}, {fit}))
    values = {{k: dict(v) for k, v in ACTUATOR_VALUES.items()}}
    if PHYSICS == "newton":
        values.pop("dynamic_friction", None)  # Newton has one Coulomb level (and warns on a dynamic one)
    return DelayedPDActuatorCfg(
        joint_names_expr=list(JOINT_NAMES),
        stiffness=stiffness,
        damping=damping,
        min_delay=lo,
        max_delay=hi,
        **values,
    )


def apply_to(articulation_cfg, group_name: str = "sysid_arm", **kwargs):
    """``articulation_cfg`` with its actuators replaced by :func:`make_actuator_cfg` (kwargs go to it)."""
    return articulation_cfg.replace(actuators={{group_name: make_actuator_cfg(**kwargs)}})
'''

_TERMS_SRC = '''
def _env_ids(env, env_ids, device):
    if env_ids is None or isinstance(env_ids, slice):
        return torch.arange(env.scene.num_envs, dtype=torch.int32, device=device)[env_ids if isinstance(env_ids, slice) else slice(None)]
    return torch.as_tensor(env_ids, device=device).to(torch.int32)


def _uniform(r, n, m, device):
    return torch.rand(n, m, device=device) * (float(r[1]) - float(r[0])) + float(r[0])


class randomize_joint_dynamics(ManagerTermBase):
    """Per env: the selected joints' armature [kg m^2], Coulomb friction [N m] and viscous friction [N m s/rad],
    each drawn uniformly from its own range (absolute values; a range left None keeps the current value).

    The dynamic friction (PhysX) is ``dynamic_ratio x`` the drawn static friction (the ratio drawn from
    ``dynamic_ratio_range`` when given); Newton has no dynamic friction.
    """

    def __init__(self, cfg, env):
        super().__init__(cfg, env)
        self.asset = env.scene[cfg.params["asset_cfg"].name]

    def __call__(self, env, env_ids, asset_cfg, armature_range=None, friction_range=None, viscous_range=None,
                 dynamic_ratio_range=None, dynamic_ratio=1.0):
        asset = self.asset
        dev = asset.device
        ids = _env_ids(env, env_ids, dev)
        jids = asset_cfg.joint_ids
        jids = torch.arange(asset.num_joints, dtype=torch.int32, device=dev) if isinstance(jids, slice) else torch.as_tensor(jids, dtype=torch.int32, device=dev)
        n, m = len(ids), len(jids)
        if armature_range is not None:
            asset.write_joint_armature_to_sim_index(armature=_uniform(armature_range, n, m, dev), joint_ids=jids, env_ids=ids)
        if friction_range is None and viscous_range is None and dynamic_ratio_range is None:
            return
        rows, cols = ids.long()[:, None], jids.long()[None, :]
        static = (_uniform(friction_range, n, m, dev) if friction_range is not None
                  else asset.data.joint_friction_coeff.torch[rows, cols].clone())
        visc = None if viscous_range is None else _uniform(viscous_range, n, m, dev)
        dyn = None
        if PHYSICS == "physx":
            ratio = _uniform(dynamic_ratio_range, n, m, dev) if dynamic_ratio_range is not None else float(dynamic_ratio)
            dyn = static * ratio
        asset.write_joint_friction_coefficient_to_sim_index(
            joint_friction_coeff=static, joint_dynamic_friction_coeff=dyn, joint_viscous_friction_coeff=visc,
            joint_ids=jids, env_ids=ids)


class randomize_actuator_delay(ManagerTermBase):
    """Per env, the actuator delay [physics steps] drawn uniformly from the integers of ``delay_range``.

    Newton's native actuators keep one authored delay (``max_delay``) for every env: this term writes
    the drawn one. On the Lab actuator path ``DelayedPDActuator`` draws it itself at every reset and
    the term does nothing.
    """

    def __init__(self, cfg, env):
        super().__init__(cfg, env)
        self.asset = env.scene[cfg.params["asset_cfg"].name]
        group = cfg.params["group_name"]
        act = self.asset.cfg.actuators.get(group)
        lo, hi = cfg.params["delay_range"]
        if act is None or getattr(act, "max_delay", 0) < hi:
            raise ValueError(f"actuator group {group!r} must be make_actuator_cfg(randomize_delay=True) (max_delay >= {hi}) "
                             "for the actuator_delay term; with a fixed delay use make_events_cfg(randomize_delay=False)")
        self.native = None  # known once the articulation's actuators exist (after the simulation starts)

    def _is_native(self, group_name):
        from isaaclab.actuators.newton import read_group_parameter

        try:
            read_group_parameter(self.asset.actuators, group_name, "delay", "delay_steps")
        except ValueError:  # Isaac Lab: "not executed by Newton actuators" (the Lab path draws the delay itself)
            return False
        return True

    def __call__(self, env, env_ids, asset_cfg, group_name, delay_range):
        from isaaclab.actuators.newton import write_group_parameter

        if self.native is None:
            self.native = self._is_native(group_name)
        if not self.native:
            return
        asset = self.asset
        ids = _env_ids(env, env_ids, asset.device)
        lo, hi = int(delay_range[0]), int(delay_range[1])
        d = torch.randint(lo, hi + 1, (len(ids), 1), device=asset.device, dtype=torch.int32)
        write_group_parameter(asset.actuators, group_name, "delay", "delay_steps", d.expand(-1, len(JOINT_NAMES)),
                              env_ids=ids.long())
'''

_EVENTS_FUNC = '''
def make_events_cfg(mode: str = "startup", randomize_delay: bool = True) -> SysidEventsCfg:
    """:class:`SysidEventsCfg` with every term in ``mode`` (``startup``: drawn once per env; ``reset``:
    redrawn at every reset); ``randomize_delay=False`` drops the delay term (for a fixed-delay actuator)."""
    ev = SysidEventsCfg()
    for name, term in list(vars(ev).items()):
        if not isinstance(term, EventTermCfg):
            continue
        if name == "actuator_delay" and not randomize_delay:
            setattr(ev, name, None)
        else:
            term.mode = mode
    return ev
'''
