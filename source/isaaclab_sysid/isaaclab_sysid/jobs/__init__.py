"""The jobs layer: whole jobs built from the stages below, each stage sequence written once.

* :mod:`~isaaclab_sysid.jobs.fit_args`: the fit's flags (``FitArgs``) and the step from flags to the problem
  record (``FitArgs.problem``, ``resolve_problem``);
* :mod:`~isaaclab_sysid.jobs.fit_job`: the fit job behind ``scripts/sysid_franka_osc.py`` (problem, search,
  result, evaluation, adequacy, report) and its ``--eval_params`` variant;
* :mod:`~isaaclab_sysid.jobs.assessment`: the verdict pair every job runs after a fit (the residual
  diagnostics, then the score test for an omitted static friction);
* :mod:`~isaaclab_sysid.jobs.twin_study`: the recovery matrix on twins (``benchmarks/fit_matrix.py``).

The studies and benchmarks (``twin/``'s callers, ``benchmarking/``, ``benchmarks/``) call these jobs instead of
re-sequencing the stages. docs/architecture.md draws the layers.
"""
