"""The Ray backend's errors: user-facing, one line, exit status :data:`CLUSTER_EXIT_CODE` (docs/cluster.md)."""

from __future__ import annotations

from isaaclab_sysid.utils.errors import UserError

#: exit status of a fit stopped by the cluster
CLUSTER_EXIT_CODE = 4


class ClusterError(UserError):
    """The cluster cannot evaluate a batch: workers fail to start or differ from this machine, a slice keeps failing."""

    def __init__(self, message: str) -> None:
        super().__init__(message, code=CLUSTER_EXIT_CODE)


class ClusterLostError(ClusterError):
    """No worker is left and none can be started: the fit stops; its newest checkpoint resumes it."""

