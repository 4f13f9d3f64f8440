"""One sweep, one identity: results are compared only when they share the code, the machine, the environment and
the base configuration (every config field but those an entry or a round sets); :func:`identity_problem` names
what differs otherwise, and :func:`gnnbench.measure.compare.comparison.compare` refuses them with
:class:`MixedSweepError`.
"""

from __future__ import annotations

import json
from collections import Counter

from gnnbench.measure.compare.accuracy import time_to_accuracy_run
from gnnbench.measure.compare.calibration import CALIBRATION
from gnnbench.measure.run import RunResult

__all__ = ["IDENTITY_KEYS", "MixedSweepError", "identity_problem"]

# What one sweep shares: the environment (threads excepted: multi-rank entries run 1-thread ranks) and the
# base configuration (every config field but those an entry or a round sets).
IDENTITY_KEYS = ("code_fingerprint", "hardware_class", "device_name", "torch", "torch_geometric", "python")
PER_ENTRY_FIELDS = ("flags", "seed", "sync_phases", "nproc", "num_layers")
SHORT_RUN_FIELDS = ("epochs", "max_steps", "min_steps")  # what a derived entry's short run sets apart
TIME_TO_ACCURACY_FIELDS = ("stop_at", "min_steps")  # what a time-to-accuracy round sets apart


class MixedSweepError(ValueError):
    """Results that are not one sweep (different code, machine, environment or base configuration)."""


def identity_problem(results: list[RunResult]) -> str | None:
    """What makes ``results`` more than one sweep, naming each field that differs and its values (with how
    many results carry each), or ``None`` when they share one identity."""
    problems = []
    for key in IDENTITY_KEYS:
        seen = Counter(str(r.environment.get(key)) for r in results if r.environment)
        if len(seen) > 1:
            problems.append(f"{key} differs ({', '.join(f'{v} in {n}' for v, n in seen.most_common())})")
    # calibration runs train the base configuration before its cadence and budget were fixed
    bases = [
        {
            k: v
            for k, v in r.config.items()
            if k not in PER_ENTRY_FIELDS
            and not (r.derived and k in SHORT_RUN_FIELDS)
            and not (k in TIME_TO_ACCURACY_FIELDS and (r.derived or time_to_accuracy_run(r)))
        }
        for r in results
        if r.config and r.label != CALIBRATION
    ]
    fields = sorted(
        {k for b in bases for k in b if len({json.dumps(x[k], sort_keys=True) for x in bases if k in x}) > 1}
    )
    for k in fields:
        seen = Counter(json.dumps(b[k], sort_keys=True) for b in bases if k in b)
        problems.append(
            f"the base configuration's {k} differs ({', '.join(f'{v} in {n}' for v, n in seen.most_common(3))})"
        )
    return "; ".join(problems) or None
