"""Collect the report's inputs: gnnbench run results, pytest-benchmark JSON and asv results."""

from __future__ import annotations

import dataclasses
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from gnnbench.measure.run import RunResult, load_result

__all__ = ["ReportInputs", "load_inputs", "asv_series", "env_label", "inputs_fingerprint"]

MANIFEST = "sweep.json"  # gnnbench.measure.sweep.rounds.MANIFEST: marks a sweep's directory
_SWEEP_NAME = re.compile(r"^(?P<label>.+)-r(?P<round>\d+)-[0-9a-f]{12}\.json$")  # <label>-r<round>-<key>.json
_V1_NAME = re.compile(r"^(?P<label>.+?)-seed\d+")  # <label>-seed<s>-<key>.json (schema 1 sweeps)


@dataclass
class ReportInputs:
    """Everything the report is built from.

    Args:
        runs_by_sweep: gnnbench run results (:class:`~gnnbench.measure.run.results.RunResult`) by sweep directory
            (one sweep per directory), each placed: ``label`` (configuration name), ``optimizations`` and, for
            interleaved sweeps, ``round`` (from the file where it has none, else from the file's name).
        pytest_benchmarks: pytest-benchmark ``--benchmark-json`` documents.
        asv: asv results: ``{"benchmarks": {...}, "results": [per-commit docs]}``.
        gate_rates: The regression gate's measured error rates, one summary per file
            (:func:`gnnbench.measure.gate.rates.summarize`).
        gate_runs: Stored gate runs (``gnnbench regress --out``), oldest first: their head step times over
            commits are a history of their own.
        sources: The files read.
        roots: The arguments they were read from (``runs``, ``asv_results``, ...), as given: what
            :func:`inputs_fingerprint` records, so the inputs can be read again and compared.
    """

    runs_by_sweep: dict[str, list[RunResult]] = field(default_factory=dict)
    pytest_benchmarks: list[dict] = field(default_factory=list)
    asv: dict | None = None
    gate_rates: list[dict] = field(default_factory=list)
    gate_runs: list[dict] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)
    roots: dict[str, Any] = field(default_factory=dict)

    @property
    def runs(self) -> list[RunResult]:
        """Every run result read, sweep after sweep."""
        return [r for group in self.runs_by_sweep.values() for r in group]

    def runs_of(self, sweep: str | Path) -> list[RunResult]:
        """The results of the sweep in the folder ``sweep`` (not those of a sweep in a folder below it)."""
        return [r for g, group in self.runs_by_sweep.items() if Path(g) == Path(sweep) for r in group]


def inputs_fingerprint(inputs: ReportInputs) -> dict[str, Any]:
    """What a report was built from: its arguments (``roots``) and every file read with its SHA-256, so a
    committed report can be checked against the committed inputs (``load_inputs(**roots)`` reads the same
    files with the same bytes, or the report is stale)."""
    import hashlib

    files = {str(f): hashlib.sha256(Path(f).read_bytes()).hexdigest() for f in sorted(set(inputs.sources))}
    return {"roots": inputs.roots, "files": files}


