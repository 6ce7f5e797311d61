"""isaaclab_sysid: make a simulated robot arm move like one particular real arm.

The package reads as the pipeline: ``data`` (run format) -> ``robots`` (one arm
description, MuJoCo / Pinocchio / Isaac Lab models) -> ``excitation`` ->
``rigid_body`` (least squares) -> ``sim`` (replay) -> ``fit`` (CMA-ES) ->
``evaluate`` -> ``export``.
"""

__version__ = "0.1.0"
