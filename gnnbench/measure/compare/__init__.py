"""A sweep's comparison: the rows and their verdicts (comparison, rows, family), the target's calibration, derived time
to accuracy, time to accuracy and its factors, pairing and floors, accuracy, a sweep's identity and the multi-rank
figures."""
