"""Where an in-process pair's ratio comes from: its blocks, by the block's order and the construction order.

Every row a sweep timed against its baseline in one process stores the pair (``interleaved`` in its result:
each side's measured steps, the ABBA/BAAB sequence, which trainer was built first). For each such row, this
prints the mean block log ratio ``log(base's two steps / other's two steps)`` over all its rounds, split by the
block's order (ABBA: the base opens and closes; BAAB: the other does) and by which trainer was built first; for
the A/A row (the baseline against itself) every split should read 0, and a split that does not is a bias of the
design the counterbalancing must cancel.

    python scripts/pair_positions.py results/reference/compare-small-cpu [--label "baseline (A/A, one process)"]
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gnnbench.measure.run import PairTiming  # noqa: E402


def _mean_se(xs: list[float]) -> str:
    if not xs:
        return "-"
    se = statistics.stdev(xs) / math.sqrt(len(xs)) if len(xs) > 1 else float("nan")
    return f"{statistics.fmean(xs):+.4f} +- {se:.4f} ({len(xs)})"


def positions(sweep: Path, label: str | None = None) -> dict[str, dict[str, list[float]]]:
    """Per row label: block log ratios split by ``"ABBA"`` / ``"BAAB"`` and ``"built base first"`` / ``"built other
    first"``, and per round (``"rounds"``: each round's mean block log ratio)."""
    out: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for path in sorted(sweep.glob("*.json")):
        try:
            doc = json.loads(path.read_text())
        except ValueError:
            continue
        pair = doc.get("interleaved") if isinstance(doc, dict) else None
        name = doc.get("label") if isinstance(doc, dict) else None
        if not pair or not name or (label is not None and name != label):
            continue
        timing = PairTiming.from_dict(pair.get("timing", pair))
        logs = timing.block_log_ratios()
        row = out[name]
        for k, x in enumerate(logs):
            row[timing.sequence[4 * k : 4 * k + 4]].append(x)
            row[f"built {timing.built_first} first"].append(x)
        row["rounds"].append(statistics.fmean(logs))
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("sweep", type=Path)
    p.add_argument("--label", default=None, help="one row only (default: every paired row)")
    a = p.parse_args(argv)
    rows = positions(a.sweep, a.label)
    if not rows:
        print(f"no in-process pairs in {a.sweep}", file=sys.stderr)
        return 1
    keys = ["ABBA", "BAAB", "built base first", "built other first", "rounds"]
    print("row | " + " | ".join(keys))
    for name, split in sorted(rows.items()):
        print(f"{name} | " + " | ".join(_mean_se(split.get(k, [])) for k in keys))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
