"""``--fit_groups auto``: the friction model the fit runs ask for, chosen on evidence and said in the log.

A joint that sticks needs static friction (``mu_static``, ``dynamic_ratio``: Stribeck) where a Coulomb model
bends its other numbers to hide the peak; a joint that does not stick gains nothing from two more numbers per
joint but wider intervals. The job therefore fits the Coulomb set first (``armature, friction, viscous, delay``),
then gathers two pieces of evidence, on the fit runs only (no held-out run enters the choice):

* the static-friction score test (:func:`~isaaclab_sysid.evaluate.friction_score.static_friction_test`) at the
  Coulomb optimum: z per joint against a one-sided Bonferroni threshold (its outcome is reused by the adequacy
  verdict, which runs it anyway);
* a refit with the static group from the Coulomb optimum written in the static group's coordinates
  (``mu_static`` = the fitted friction, ``dynamic_ratio`` = 1: exactly the Coulomb model, so the refit can only
  lower the loss), the refinement alone from that one start. It runs only when the score test fires or the
  bounded Gauss-Newton step from the test's own Jacobian forecasts at least half the margin (the forecast is
  ``StaticFrictionTest.predicted_gain``: 46.5 % against a refit's 49.3 % on the twin below, 0.1 % on Coulomb
  truth), so on data that want no static friction ``auto`` costs the score test alone, which the adequacy verdict
  runs anyway.

The static model is the answer when the score test fires, or when the refit lowers the fit loss by at least
``margin`` (10 % by default: seven more numbers always buy a little; on the Coulomb twin of tests/test_fit_groups_auto.py they bought 0.0 %, on a
joint-PD twin whose static level is twice its Coulomb level 49 %, from a residual 3.9x the white noise to 1.1x).
The score test alone is conservative: on that twin its z stayed below 1.2 (threshold 3.6) while the static model
halved the loss. Else the Coulomb fit stays. Where neither can be run (a torque replay, a backend without the static
group, no Coulomb group) the Coulomb fit stays and :class:`FrictionChoice` says why.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field

from isaaclab_sysid.evaluate.friction_score import StaticFrictionTest, static_friction_test
from isaaclab_sysid.fit.problem import FitProblem
from isaaclab_sysid.objective.result import FitResult
from isaaclab_sysid.sim.shooting import is_torque_run

#: the groups that replace Coulomb ``friction`` when the data ask for static friction
STATIC_GROUPS = ("mu_static", "dynamic_ratio")


@dataclass(frozen=True)
class FrictionChoice:
    """What ``--fit_groups auto`` chose and why.

    Attributes:
        coulomb_groups: the first fit's groups; chosen: the groups of the answer (the same, or with
            ``friction`` replaced by :data:`STATIC_GROUPS`).
        static: the answer is the static-friction refit.
        reason: one line, in words.
        z: (N,) the score test's z per joint (None where it did not run); threshold: its threshold;
        joints: joints whose z exceeds it; joint_names: the arm's joints, in the order of ``z``.
        loss_coulomb, loss_static: the fit loss of the Coulomb fit and of the static refit (None: no refit).
        margin: the share by which the refit must lower the loss to be chosen without the test.
    """

    coulomb_groups: list[str]
    chosen: list[str]
    static: bool
    reason: str
    z: list[float] | None = None
    threshold: float | None = None
    joints: list[str] = field(default_factory=list)
    joint_names: list[str] = field(default_factory=list)
    loss_coulomb: float | None = None
    loss_static: float | None = None
    margin: float = 0.1
    predicted_gain: float | None = None

    def line(self) -> str:
        """The log line: the choice, the reason, the loss ratio, the z per joint and the threshold."""
        gain = "" if self.loss_static is None else \
            f"; static refit loss {self.loss_static / self.loss_coulomb:.3f}x the Coulomb fit's (needs <= {1 - self.margin:.2f}x)"
        pg = "" if self.predicted_gain is None else f"; a Gauss-Newton step predicted {100 * self.predicted_gain:.1f} %"
        zs = "" if self.z is None else "; score test z " + ", ".join(
            f"{j} {z:+.1f}" for j, z in zip(self.joint_names, self.z)) + f" (threshold {self.threshold:.1f})"
        return f"--fit_groups auto -> {','.join(self.chosen)}: {self.reason}{gain}{pg}{zs}"

    def to_json(self) -> dict:
        return asdict(self)


def static_groups(groups: Sequence[str]) -> list[str]:
    """``groups`` with Coulomb ``friction`` replaced by the static group, in place (order kept)."""
    out: list[str] = []
    for g in groups:
        out += list(STATIC_GROUPS) if g == "friction" else [g]
    return out


def not_applicable(problem: FitProblem, coulomb: FitResult) -> str | None:
    """Why the static group cannot be tried on ``problem`` (None: it can)."""
    if "friction" not in coulomb.space.group_names:
        return "no Coulomb friction group to replace: kept as given"
    if any(is_torque_run(r) for r in problem.runs):
        return "the static group is not tried on torque runs: kept Coulomb"
    if "mu_static" not in problem.backend.supported_groups:
        return f"the {problem.backend.name} backend cannot represent static friction: kept Coulomb"
    return None


def score_test(problem: FitProblem, coulomb: FitResult) -> StaticFrictionTest | None:
    """The static-friction score test at the Coulomb optimum, on the fit runs."""
    return static_friction_test(problem.backend, coulomb.space, coulomb.best_x, problem.runs, coulomb.loss_weights,
                                coulomb.traj_weights)


def worth_refit(test: StaticFrictionTest | None, margin: float = 0.1) -> bool:
    """Whether the static refit may pay: the score test fires, or the Gauss-Newton step from the same Jacobian
    forecasts at least half of ``margin`` (a refit that cannot reach the margin is not run; True when there is no
    forecast)."""
    if test is None or test.significant or test.predicted_gain is None:
        return True
    return test.predicted_gain >= 0.5 * margin


def decide(coulomb: FitResult, test: StaticFrictionTest | None, loss_static: float | None,
           margin: float = 0.1) -> FrictionChoice:
    """The choice from the evidence: the score test ``test`` and the static refit's fit loss ``loss_static``."""
    groups = list(coulomb.space.group_names)
    lc = float(coulomb.best_score)
    fired = test is not None and test.significant
    gained = loss_static is not None and loss_static <= (1.0 - margin) * lc
    z = dict(z=test.z, threshold=test.threshold, joints=list(test.joints), joint_names=list(test.joint_names),
             predicted_gain=test.predicted_gain) if test is not None else {}
    if fired or gained:
        why = (f"the score test asks for static friction at {', '.join(test.joints)}" if fired else
               "the static refit explains the fit runs better")
        return FrictionChoice(groups, static_groups(groups), True, why, loss_coulomb=lc, loss_static=loss_static,
                              margin=margin, **z)
    why = ("no evidence for static friction: kept Coulomb" if loss_static is not None else
           f"no evidence for static friction (the forecast is under {50 * margin:.0f} %: no refit): kept Coulomb")
    return FrictionChoice(groups, groups, False, why, loss_coulomb=lc, loss_static=loss_static, margin=margin, **z)
