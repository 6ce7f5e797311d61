"""Populations across machines on Ray (docs/cluster.md): :class:`RayBackend`, a replay backend like any other.

``recipe.py``: what a worker builds its backend from (:class:`BackendRecipe`) and the installation that must match
(:func:`environment_fingerprint`); ``workers.py``: the Ray actor and this process's pool of them; ``backend.py``: the
driver side (:class:`RayBackend`: slices, re-runs, events); ``errors.py``: :class:`ClusterError`. Importing this
package does not import Ray.
"""

from isaaclab_sysid.sim.ray.backend import MAX_ATTEMPTS, ClusterEvent, ClusterStats, RayBackend, concat_rollouts, slice_edges
from isaaclab_sysid.sim.ray.errors import CLUSTER_EXIT_CODE, ClusterError, ClusterLostError
from isaaclab_sysid.sim.ray.recipe import BackendRecipe, environment_fingerprint, import_ray
from isaaclab_sysid.sim.ray.workers import WorkerInfo, WorkerPool, connect, current_pool, runs_digest, shutdown

__all__ = [
    "CLUSTER_EXIT_CODE",
    "MAX_ATTEMPTS",
    "BackendRecipe",
    "ClusterError",
    "ClusterEvent",
    "ClusterLostError",
    "ClusterStats",
    "RayBackend",
    "WorkerInfo",
    "WorkerPool",
    "concat_rollouts",
    "connect",
    "current_pool",
    "environment_fingerprint",
    "import_ray",
    "runs_digest",
    "shutdown",
    "slice_edges",
]