def _read_json(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _slug(label: str) -> str:
    return re.sub(r"[^0-9a-z]+", "", label.lower())


def _sweep_dir(f: Path, root: Path) -> Path:
    """The nearest directory from ``f`` up to ``root`` holding a sweep manifest (else ``f``'s own)."""
    for d in f.parents:
        if (d / MANIFEST).is_file():
            return d
        if d == root:
            break
    return f.parent


def sweep_rule(group: Path):
    """The stopping rule a sweep's manifest recorded (:class:`gnnbench.measure.stats.sequential.StoppingRule`), or
    ``None`` for a sweep that ran every round."""
    from gnnbench.measure.stats import StoppingRule

    rule = (_read_json(group / MANIFEST) or {}).get("rule")
    return StoppingRule.from_dict(rule) if rule else None


def sweep_equivalence_margin(group: Path) -> float | None:
    """The equivalence margin a sweep's manifest declared before its rounds (``equivalence.margin``), or ``None``
    for a sweep that declared none (every row is then judged by its measured time to accuracy)."""
    block = (_read_json(group / MANIFEST) or {}).get("equivalence") or {}
    margin = block.get("margin")
    return float(margin) if margin is not None else None


def _manifest_labels(group: Path) -> set[str]:
    manifest = _read_json(group / MANIFEST) or {}
    return {label for order in manifest.get("rounds") or [] for label in order}


def _label_and_round(f: Path, group: Path, labels: set[str]) -> tuple[str, int | None]:
    """From the path relative to the sweep directory (a label with '/' lands in a subfolder)."""
    rel = f.relative_to(group).as_posix() if f.is_relative_to(group) else f.name
    m = _SWEEP_NAME.match(rel)
    if m:
        label = m["label"]
        if labels and label not in labels:  # a label made safe for a file name: the manifest has the real one
            label = next((x for x in sorted(labels) if _slug(x) == _slug(label)), label)
        return label, int(m["round"])
    m = _V1_NAME.match(f.name)
    return (m["label"] if m else f.stem), None


def _infer_optimizations(label: str, flags: dict, base_flags: dict | None) -> list[str]:
    """The registry entries a configuration switched on: its own name, or (for a combination) every entry
    whose changes to the baseline's flags it carries."""
    from gnnbench import registry
    from gnnbench.flags import Flags

    if label in registry.REGISTRY:
        return [label]
    if base_flags is None or flags == base_flags:
        return []
    out = []
    for opt in registry.REGISTRY.values():
        try:
            changes = json.loads(json.dumps(opt.changes_for(Flags.from_dict(base_flags))))
        except (TypeError, ValueError):
            continue
        if any(base_flags.get(k) != v for k, v in changes.items()) and all(
            flags.get(k) == v for k, v in changes.items()
        ):
            out.append(opt.name)
    return out


def _load_run(f: Path, root: Path) -> tuple[str, RunResult] | None:
    """A result file's sweep directory and its result, placed (``None``: not a readable result)."""
    if f.name.startswith(".") or f.name.endswith(".failed.json") or f.name == MANIFEST:
        return None
    data = load_result(f)  # typed, older schema versions read, newer ones refused
    if data is None:
        return None
    group = _sweep_dir(f, root)
    label, rnd = _label_and_round(f, group, _manifest_labels(group))
    return str(group), dataclasses.replace(
        data, label=data.label if data.label is not None else label, round=data.round if data.round is not None else rnd
    )


def _fill_optimizations(runs_by_sweep: dict[str, list[RunResult]]) -> None:
    """Where a result does not record the optimizations it turns on (a schema 1 sweep), infer them from its flags
    against its sweep's baseline."""
    from gnnbench.measure.compare import BASELINE

    for runs in runs_by_sweep.values():
        base_flags = next((r.config.get("flags") for r in runs if r.label == BASELINE), None)
        runs[:] = [
            r
            if r.optimizations is not None
            else dataclasses.replace(
                r, optimizations=_infer_optimizations(r.label, r.config.get("flags") or {}, base_flags)
            )
            for r in runs
        ]


def load_inputs(
    runs: Iterable[str | Path] = (),
    pytest_benchmark: Iterable[str | Path] = (),
    asv_results: str | Path | None = None,
    gate_rates: str | Path | Iterable[str | Path] | None = None,
    gate_runs: Iterable[str | Path] = (),
) -> ReportInputs:
    """Read result files and directories (directories are searched recursively).

    Files that are not valid JSON of the expected kind are skipped (a sweep may
    be running or may have been interrupted); the report says what it read.
    A sweep's labels and rounds come from its file names
    (``<label>-r<round>-<key>.json``; schema-1 sweeps: ``<label>-seed<s>-<key>.json``, no round).
    """
    runs, pytest_benchmark, gate_runs = list(runs), list(pytest_benchmark), list(gate_runs)
    rates = [] if gate_rates is None else [gate_rates] if isinstance(gate_rates, (str, Path)) else list(gate_rates)
    out = ReportInputs(
        roots={
            "runs": [str(r) for r in runs],
            "pytest_benchmark": [str(f) for f in pytest_benchmark],
            "asv_results": None if asv_results is None else str(asv_results),
            "gate_rates": [str(g) for g in rates],
            "gate_runs": [str(r) for r in gate_runs],
        }
    )
    for root in runs:
        root = Path(root)
        # a hidden file is a running sweep's work in flight (a child's config, a run waiting for its pair): not a
        # result until it is moved onto its name
        files = [f for f in sorted(root.rglob("*.json")) if not f.name.startswith(".")] if root.is_dir() else [root]
        for f in files:
            loaded = _load_run(f, root if root.is_dir() else f.parent)
            if loaded is not None:
                out.runs_by_sweep.setdefault(loaded[0], []).append(loaded[1])
                out.sources.append(str(f))
    _fill_optimizations(out.runs_by_sweep)
    for f in pytest_benchmark:
        data = _read_json(Path(f))
        if data and "benchmarks" in data:
            out.pytest_benchmarks.append(data)
            out.sources.append(str(f))
    if asv_results is not None:
        out.asv = _load_asv(Path(asv_results), out.sources)
    for g in rates:
        from gnnbench.measure.gate import summarize

        doc = _read_json(Path(g))
        if doc is None:
            raise ValueError(
                f"--gate-rates {str(g)!r} is not a readable JSON file (expected the output of "
                "scripts/gate_error_rates.py)"
            )
        out.gate_rates.append(summarize(doc))
        out.sources.append(str(g))
    for root in gate_runs:
        root = Path(root)
        for f in sorted(root.rglob("*.json")) if root.is_dir() else [root]:
            doc = _read_json(f)
            if doc and "benches" in doc and "orders" in doc and doc.get("finished"):
                out.gate_runs.append(doc)
                out.sources.append(str(f))
    out.gate_runs.sort(key=lambda d: d["finished"])
    return out


def _load_asv(root: Path, sources: list[str]) -> dict | None:
    """asv's results: ``benchmarks.json`` plus one JSON per (machine, commit, environment); the files read are
    appended to ``sources``."""
    if not root.is_dir():
        return None
    benchmarks = _read_json(root / "benchmarks.json") or {}
    if benchmarks:
        sources.append(str(root / "benchmarks.json"))
    results = []
    for f in sorted(root.glob("*/*.json")):
        if f.name == "machine.json":
            continue
        data = _read_json(f)
        if data and "commit_hash" in data and "results" in data:
            results.append(data)
            sources.append(str(f))
    if not results:
        return None
    return {"benchmarks": benchmarks, "results": results}


def env_label(doc: dict) -> str:
    """The machine and environment a result document was measured in: ``machine/env_name``."""
    machine = (doc.get("params") or {}).get("machine") or "?"
    return f"{machine}/{doc.get('env_name') or '?'}"


def _finite(x) -> float | None:
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def _column(entry: dict, name: str, n: int) -> list:
    values = entry.get(name)
    if not isinstance(values, list):
        values = [values]
    return values + [None] * (n - len(values))


def asv_series(asv: dict) -> dict[str, list[tuple[int, str, float, float | None, float | None]]]:
    """Per benchmark-and-parameter name: ``(date, commit, value, low, high)`` points, oldest first.

    Results from more than one environment or machine are split: each series then carries its
    ``[machine/env_name]`` in its name, so no line joins points that are not comparable.

    ``low``/``high`` are the confidence interval asv recorded (``stats_ci_99_a`` /
    ``stats_ci_99_b``, asv >= 0.6), ``None`` where absent or unbounded (asv
    reports -inf/inf for a single repeat). Handles asv's compact result
    format (``result_columns`` + value lists) and parameterized benchmarks
    (one series per parameter combination).
    """
    import itertools

    series: dict[str, list[tuple[int, str, float, float | None, float | None]]] = {}
    # one series never runs across environments or machines: their points are not comparable
    envs = {env_label(doc) for doc in asv["results"]}
    for doc in asv["results"]:
        suffix = f" [{env_label(doc)}]" if len(envs) > 1 else ""
        columns = doc.get("result_columns", ["result"])
        date = int(doc.get("date") or 0)
        commit = str(doc.get("commit_hash", ""))[:8]
        for name, row in doc["results"].items():
            entry = dict(zip(columns, row)) if isinstance(row, list) else {"result": row}
            if entry.get("result") is None:
                continue
            params = entry.get("params") or []
            combos = list(itertools.product(*params)) if params else [()]
            n = len(combos)
            points = zip(
                combos,
                _column(entry, "result", n),
                _column(entry, "stats_ci_99_a", n),
                _column(entry, "stats_ci_99_b", n),
            )
            for combo, value, low, high in points:
                if _finite(value) is None:
                    continue
                low, high = _finite(low), _finite(high)
                if low is None or high is None:
                    low = high = None
                key = name + (f"({', '.join(str(c).strip(chr(39)) for c in combo)})" if combo else "") + suffix
                series.setdefault(key, []).append((date, commit, float(value), low, high))
    for pts in series.values():
        pts.sort(key=lambda p: p[:3])
    return series
