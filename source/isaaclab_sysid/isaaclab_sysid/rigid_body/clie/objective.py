"""CLIE's objective: the closed-loop input error, the LS base parameters and the URDF prior.

Part of CLIE (:mod:`isaaclab_sysid.rigid_body.clie`, its docstring has the method).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from isaaclab_sysid.data.run import Run
from isaaclab_sysid.rigid_body.base_params import BaseParameters
from isaaclab_sysid.rigid_body.clie.backend import InertialBackend
from isaaclab_sysid.rigid_body.clie.options import ClieOptions
from isaaclab_sysid.rigid_body.estimate import conditioned_cov, whitener
from isaaclab_sysid.rigid_body.clie.starts import GROUP_TO_TERM, JOINT_GROUPS, JointStart, RigidBodyStart
from isaaclab_sysid.rigid_body.feasibility import prior_std
from isaaclab_sysid.rigid_body.log_cholesky import from_log_cholesky, parameter_jacobian, to_log_cholesky
from isaaclab_sysid.rigid_body.options import require, RigidBodyError
from isaaclab_sysid.robots.regressor import Regressor
from isaaclab_sysid.robots import Robot
from isaaclab_sysid.sim.interface import CandidateBatch, ReplayOptions


def inertial_subset(reg: Regressor, base: BaseParameters) -> np.ndarray:
    """Indices of the base parameters whose group holds no viscous, Coulomb or offset term."""
    K = base.K
    cols = [reg.term_slice(t) for t in ("viscous", "coulomb", "offset") if t in reg.joint_terms]
    if not cols:
        return np.arange(base.rank)
    touch = np.zeros(base.rank, dtype=bool)
    for c in cols:
        touch |= np.any(np.abs(K[:, c]) > 1e-12, axis=1)
    return np.flatnonzero(~touch)


class ClieObjective:
    """The whitened residual vector of the refinement and its Jacobian (see the module docstring).

    Coordinates z (D,): the log-Cholesky coordinates of each refined body (10 each, in the order of
    ``bodies``), then armature, friction, viscous (N each) when ``options.joint_terms``.

    Args:
        robot: the nominal arm (the replay model; its link inertials are replaced per candidate).
        runs: the fit runs (closed-loop: joint_pd or task_impedance).
        start: the LS/SDP stage; joints: the joint fit's values.
        options: the refinement's choices.
    """

    def __init__(self, robot: Robot, runs: Sequence[Run], start: RigidBodyStart, joints: JointStart,
                 options: ClieOptions) -> None:
        self.options = options.validate()
        self.reg, self.start, self.joints = start.regressor, start, joints
        reg, n = start.regressor, start.regressor.n_dof
        self.n_dof = n
        self.runs = list(runs)
        require(len(self.runs) > 0, "CLIE needs at least one fit run (--runs)")
        for r in self.runs:
            require(r.meta.controller in ("joint_pd", "task_impedance"),
                    f"run {r.name}: controller {r.meta.controller!r}; CLIE replays the closed loop "
                    "(joint_pd or task_impedance runs)")
            require(r.n_dof == n, f"run {r.name}: {r.n_dof} joints, robot {robot.name} has {n}")
        names = list(reg.link_names)
        unknown = [b for b in options.bodies if b not in names]
        if unknown:
            raise RigidBodyError(f"--bodies: {unknown[0]!r} is not a moving body of {robot.name} ({', '.join(names)})")
        self.body_idx = [names.index(b) for b in options.bodies] if options.bodies else list(range(n))
        self.body_names = tuple(names[i] for i in self.body_idx)
        for g in JOINT_GROUPS:
            v = np.asarray(getattr(joints, g), dtype=float)
            require(v.shape == (n,) and np.all(np.isfinite(v)) and np.all(v >= 0),
                    f"{joints.source}: {g} must be {n} finite values >= 0; got {v.tolist()}")
        require(int(joints.delay) >= 0, f"--delay must be >= 0 ticks; got {joints.delay}")
        links = start.pi_sdp[: 10 * n].reshape(n, 10)
        theta0 = []
        for i in self.body_idx:
            try:
                theta0.append(to_log_cholesky(links[i]))
            except ValueError as exc:
                raise RigidBodyError(f"{start.source}: the SDP set's body {names[i]}: {exc}") from None
        jv = joints.values()
        z_joint = np.concatenate([jv[g] for g in JOINT_GROUPS]) if options.joint_terms else np.zeros(0)
        self.z0 = np.concatenate([np.ravel(theta0), z_joint])
        self.n_body_coords = 10 * len(self.body_idx)
        self.lower = np.concatenate([np.full(self.n_body_coords, -np.inf), np.zeros(z_joint.size)])
        self.upper = np.full(self.z0.size, np.inf)
        self.backend = InertialBackend(robot, ReplayOptions(warmup_ticks=options.warmup_ticks,
                                                            torque_clamp=options.torque_clamp,
                                                            slew_limit=options.slew_limit),
                                       n_threads=options.n_threads)
        # the input-error samples of each run: every stride-th row, clamp-saturated rows left out
        tau_max = robot.tau_max
        self.rows, self.tau_log = [], []
        for r in self.runs:
            rows = np.arange(0, r.q.shape[0], options.stride)
            if options.torque_clamp:
                sat = np.any(np.abs(r.tau[rows]) >= options.clamp_margin * tau_max[None], axis=1)
                rows = rows[~sat]
            require(rows.size > 0, f"run {r.name}: no input-error sample left (every one at the torque clamp)")
            self.rows.append(rows)
            self.tau_log.append(np.asarray(r.tau, dtype=float)[rows])
        # the LS term on the inertial base parameters; the URDF prior on the refined bodies
        self.subset = inertial_subset(reg, start.base)
        K = start.base.K
        self.K_I = K[self.subset]
        self.theta_I = start.theta[self.subset]
        ix = np.ix_(self.subset, self.subset)
        self.cov_I = conditioned_cov(start.cov[ix], None if start.cov_white is None else start.cov_white[ix])
        self.W_I = whitener(self.cov_I)
        self.prior = reg.prior()
        s = prior_std(reg, self.prior, options.prior_rel_std)
        self.prior_cols = np.concatenate([np.arange(10 * i, 10 * i + 10) for i in self.body_idx])
        self.prior_inv_s = 1.0 / s[self.prior_cols]
        self.sigma = np.ones(n)
        self.ls_scale = 1.0  # LS variance factor (refinement.ls_variance_factor): weight ls_weight / ls_scale
        self._cache: tuple[bytes, np.ndarray, bool] | None = None
        self.n_rollouts = 0

    # ------------------------------------------------------------ decoding
    def links(self, z: np.ndarray) -> np.ndarray:
        """(N, 10) every moving body's parameters at z (refined from z, the others the SDP's)."""
        out = self.start.pi_sdp[: 10 * self.n_dof].reshape(self.n_dof, 10).copy()
        for k, i in enumerate(self.body_idx):
            out[i] = from_log_cholesky(z[10 * k: 10 * k + 10])
        return out

    def joint_values(self, z: np.ndarray) -> dict[str, np.ndarray]:
        """Armature, friction, viscous (N,) each at z (the joint fit's when they are not refined)."""
        if not self.options.joint_terms:
            return self.joints.values()
        zj = z[self.n_body_coords:]
        n = self.n_dof
        return {g: zj[k * n: (k + 1) * n].copy() for k, g in enumerate(JOINT_GROUPS)}

    def standard(self, z: np.ndarray) -> np.ndarray:
        """(P,) the regressor's standard vector at z: links, the joint terms the regressor has; the rest SDP's."""
        pi = self.start.pi_sdp.copy()
        pi[: 10 * self.n_dof] = self.links(z).ravel()
        for g, v in self.joint_values(z).items():
            if GROUP_TO_TERM[g] in self.reg.joint_terms:
                pi[self.reg.term_slice(GROUP_TO_TERM[g])] = v
        return pi

    def dstandard(self, z: np.ndarray) -> np.ndarray:
        """(P, D) d standard / d z."""
        G = np.zeros((self.reg.n_params, z.size))
        for k, i in enumerate(self.body_idx):
            G[10 * i: 10 * i + 10, 10 * k: 10 * k + 10] = parameter_jacobian(z[10 * k: 10 * k + 10])
        if self.options.joint_terms:
            n = self.n_dof
            for k, g in enumerate(JOINT_GROUPS):
                if GROUP_TO_TERM[g] in self.reg.joint_terms:
                    cols = self.reg.term_slice(GROUP_TO_TERM[g])
                    G[cols, self.n_body_coords + k * n + np.arange(n)] = np.eye(n)
        return G

    # -------------------------------------------------------------- replay
    def _batch(self, Z: np.ndarray) -> tuple[CandidateBatch, np.ndarray]:
        vals = [self.joint_values(z) for z in Z]
        batch = CandidateBatch(**{g: np.array([v[g] for v in vals]) for g in JOINT_GROUPS},
                               delay=np.full(len(Z), int(self.joints.delay)))
        return batch, np.array([self.links(z) for z in Z])

    def input_errors(self, Z: np.ndarray, runs: Sequence[Run] | None = None,
                     rows: Sequence[np.ndarray] | None = None) -> tuple[list[np.ndarray], np.ndarray]:
        """Per run (K, T', N) simulated minus logged command [N m] of K candidates (K, D), and divergence (K,).

        ``runs``/``rows`` default to the fit runs and their input-error samples.
        """
        Z = np.atleast_2d(Z)
        runs = self.runs if runs is None else list(runs)
        rows = self.rows if rows is None and runs is self.runs else rows
        batch, links = self._batch(Z)
        ros = self.backend.rollout_links(batch, links, runs, with_command=True)
        self.n_rollouts += len(Z) * len(runs)
        out, div = [], np.zeros(len(Z), dtype=bool)
        for k, (ro, r) in enumerate(zip(ros, runs)):
            sel = np.arange(r.q.shape[0]) if rows is None else rows[k]
            e = ro.extra["tau_cmd"][:, sel] - np.asarray(r.tau, dtype=float)[sel][None]
            div |= np.asarray(ro.diverged, dtype=bool) | ~np.all(np.isfinite(e), axis=(1, 2))
            out.append(e)
        return out, div

    def _replay_block(self, errors: list[np.ndarray]) -> np.ndarray:
        """(K, M) whitened input errors, runs side by side, rows sample-major (t, joint)."""
        return np.concatenate([(e / self.sigma[None, None]).reshape(e.shape[0], -1) for e in errors], axis=1)

    def hac_lags(self) -> int:
        """The Newey-West window [input-error samples] of ``hac_lag_s``."""
        dt = self.options.stride / min(float(r.meta.log_rate_hz) for r in self.runs)
        return max(1, int(round(self.options.hac_lag_s / dt)))

    def set_sigma(self, z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Set the per-joint weight sigma (N,) [N m] at z: the input-error RMS times sqrt(kappa_j), kappa_j the
        long-run variance ratio 1 + 2 sum_l (1 - l/(L+1)) rho_j(l) of its autocorrelation (Bartlett, L = the
        HAC window; at least 1), so that the correlated samples count as many as they are worth.
        Returns (sigma, kappa)."""
        errors, div = self.input_errors(z[None])
        if div[0]:
            raise RigidBodyError("the replay diverges at the start point: check the joint fit's values and --delay")
        L = self.hac_lags()
        e2 = np.zeros(self.n_dof)
        acf = np.zeros((L + 1, self.n_dof))
        for x in errors:
            x = x[0]
            e2 += np.sum(x ** 2, axis=0)
            for lag in range(0, min(L, x.shape[0] - 1) + 1):
                acf[lag] += np.sum(x[lag:] * x[: x.shape[0] - lag], axis=0)
        rho = acf / np.maximum(acf[0], 1e-300)
        w = 1.0 - np.arange(L + 1) / (L + 1.0)
        kappa = np.maximum(1.0 + 2.0 * np.sum(w[1:, None] * rho[1:], axis=0), 1.0)
        count = sum(x.shape[1] for x in errors)
        rms = np.maximum(np.sqrt(e2 / count), 1e-9)
        self.sigma = rms * np.sqrt(kappa)
        self._cache = None
        return self.sigma.copy(), kappa

    # ------------------------------------------------------ residual, jacobian
    def _prior_terms(self, z: np.ndarray, pi: np.ndarray) -> np.ndarray:
        o = self.options
        ls = np.sqrt(o.ls_weight / self.ls_scale) * (self.W_I @ (self.K_I @ pi - self.theta_I))
        pr = np.sqrt(o.prior_weight) * (pi[self.prior_cols] - self.prior[self.prior_cols]) * self.prior_inv_s
        return np.concatenate([ls, pr])

    def _prior_jacobian(self, z: np.ndarray) -> np.ndarray:
        o = self.options
        G = self.dstandard(z)
        ls = np.sqrt(o.ls_weight / self.ls_scale) * (self.W_I @ self.K_I @ G)
        pr = np.sqrt(o.prior_weight) * (self.prior_inv_s[:, None] * G[self.prior_cols])
        return np.vstack([ls, pr])

    def n_replay(self) -> int:
        """Number of replay residuals M."""
        return sum(int(r.size) * self.n_dof for r in self.rows)

    def residuals(self, z: np.ndarray) -> np.ndarray:
        """(M + L,) the whitened residual vector at z (inf where the replay diverges or z overflows: a trial
        step the trust region then rejects)."""
        z = np.asarray(z, dtype=float)
        with np.errstate(over="ignore", invalid="ignore"):
            pi = self.standard(z)
            if not np.all(np.isfinite(pi)):
                return np.full(self.n_replay() + self.subset.size + self.prior_cols.size, np.inf)
            errors, div = self.input_errors(z[None])
            R = self._replay_block(errors)[0]
            self._cache = (z.tobytes(), R, bool(div[0]))
            if div[0]:
                R = np.full(R.shape, np.inf)
            return np.concatenate([R, self._prior_terms(z, pi)])

    def steps(self, z: np.ndarray) -> np.ndarray:
        """(D,) forward-difference steps: ``fd_step`` for log-Cholesky coordinates, relative for joint terms."""
        h = np.full(z.size, self.options.fd_step)
        zj = z[self.n_body_coords:]
        h[self.n_body_coords:] = self.options.fd_step * np.maximum(np.abs(zj), 1e-2) * 10.0
        return h

    def jacobian(self, z: np.ndarray) -> np.ndarray:
        """(M + L, D) Jacobian at z: forward differences of the replay in one batched rollout
        (a column whose neighbour diverged is 0), the LS and prior terms analytic."""
        z = np.asarray(z, dtype=float)
        h = self.steps(z)
        Z = z[None] + np.diag(h)
        cached = self._cache is not None and self._cache[0] == z.tobytes()
        if not cached:
            Z = np.vstack([z[None], Z])
        errors, div = self.input_errors(Z)
        R = self._replay_block(errors)
        if cached:
            r0, d0 = self._cache[1], self._cache[2]
        else:
            r0, d0, R, div = R[0], bool(div[0]), R[1:], div[1:]
        J = ((R - r0[None]) / h[:, None]).T
        J[:, div] = 0.0
        if d0:
            J[:] = 0.0
        return np.vstack([J, self._prior_jacobian(z)])

    def close(self) -> None:
        """Stop the replay threads."""
        self.backend.close()
