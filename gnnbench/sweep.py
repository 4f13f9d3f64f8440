"""Sweeps: the baseline against baseline + each optimization and against all
recommended optimizations together, each configuration in its own process,
results written atomically so an interrupted sweep resumes where it stopped.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Callable, Iterable

from gnnbench import registry
from gnnbench.env import resolve_device
from gnnbench.graphs import generate
from gnnbench.measure import run
from gnnbench.results import BASELINE, load_result, write_json_atomic
from gnnbench.training import RunConfig, config_unavailable

__all__ = ["Entry", "sweep_entries", "run_sweep", "ALL_RECOMMENDED", "BASELINE"]

ALL_RECOMMENDED = "all_recommended"


@dataclasses.dataclass(frozen=True)
class Entry:
    """One configuration of a sweep."""

    label: str
    config: RunConfig
    optimizations: tuple[str, ...]

    def key(self) -> str:
        blob = json.dumps(self.config.to_dict(), sort_keys=True, default=str).encode()
        return hashlib.sha256(blob).hexdigest()[:12]

    def filename(self) -> str:
        return f"{self.label}-seed{self.config.seed}-{self.key()}.json"


def sweep_entries(base: RunConfig, names: Iterable[str] | None = None, seeds: Iterable[int] = (0,),
                  include_all_recommended: bool = True) -> list[Entry]:
    """Baseline, baseline + each named optimization (default: all registered), and all recommended together."""
    names = list(names) if names is not None else registry.names()
    for n in names:
        registry.get(n)
    device = resolve_device(base.device)
    entries = []
    for seed in seeds:
        b = dataclasses.replace(base, seed=seed)
        entries.append(Entry(BASELINE, b, ()))
        for n in names:
            entries.append(Entry(n, dataclasses.replace(b, flags=registry.get(n).apply(b.flags)), (n,)))
        if include_all_recommended:
            rec = [o.name for o in registry.REGISTRY.values()
                   if o.recommended and o.unavailable(device) is None
                   and not config_unavailable(dataclasses.replace(b, flags=o.apply(b.flags)), device)]
            entries.append(Entry(ALL_RECOMMENDED, dataclasses.replace(b, flags=registry.flags_for(rec, b.flags)),
                                 tuple(rec)))
    return entries


def _valid_result(path: Path, entry: Entry) -> dict | None:
    data = load_result(path)
    if data is None or data.get("status") not in ("ok", "unavailable") or data.get("config") != json.loads(
            json.dumps(entry.config.to_dict(), default=str)):
        return None
    return data


def run_sweep(entries: list[Entry], out_dir: str | Path, *, isolate: bool = True, resume: bool = True,
              progress: Callable[[int, int, Entry, str], None] | None = None) -> list[dict]:
    """Run every entry (skipping finished ones when ``resume``) and return their results.

    Each result lands in ``out_dir/<label>-seed<s>-<key>.json``, written
    atomically; a file that is missing, partial or for another configuration
    is (re)run, a valid one is kept. With ``isolate`` each configuration runs
    in a fresh process (clean peak memory, no state shared between runs).
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    results = []
    graphs: dict = {}
    for i, entry in enumerate(entries):
        path = out_dir / entry.filename()
        data = _valid_result(path, entry) if resume else None
        if data is not None:
            if progress:
                progress(i + 1, len(entries), entry, "kept")
            results.append({"label": entry.label, "optimizations": list(entry.optimizations), **data})
            continue
        if progress:
            progress(i, len(entries), entry, "running")
        if isolate:
            cfg_path = out_dir / f".{entry.filename()}.config.json"
            write_json_atomic(cfg_path, entry.config.to_dict())
            proc = subprocess.run([sys.executable, "-m", "gnnbench.measure", str(cfg_path), str(path)],
                                  capture_output=True, text=True)
            cfg_path.unlink(missing_ok=True)
            if proc.returncode != 0:
                data = {"status": "failed", "error": proc.stderr[-4000:], "config": entry.config.to_dict()}
                write_json_atomic(path.with_suffix(".failed.json"), data)
            else:
                data = load_result(path) or {"status": "failed", "error": f"unreadable result {path}",
                                             "config": entry.config.to_dict()}
        else:
            spec_key = json.dumps(entry.config.spec.to_dict(), sort_keys=True)
            if spec_key not in graphs:  # in-process: generate each graph once
                graphs.clear()
                graphs[spec_key] = generate(entry.config.spec)
            data = run(entry.config, out=path, graph=graphs[spec_key]).to_dict()
        if progress:
            progress(i + 1, len(entries), entry, data.get("status", "?"))
        results.append({"label": entry.label, "optimizations": list(entry.optimizations), **data})
    return results
