"""A sweep: how it measures (options: ``SweepOptions``), its plan (plan: ``sweep_entries``, ``Entry``), its
interleaved rounds (rounds: ``run_sweep``, ``run_calibration``), the whole sweep in one call (full:
``sweep_and_compare``, ``SweepProgress``), executors (``RoundExecutor``) and the measured best set (best_set: ``choose``)."""
