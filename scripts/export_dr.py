#!/usr/bin/env python
"""Export a fit, its intervals and randomization ranges to Isaac Lab configs.

Reads a fit folder (sysid_best_params.json + config.json, written by
scripts/sysid_franka_osc.py), computes the intervals once (one batched rollout;
cached in <fit_dir>/intervals.json) and writes to --out:

  sysid_dr.json / sysid_dr.yaml   values, intervals (every method), ranges, policy, warnings
  sysid_dr_isaaclab.py            DelayedPDActuatorCfg overrides + EventTermCfg terms (per joint one term drawing
                                  armature, friction and viscous friction each from its own range; the actuator
                                  delay; randomize_rigid_body_mass per link)
  <robot>_sysid.usda, <robot>.usdc  with --usd: the arm's USD with the fitted joint physics as the variant
                                  Physics = "sysid" (UsdFileCfg(variants={"Physics": "sysid"}))
  OUT.json                        with --servo_model OUT.json: the servo part of a servo fit (robots/servo_model.py:
                                  kt, R, armature, friction law, viscous, delay, each with its interval; the file an
                                  arm config names per joint, docs/servo_arms.md "The servo as a part")
  --no_isaaclab                   skips sysid_dr.* and the Isaac Lab module (a servo fit with the load-dependent law:
                                  its part and MJCF are exact, its Isaac Lab module is refused)
  <robot>_sysid.xml               with --mjcf: the fitted model as MJCF (MuJoCo), written only after it replays the
                                  fit's held-out runs within 1e-6 rad of the fit's own replay (the figure is printed)

Example:
    python scripts/export_dr.py --fit_dir logs/sysid/2026-01-01_12-00-00 \\
        --rb_params logs/rigid_body/rb_params.json --out configs/exported/franka --usd
    python scripts/check_export.py --fit_dir logs/sysid/2026-01-01_12-00-00   # apply it in Isaac Lab, read back
See docs/intervals_and_export.md.
"""

from __future__ import annotations

from isaaclab_sysid.export.export_cli import ExportOptions as Args
from isaaclab_sysid.export.export_cli import export_main as main
from isaaclab_sysid.utils.cli import parse, run_cli

if __name__ == "__main__":
    run_cli(lambda: main(parse(Args, None, renames={"--out_dir": "--out"})))
