"""The USD asset of a :class:`~isaaclab_sysid.robots.Robot` for Isaac Lab (no Nucleus, no network).

The USD is generated from the same reduced URDF every other builder starts from
(``Robot.urdf_text()``: locked joints fixed, no geometry, no ``<dynamics>``,
link inertial overrides applied) with ``urdf-usd-converter``, and cached under
``<cache>/usd/<sha256 of the URDF text>/``. Joint armature, friction and viscous
damping are never taken from the file: the backend writes them per env.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from pathlib import Path

from isaaclab_sysid.robots.robot import Robot


def cache_root() -> Path:
    """``$ISAACLAB_SYSID_CACHE`` or ``~/.cache/isaaclab_sysid`` (shared with the native MuJoCo loop)."""
    return Path(os.environ.get("ISAACLAB_SYSID_CACHE", Path.home() / ".cache" / "isaaclab_sysid"))


def urdf_hash(robot: Robot) -> str:
    """Content hash of the robot's reduced URDF (the USD cache key)."""
    return hashlib.sha256(robot.urdf_text().encode()).hexdigest()[:20]


def robot_usd(robot: Robot, cache_dir: str | Path | None = None) -> Path:
    """Path of the robot's USD (one ``.usdc`` layer), converting it on first use.

    Args:
        robot: the arm; its current link inertials are part of the cache key.
        cache_dir: cache root (default :func:`cache_root`).

    Raises:
        ImportError: ``urdf-usd-converter`` is not installed (the ``[isaaclab]`` extra).
    """
    root = Path(cache_dir) if cache_dir is not None else cache_root()
    key = urdf_hash(robot)
    out_dir = root / "usd" / key
    usd = out_dir / f"{robot.name}.usdc"
    if usd.is_file():
        return usd
    try:
        from urdf_usd_converter import Converter
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("the Isaac Lab backend needs urdf-usd-converter (pip install -e '.[isaaclab]')") from exc
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    # convert into a private folder, then rename: concurrent processes never see a partial file
    tmp = Path(tempfile.mkdtemp(prefix=f".{key}-", dir=out_dir.parent))
    try:
        src = tmp / f"{robot.name}.urdf"
        src.write_text(robot.urdf_text())
        conv_dir = tmp / "usd"
        result = Converter(layer_structure=False, scene=False, comment=f"isaaclab_sysid {robot.name} {key}").convert(
            str(src), str(conv_dir)
        )
        produced = Path(str(result.path) if hasattr(result, "path") else str(result).strip("@"))
        if not produced.is_file():
            found = sorted(conv_dir.glob("*.usd*"))
            if not found:
                raise RuntimeError(f"urdf-usd-converter wrote no USD for robot '{robot.name}' into {conv_dir}")
            produced = found[0]
        final = tmp / "final"
        final.mkdir()
        shutil.copy2(produced, final / usd.name)
        shutil.copy2(src, final / src.name)
        try:
            os.rename(final, out_dir)
        except OSError:
            if not usd.is_file():  # lost a race only if the winner's file is there
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return usd
