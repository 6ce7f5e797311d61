"""Several test benches in one fit (issue 42): one backend per bench robot, each run replayed on its own bench.

A servo identified on a test bench is usually recorded on more than one bench (another mass, another arm
length) so that inertia, gravity and the motor's torque separate. The benches are different robots (each run's
``meta.robot``) carrying the same servo: the same joint names, the same servo family per joint. The fitted
parameters are the servo's, shared by every bench; :class:`BenchSetBackend` routes each run to the backend built
for its bench and returns the rollouts in the runs' order, so every caller (the fit, the evaluation, the
intervals) sees one backend.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from isaaclab_sysid.data.run import Run
from isaaclab_sysid.sim.interface import CandidateBatch, ReplayBackend, RunRollout, check_supported


class BenchSetBackend(ReplayBackend):
    """A backend per bench robot, keyed by the robot reference runs name (``meta.robot``).

    Args:
        backends: robot reference -> the backend built for that robot (every one with the same options).

    Raises:
        ValueError: no backend, or backends of different physics or options.
    """

    def __init__(self, backends: Mapping[str, ReplayBackend]) -> None:
        if not backends:
            raise ValueError("BenchSetBackend needs at least one bench backend")
        self.backends = dict(backends)
        first = next(iter(self.backends.values()))
        if any(b.name != first.name or b.options != first.options for b in self.backends.values()):
            raise ValueError("the benches' backends must be of one physics backend with the same replay options")
        self.name = first.name
        self.options = first.options
        self.supported_groups = frozenset.intersection(*(b.supported_groups for b in self.backends.values()))

    def backend_of(self, run: Run) -> ReplayBackend:
        """The backend of the run's bench.

        Raises:
            ValueError: the run names a robot no bench backend was built for.
        """
        try:
            return self.backends[run.meta.robot]
        except KeyError:
            raise ValueError(f"run '{run.name}' was recorded on '{run.meta.robot}', which is not one of the benches "
                             f"({', '.join(self.backends)})") from None

    def rollout(self, batch: CandidateBatch, runs: Sequence[Run]) -> list[RunRollout]:
        """Replay each run on its bench (one call per bench); rollouts in the runs' order."""
        check_supported(batch, self.supported_groups, self.name)
        out: list[RunRollout | None] = [None] * len(runs)
        groups: dict[str, list[int]] = {}
        for i, r in enumerate(runs):
            self.backend_of(r)
            groups.setdefault(r.meta.robot, []).append(i)
        for robot, idx in groups.items():
            for i, ro in zip(idx, self.backends[robot].rollout(batch, [runs[i] for i in idx])):
                out[i] = ro
        return out  # type: ignore[return-value]

    def close(self) -> None:
        """Close every bench's backend."""
        for b in self.backends.values():
            b.close()
