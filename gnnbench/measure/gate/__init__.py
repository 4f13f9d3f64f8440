"""The regression gate (regress): its trees, worker, verdicts, text, counted instructions, run as a library, history
steps and its measured error rates."""
