"""Record simulated-twin runs in the real run format from a true-parameter JSON.

Examples:
    # the bundled demo runs (data/real_runs/)
    python scripts/record_twin.py --demo
    # one run on a generated target
    python scripts/record_twin.py --params configs/twin/franka_demo.json --waveform chirp --duration 8 \\
        --kp-trans 200 --kp-rot 20 --out logs/twin --name my_chirp
    # the same setpoints, gains and q_init as a recorded run
    python scripts/record_twin.py --target-run data/real_runs/twin_chirp_low_fit.csv --out logs/twin
"""

from __future__ import annotations

from isaaclab_sysid.twin.cli import RecordOptions as Args
from isaaclab_sysid.twin.cli import record_main as main
from isaaclab_sysid.utils.cli import parse, run_cli

if __name__ == "__main__":
    run_cli(lambda: main(parse(Args)))
