"""The objective a fit scores, below the search that minimizes it: the parameter space (``param_space``), the
weighted residuals (``residuals``) and loss (``loss``), the finite-difference Jacobian (``jacobian``) and its
accumulated normal equations (``normal_equations``), the replay objective (``replay_objective``: vectors in,
rollouts, losses and residuals out), the fit's result (``result``, ``adequacy_record``), the noise floors it is
judged against (``shooting_floor``, ``torque_noise``) and the fit's errors (``errors``). ``fit/`` (the search:
CMA-ES, the Levenberg-Marquardt refinement, the fast path, checkpoints) builds on it; nothing here imports ``fit/``.
"""
