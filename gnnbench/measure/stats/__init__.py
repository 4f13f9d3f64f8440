"""The statistics: paired intervals and the noise floor (intervals), the stopping rule (sequential), and their
simulations."""
