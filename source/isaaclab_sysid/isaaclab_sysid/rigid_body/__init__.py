"""Rigid-body identification: base parameters, least squares, feasibility.

Pipeline: :mod:`preprocess` -> the regressor (:mod:`isaaclab_sysid.robots.regressor`, a property of the
robot's model) -> :mod:`base_params` ->
:mod:`estimate` -> :mod:`feasibility` (all-pose audit, SDP reconstruction), run end
to end by :func:`pipeline.identify` (choices in :mod:`options`); :mod:`writers`
(``rb_params.json``, inertial override, plots) and :mod:`report` write its files;
:mod:`cli` and :mod:`seed_cli` are the commands behind ``scripts/identify_rigid_body.py``
and ``scripts/seed_fit.py``. :mod:`seeding` gives CMA-ES starting values (delay, friction).
"""
