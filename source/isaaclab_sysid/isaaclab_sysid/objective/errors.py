"""The fit's user-facing error: :class:`~isaaclab_sysid.utils.errors.UserError`, defined in utils/ so that the layers
below fit/ (the Ray backend's ``ClusterError``) raise one that ``except FitError`` catches."""

from __future__ import annotations

from isaaclab_sysid.utils.errors import UserError as FitError

__all__ = ["FitError"]
