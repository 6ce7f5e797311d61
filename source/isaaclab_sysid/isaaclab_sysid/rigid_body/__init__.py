"""Rigid-body identification: regressor, base parameters, least squares, feasibility.

Pipeline: :mod:`preprocess` -> :mod:`regressor` -> :mod:`base_params` ->
:mod:`estimate` -> :mod:`feasibility` (all-pose audit, SDP reconstruction) ->
:mod:`io` (``rb_params.json``, inertial override) and :mod:`report`.
:mod:`seeding` gives CMA-ES starting values (delay, friction).
"""
