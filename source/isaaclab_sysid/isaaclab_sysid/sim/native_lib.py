"""Build (once, with gcc) and load the native replay loop ``native/replay.c``.

The C source is compiled at first use against the headers and the
``libmujoco.so`` that ship inside the installed ``mujoco`` wheel, into a cache
directory (``$ISAACLAB_SYSID_CACHE`` or ``~/.cache/isaaclab_sysid``), keyed by
the hash of the source, the mujoco version and the compiler flags. Python calls
it through :mod:`ctypes`, which releases the GIL, so one thread per core runs
rollouts in parallel.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path

import mujoco

SOURCE = Path(__file__).parent / "native" / "replay.c"
ABI_VERSION = 7
CFLAGS = ("-O2", "-fPIC", "-shared", "-std=c99", "-fno-fast-math")

_P = ctypes.c_void_p
_D = ctypes.POINTER(ctypes.c_double)
_I64 = ctypes.POINTER(ctypes.c_int64)


class NativeBuildError(RuntimeError):
    """The native replay library could not be built or loaded."""


class ReplayJob(ctypes.Structure):
    """Mirror of ``SysidReplayJob`` in native/replay.c (same order, same types)."""

    _fields_ = [
        ("warmup", ctypes.c_int32),
        ("n_setpoints", ctypes.c_int32),
        ("sp_dim", ctypes.c_int32),
        ("n_samples", ctypes.c_int32),
        ("sp_tick", _I64),
        ("sp_val", _D),
        ("sample_tick", _I64),
        ("controller", ctypes.c_int32),
        ("site_id", ctypes.c_int32),
        ("coriolis", ctypes.c_int32),
        ("orient_rotvec", ctypes.c_int32),
        ("kp", _D),
        ("kd", _D),
        ("max_pos_err", ctypes.c_double),
        ("max_ori_err", ctypes.c_double),
        ("ns_stiffness", ctypes.c_double),
        ("q_rest", _D),
        ("delay", ctypes.c_int32),
        ("clamp", ctypes.c_int32),
        ("slew", ctypes.c_int32),
        ("substeps", ctypes.c_int32),
        ("tick_s", ctypes.c_double),
        ("tau_max", _D),
        ("slew_per_tick", _D),
        ("disturbance", _D),
        ("armature", _D),
        ("friction", _D),
        ("viscous", _D),
        ("fric_law", ctypes.c_int32),
        ("law_p", _D),
        ("load_gravity", ctypes.c_double),
        ("gravity", ctypes.c_double),
        ("max_qvel", ctypes.c_double),
        ("q_init", _D),
        ("qd_init", _D),
        ("torque_ff", _D),
        ("n_torque", ctypes.c_int64),
        ("servo_p", _D),
        ("out_q", _D),
        ("out_dq", _D),
        ("out_pos", _D),
        ("out_quat", _D),
        ("out_tau", _D),
        ("out_tau_cmd", _D),
        ("diverged_tick", ctypes.c_int64),
    ]


_lock = threading.Lock()
_lib: ctypes.CDLL | None = None


def cache_dir() -> Path:
    root = os.environ.get("ISAACLAB_SYSID_CACHE")
    return Path(root) if root else Path.home() / ".cache" / "isaaclab_sysid"


def _mujoco_paths() -> tuple[Path, Path]:
    pkg = Path(mujoco.__file__).parent
    include = pkg / "include"
    libs = sorted(pkg.glob("libmujoco.so*"))
    if not (include / "mujoco" / "mujoco.h").exists() or not libs:
        raise NativeBuildError(
            f"the installed mujoco package at {pkg} lacks its C headers or libmujoco.so; "
            "reinstall mujoco from its PyPI wheel (pip install --force-reinstall mujoco)"
        )
    return include, libs[0]


def library_path() -> Path:
    """Where the compiled library for this source, mujoco version and flags lives."""
    include, lib = _mujoco_paths()
    h = hashlib.sha256()
    h.update(SOURCE.read_bytes())
    h.update(mujoco.__version__.encode())
    h.update(str(lib).encode())
    h.update(" ".join(CFLAGS).encode())
    return cache_dir() / f"libsysid_replay_{h.hexdigest()[:16]}.so"


def build(force: bool = False) -> Path:
    """Compile native/replay.c with gcc (or ``$CC``) unless the cached library exists."""
    out = library_path()
    if out.exists() and not force:
        return out
    cc = os.environ.get("CC") or shutil.which("gcc") or shutil.which("cc")
    if cc is None:
        raise NativeBuildError(
            "the MuJoCo replay backend compiles a small C controller at first use and needs a C "
            "compiler: install gcc (e.g. apt-get install gcc) or set $CC"
        )
    include, lib = _mujoco_paths()
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(suffix=".so", dir=out.parent)
    os.close(fd)
    cmd = [
        cc, *CFLAGS, "-I", str(include), str(SOURCE), "-o", tmp,
        str(lib), f"-Wl,-rpath,{lib.parent}", "-lm",
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        os.unlink(tmp)
        raise NativeBuildError(f"compiling {SOURCE} failed ({' '.join(cmd)}):\n{proc.stderr}")
    os.replace(tmp, out)
    return out


def load() -> ctypes.CDLL:
    """The loaded native library (built on first use, then cached)."""
    global _lib
    with _lock:
        if _lib is not None:
            return _lib
        path = build()
        try:
            lib = ctypes.CDLL(str(path))
        except OSError as exc:
            raise NativeBuildError(f"loading {path} failed: {exc}; delete it to rebuild") from exc
        if lib.sysid_abi_version() != ABI_VERSION or lib.sysid_job_size() != ctypes.sizeof(ReplayJob):
            raise NativeBuildError(f"{path} does not match native_lib.py (ABI); delete it to rebuild")
        lib.sysid_replay.argtypes = [_P, _P, ctypes.POINTER(ReplayJob)]
        lib.sysid_replay.restype = ctypes.c_int
        _lib = lib
        return lib
