"""Collect the report's inputs: gnnbench run results, pytest-benchmark JSON and asv results."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

__all__ = ["ReportInputs", "load_inputs"]


@dataclass
class ReportInputs:
    """Everything the report is built from.

    Args:
        runs: gnnbench run results (``schema_version`` JSON), each with a
            ``label`` (configuration name) when it came from a sweep.
        pytest_benchmarks: pytest-benchmark ``--benchmark-json`` documents.
        asv: asv results: ``{"benchmarks": {...}, "results": [per-commit docs]}``.
        sources: The files read.
    """

    runs: list[dict] = field(default_factory=list)
    pytest_benchmarks: list[dict] = field(default_factory=list)
    asv: dict | None = None
    sources: list[str] = field(default_factory=list)


def _label_from_name(path: Path) -> str:
    # Sweep files are named <label>-seed<s>-<key>.json.
    name = path.stem
    return name.split("-seed")[0] if "-seed" in name else name


def _read_json(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def load_inputs(runs: Iterable[str | Path] = (), pytest_benchmark: Iterable[str | Path] = (),
                asv_results: str | Path | None = None) -> ReportInputs:
    """Read result files and directories (directories are searched recursively).

    Files that are not valid JSON of the expected kind are skipped (a sweep may
    be running or may have been interrupted); the report says what it read.
    """
    out = ReportInputs()
    for root in runs:
        root = Path(root)
        files = sorted(root.rglob("*.json")) if root.is_dir() else [root]
        for f in files:
            if f.name.startswith(".") or f.name.endswith(".failed.json"):
                continue
            data = _read_json(f)
            if not data or "schema_version" not in data or "config" not in data:
                continue
            data.setdefault("label", _label_from_name(f))
            data["_group"] = str(f.parent)  # one sweep per directory
            out.runs.append(data)
            out.sources.append(str(f))
    for f in pytest_benchmark:
        data = _read_json(Path(f))
        if data and "benchmarks" in data:
            out.pytest_benchmarks.append(data)
            out.sources.append(str(f))
    if asv_results is not None:
        out.asv = _load_asv(Path(asv_results))
    return out


def _load_asv(root: Path) -> dict | None:
    """asv's results: ``benchmarks.json`` plus one JSON per (machine, commit, environment)."""
    if not root.is_dir():
        return None
    benchmarks = _read_json(root / "benchmarks.json") or {}
    results = []
    for f in sorted(root.glob("*/*.json")):
        if f.name == "machine.json":
            continue
        data = _read_json(f)
        if data and "commit_hash" in data and "results" in data:
            results.append(data)
    if not results:
        return None
    return {"benchmarks": benchmarks, "results": results}


def asv_series(asv: dict) -> dict[str, list[tuple[int, str, float]]]:
    """Per benchmark-and-parameter name: ``(date, commit, value)`` points, oldest first.

    Handles asv's compact result format (``result_columns`` + value lists) and
    parameterized benchmarks (one series per parameter combination).
    """
    import itertools

    series: dict[str, list[tuple[int, str, float]]] = {}
    for doc in asv["results"]:
        columns = doc.get("result_columns", ["result"])
        date = int(doc.get("date") or 0)
        commit = str(doc.get("commit_hash", ""))[:8]
        for name, row in doc["results"].items():
            entry = dict(zip(columns, row)) if isinstance(row, list) else {"result": row}
            values = entry.get("result")
            params = entry.get("params") or []
            if values is None:
                continue
            combos = list(itertools.product(*params)) if params else [()]
            if not isinstance(values, list):
                values = [values]
            for combo, value in zip(combos, values):
                if value is None or value != value:
                    continue
                key = name + (f"({', '.join(str(c).strip(chr(39)) for c in combo)})" if combo else "")
                series.setdefault(key, []).append((date, commit, float(value)))
    for pts in series.values():
        pts.sort()
    return series
