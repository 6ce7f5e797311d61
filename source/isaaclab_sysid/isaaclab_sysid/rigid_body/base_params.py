"""Base parameters: numerical rank and grouping from a column-pivoted QR.

Stack the regressor over random samples, ``W P = Q [R1 R2]`` (columns normalized) with R1 (b x b)
upper triangular; the first b pivoted columns are independent and
``W pi = W_b pi_b`` with ``pi_b = pi_1 + beta pi_2``, beta solving ``W_1 beta = W_2`` (SVD least squares, exact in the column space)
(Gautier & Khalil 1990, numerically).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.linalg

from isaaclab_sysid.robots.regressor import Regressor


@dataclass(frozen=True)
class BaseParameters:
    """The base-parameter map of a regressor.

    Attributes:
        param_names: (P,) standard parameter names.
        independent: (b,) indices of the standard parameters kept as base columns.
        dependent: (P - b,) indices of the others.
        beta: (b, P - b) pi_b = pi[independent] + beta @ pi[dependent].
        rank: b.
        tol: relative threshold on |R_kk| / |R_00| used to decide the rank.
        n_samples: random samples stacked to find the rank.
        seed: seed of those samples.
    """

    param_names: tuple[str, ...]
    independent: np.ndarray
    dependent: np.ndarray
    beta: np.ndarray
    rank: int
    tol: float
    n_samples: int
    seed: int

    @property
    def n_base(self) -> int:
        return self.rank

    @property
    def K(self) -> np.ndarray:
        """(b, P) linear map pi -> pi_b."""
        K = np.zeros((self.rank, len(self.param_names)))
        K[:, self.independent] = np.eye(self.rank)
        K[:, self.dependent] = self.beta
        return K

    def to_base(self, pi: np.ndarray) -> np.ndarray:
        """(b,) base parameters of a standard vector ``pi`` (P,)."""
        return self.K @ np.asarray(pi, dtype=float)

    def to_standard(self, pi_b: np.ndarray) -> np.ndarray:
        """(P,) a standard vector with these base parameters and zero dependents."""
        pi = np.zeros(len(self.param_names))
        pi[self.independent] = pi_b
        return pi

    def columns(self, W: np.ndarray) -> np.ndarray:
        """(M, b) base regressor from a full regressor (M, P)."""
        return W[:, self.independent]

    def names(self) -> list[str]:
        """A readable name per base parameter: its leading standard parameter (+ more if grouped)."""
        out = []
        for i, k in enumerate(self.independent):
            extra = int(np.count_nonzero(np.abs(self.beta[i]) > 1e-9))
            out.append(self.param_names[k] + (f" (+{extra})" if extra else ""))
        return out

    def groups(self, threshold: float = 1e-9) -> list[dict]:
        """For each base parameter, the standard parameters it groups with their coefficients."""
        out = []
        for i, k in enumerate(self.independent):
            terms = [[self.param_names[k], 1.0]]
            for jj, d in enumerate(self.dependent):
                c = float(self.beta[i, jj])
                if abs(c) > threshold:
                    terms.append([self.param_names[d], round(c, 12)])
            out.append({"base": i, "name": self.names()[i], "terms": terms})
        return out

    def unidentifiable(self, threshold: float = 1e-9) -> list[str]:
        """Standard parameters that enter no base parameter (no effect on the output)."""
        used = np.any(np.abs(self.beta) > threshold, axis=0)
        return [self.param_names[d] for jj, d in enumerate(self.dependent) if not used[jj]]


def random_states(regressor: Regressor, n: int, rng: np.random.Generator) -> tuple[np.ndarray, ...]:
    """(n, N) random q within limits (+-pi where unlimited), qd ~ N(0, 1), qdd ~ N(0, 4)."""
    lo = np.maximum(regressor.robot.q_lower, -np.pi)
    hi = np.minimum(regressor.robot.q_upper, np.pi)
    N = regressor.n_dof
    q = rng.uniform(lo, hi, size=(n, N))
    qd = rng.normal(0.0, 1.0, size=(n, N))
    qdd = rng.normal(0.0, 2.0, size=(n, N))
    return q, qd, qdd


def compute_base_parameters(
    regressor: Regressor, n_samples: int = 300, seed: int = 0, tol: float = 1e-8
) -> BaseParameters:
    """Base parameters of ``regressor`` from a pivoted QR over ``n_samples`` random states."""
    rng = np.random.default_rng(seed)
    W = regressor.matrix(*random_states(regressor, n_samples, rng))
    # scale-free rank: normalize columns. Columns at rounding level (a Pinocchio column that
    # is zero in exact arithmetic, e.g. the Panda's link-2 m c_z, comes out ~1e-16) are set
    # to zero first: normalizing them would turn rounding noise into a spurious independent column.
    norms = np.linalg.norm(W, axis=0)
    null = norms <= 1e-10 * norms.max()
    W = W.copy()
    W[:, null] = 0.0
    Wn = W / np.where(null, 1.0, norms)
    _, R, piv = scipy.linalg.qr(Wn, mode="economic", pivoting=True)
    d = np.abs(np.diag(R))
    rank = int(np.sum(d > tol * d[0]))
    ind, dep = piv[:rank], piv[rank:]
    # beta on the unnormalized columns: W_dep = W_ind @ beta (exact in the column space)
    beta, *_ = np.linalg.lstsq(W[:, ind], W[:, dep], rcond=None)
    beta[np.abs(beta) < 1e-10] = 0.0
    order = np.argsort(ind, kind="stable")
    return BaseParameters(
        param_names=regressor.param_names,
        independent=ind[order],
        dependent=np.sort(dep),
        beta=beta[order][:, np.argsort(dep, kind="stable")],
        rank=rank,
        tol=tol,
        n_samples=n_samples,
        seed=seed,
    )
