"""Installation script for the isaaclab_sysid extension."""

import tomllib
from pathlib import Path

from setuptools import find_namespace_packages, setup

ROOT = Path(__file__).resolve().parent
EXT = tomllib.loads((ROOT / "extension.toml").read_text())

INSTALL_REQUIRES = [
    "numpy>=1.26",
    "scipy>=1.11",
    "pandas>=2.0",
    "h5py>=3.9",
    "cma>=4.0",
    "tyro>=0.9",
    # isaaclab==3.0.0 pins mujoco~=3.12.0 (through newton): share one environment.
    "mujoco~=3.12.0",
    "pin>=3.0",
    "example-robot-data>=4.1",
    "matplotlib>=3.8",
    "rich>=13",
    "cvxpy>=1.5",
    "pyyaml>=6",
    # report.html: zoomable real-vs-sim plots, plotly.js inlined (self-contained page)
    "plotly>=5",
]

EXTRAS = {
    "isaaclab": ["isaaclab==3.0.0", "urdf-usd-converter"],
    # Isaac Sim (PhysX backend) only installs on GPU workstations; see docs/backends.md.
    "isaacsim": ["isaacsim[all,extscache]"],
    "wandb": ["wandb"],
    # importers (scripts/import_runs.py): ROS 2 bags in sqlite3 or MCAP storage (rosbags: pure Python,
    # no ROS install) and LeRobot / Parquet tables (pyarrow). docs/data_format.md, "Importers".
    "import": ["rosbags>=0.10", "pyarrow>=14"],
    # --cluster ray (docs/cluster.md): plain ray, no dashboard; every machine of a cluster needs the same version.
    "ray": ["ray>=2.52"],
    "dev": ["pytest>=8", "pytest-xdist>=3"],
    # benchmarks/vs_peers.py (docs/benchmarks.md): mujoco.sysid, shipped in the mujoco wheel, imports only with its
    # own extra (colorama, tabulate, jinja2, imageio[ffmpeg], ...); same mujoco pin as above.
    # benchmarks/vs_bam.py (issue 42): BAM (Better Actuator Models, Apache-2.0) for its published servo parameters,
    # its simulator and its fit; `python -m bam.fit` needs optuna + cmaes (its CMA-ES sampler) and imports wandb at
    # module level (used only under its --wandb flag), so wandb comes too.
    "peers": [
        "mujoco[sysid]~=3.12.0",
        "better-actuator-models==1.0.2",
        "optuna>=4",
        "cmaes>=0.12",
        "wandb",
    ],
}

setup(
    name="isaaclab_sysid",
    version=EXT["package"]["version"],
    description=EXT["package"]["description"],
    author=EXT["package"]["author"],
    license=EXT["package"]["license"],
    python_requires=">=3.12,<3.13",
    package_dir={"": "source/isaaclab_sysid"},
    # Namespace discovery: it also finds the data folder sim/native (no __init__.py:
    # the C replay loop, compiled with gcc at first use by sim/native_lib.py), so a
    # regular (non-editable) install ships it too. Listing it as a package is what
    # keeps setuptools from warning that an importable folder is missing from `packages`.
    packages=find_namespace_packages(
        "source/isaaclab_sysid",
        include=["isaaclab_sysid", "isaaclab_sysid.*"],
        exclude=["*.__pycache__", "*.__pycache__.*"],
    ),
    package_data={"isaaclab_sysid.sim.native": ["*.c", "*.h"]},
    include_package_data=True,
    install_requires=INSTALL_REQUIRES,
    extras_require=EXTRAS,
    zip_safe=False,
)
