"""A sweep: its plan, its interleaved rounds, the whole sweep in one call (full), executors and the measured best set."""
