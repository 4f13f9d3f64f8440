"""The regression gate's benchmark process: one tree's run of every benchmark of a round.

``python <folder>/gate_worker.py SPEC.json OUT.json THREADS`` (started by :func:`gnnbench.measure.gate.rounds.run_tree`,
one process per tree and round, with ``PYTHONPATH`` the tree under test).

The worker is the gate's own code, the code under test is the tree's: the gate copies this file into its
temporary folder (:func:`script_in`) and runs the copy by path, so ``import gnnbench`` inside it finds the tree
on ``PYTHONPATH``, and a BASE tree older than this module (or any other module of the running tool) runs it all
the same, needing only the API it calls (``RunConfig``, ``measure.run.run``, ``graphs.generate``; the
micro-benchmarks' modules, reported unavailable where missing). Not ``python -m gnnbench.measure.gate.worker``:
that would look the module up in the tree under test; and not this file in place: its folder on ``sys.path``
would put every module beside it ahead of the libraries. Nothing here imports torch or gnnbench at import
time: the gate and the tests import this module for its table and its functions, and in the benchmark process
torch's thread count is set (:func:`main`) before the tree's gnnbench is imported.

It writes OUT.json after every benchmark, whole (a crash later keeps what was measured; the benchmark being
run reads ``{"status": "running"}``, which names it when the process dies). Per benchmark: ``status``,
``step`` (median seconds), ``steps``, ``phases``, ``test`` accuracy (``None`` for micro-benchmarks),
``seconds``, ``started`` (the wall clock as it started), and where measured ``setup`` / ``setup_phases`` and
``epoch`` / ``epoch_phases``; or a status with its ``reason``.

Duet (the spec has ``duet``: ``{"dir", "me", "peer", "cpu", "timeout"}``, :mod:`gnnbench.measure.gate.duet`): the
process pins itself to core ``cpu`` before torch is imported, and before each benchmark waits at a barrier with
its peer (the other tree's process of the same round, started at the same time on the other core): each writes
``<dir>/<n>.<me>.ready`` and waits for the peer's, so both trees run benchmark ``n`` at the same moment and a
drift of the machine's speed lands on both. A peer that does not arrive within ``timeout`` seconds, or an
``<dir>/abort`` file (the driver's: the peer failed), ends this process with exit 3.

Counting (the spec has ``counts``; the gate runs the worker under callgrind with the marker library's path in
``GNNBENCH_COUNT_MARKER``, :mod:`gnnbench.measure.gate.counts`): nothing is timed; a micro-benchmark's ``calls`` calls
after its warm-up are one region, dumped under the benchmark's name; a training configuration runs once unmeasured
(Python's and torch's lazy set-up), then ``epochs[0]`` and ``epochs[1]`` epochs as the regions ``NAME@a`` and
``NAME@b``, whose difference is ``b - a`` epochs of steps (each epoch's validation in it). The result per
benchmark: ``status``, ``counted`` (the regions, the unit and how many units the difference holds).
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import sys
import time
import traceback
from pathlib import Path
from typing import Any, Callable

__all__ = [
    "MICRO_BENCHES",
    "UnknownBench",
    "script_in",
    "micro",
    "bench",
    "counted",
    "marker",
    "barrier",
    "DUET_ABORTED",
    "main",
]


class UnknownBench(Exception):
    """A micro-benchmark name this worker has no entry for (reported unavailable, like a missing API)."""


def _sampler(graph: Any, batch: Any, batches: Any, seed: int) -> Callable[[], Any]:
    """The neighbour sampler: the next batch of the baseline's source."""
    return lambda: next(batches)


def _gather(graph: Any, batch: Any, batches: Any, seed: int) -> Callable[[], Any]:
    """The feature gather: host rows of 16 batches."""
    import torch

    from gnnbench.features.placement import place_features

    store = place_features(graph.x, "cpu", "host")
    ids = torch.cat([batch.n_id] + [next(batches).n_id for _ in range(15)])  # 16 batches' rows: ~0.3 ms
    return lambda: store.gather(ids)


def _aggregation(graph: Any, batch: Any, batches: Any, seed: int) -> Callable[[], Any]:
    """The GCN aggregation: one batch, scatter."""
    import torch

    from gnnbench.graphs.norm import gcn_norm
    from gnnbench.models.aggregation import Aggregator

    n = int(batch.n_id.numel())
    weights = gcn_norm(batch.edge_index, n)
    h = torch.randn(n, 32, generator=torch.Generator().manual_seed(seed))
    return lambda: Aggregator(batch.edge_index, n, gcn_weights=lambda: weights).gcn(h)


# the micro-benchmarks: name -> (graph, first batch, the batches after it, seed) -> the call timed
MICRO_BENCHES: dict[str, Callable[[Any, Any, Any, int], Callable[[], Any]]] = {
    "micro:sampler": _sampler,
    "micro:gather": _gather,
    "micro:aggregation": _aggregation,
}


def marker() -> Any:
    """The count marker (``gnnbench_count_start`` / ``gnnbench_count_stop(name)``) when this process counts
    instructions, else ``None``."""
    path = os.environ.get("GNNBENCH_COUNT_MARKER")
    if not path:
        return None
    import ctypes

    lib = ctypes.CDLL(path)
    lib.gnnbench_count_stop.argtypes = [ctypes.c_char_p]
    return lib


def script_in(folder: Path) -> Path:
    """This module's source copied into ``folder`` as ``gate_worker.py``: the program the gate runs in each tree."""
    path = Path(folder) / "gate_worker.py"
    shutil.copyfile(__file__, path)
    return path


def micro(
    name: str,
    graph: Any,
    seed: int,
    calls: int = 60,
    *,
    fanout: tuple[int, ...] = (10, 5),
    batch_size: int = 256,
    count: Any = None,
) -> tuple[float, int]:
    """One code path alone, many calls (:data:`MICRO_BENCHES`), on batches of the baseline's source with the
    benchmark's fanout and batch (the gate passes its workload's: gnnbench/measure/run/workload.py). Median seconds
    per call over ``calls`` calls, after 5 untimed ones. With ``count`` (the marker), the ``calls`` calls are
    one counted region named ``name`` instead, and no time is taken (the median is nan)."""
    from gnnbench.flags import Flags
    from gnnbench.graphs.prepare import prepare
    from gnnbench.sampling.sources import make_batch_source

    flags = Flags(fanout=tuple(fanout), batch_size=batch_size)
    source = make_batch_source(prepare(graph, flags), flags, seed=seed)

    def cycle():
        epoch = 0
        while True:
            yield from source.epoch(epoch)
            epoch += 1

    batches = cycle()
    batch = next(batches)
    if name not in MICRO_BENCHES:
        raise UnknownBench(f"unknown micro-benchmark {name!r}")
    fn = MICRO_BENCHES[name](graph, batch, batches, seed)
    for _ in range(5):
        fn()
    if count is not None:
        count.gnnbench_count_start()
        for _ in range(calls):
            fn()
        count.gnnbench_count_stop(name.encode())
        source.close()
        return float("nan"), calls
    times = []
    for _ in range(calls):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    source.close()
    return statistics.median(times), len(times)


def bench(name: str, cfg: dict, graph: Any, spec: dict, train: Callable[[dict], Any]) -> dict:
    """One benchmark's result in this tree: a micro-benchmark (``micro:*``), or ``train(cfg)``, the tree's run
    of the configuration ``cfg`` (a ``RunConfig`` dict) on ``graph``."""
    t0 = time.perf_counter()
    if name.startswith("micro:"):
        try:
            median, calls = micro(
                name,
                graph,
                spec["seed"],
                spec.get("micro_calls", 60),
                fanout=cfg["flags"]["fanout"],
                batch_size=cfg["flags"]["batch_size"],
            )
        except (ImportError, UnknownBench) as exc:  # a tree without this API or this micro-benchmark
            return {"status": "unavailable", "reason": f"{type(exc).__name__}: {exc}"}
        return {
            "status": "ok",
            "step": median,
            "steps": calls,
            "phases": {},
            "test": None,
            "seconds": time.perf_counter() - t0,
        }
    # the tree's result read as its JSON (``to_dict``): the one form every tree's result has, whether its blocks
    # are typed records (this schema) or dicts (trees before it)
    r = train(cfg).to_dict()
    if r["status"] != "ok":
        return {"status": r["status"], "reason": str(r.get("unavailable") or r.get("error"))}
    if not r["step_seconds"].get("n"):
        return {"status": "no measured steps", "reason": "the run ended within its warm-up"}
    epochs = list(r["epoch_seconds"])
    epochs = epochs[1:] if len(epochs) > 1 else epochs  # the first epoch holds the warm-up steps
    epoch = statistics.median(epochs) if epochs else None
    prepare = float(r["graph"].get("prepare_seconds") or 0.0)
    setup = r.get("setup_seconds")
    res = {
        "status": "ok",
        "step": r["step_seconds"]["median"],
        "steps": r["step_seconds"]["n"],
        "step_all": list(r.get("step_seconds_all") or []),  # every measured step, in order (a sweep's duet)
        "phases": {p: v["median"] for p, v in r["phases"].items()},
        "test": float(r["accuracy"]["test"]),
        "seconds": time.perf_counter() - t0,
    }
    if setup:  # the setup clock: the graph's preparation, then the pipeline's assembly
        res["setup"] = setup
        res["setup_phases"] = {"prepare": prepare, "assemble": setup - prepare}
    if epoch:  # an epoch's steps and what the epoch costs beside them (loader start-up, cache building)
        steps = r["step_seconds"]["median"] * (r.get("steps_per_epoch") or 0)
        res["epoch"] = epoch
        res["epoch_phases"] = {"steps": steps, "per-epoch cost": epoch - steps}
    return res


def counted(name: str, cfg: dict, graph: Any, spec: dict, train: Callable[[dict], Any], count: Any) -> dict:
    """One benchmark's counted regions in this tree (see the module's docstring)."""
    c = spec["counts"]
    if name.startswith("micro:"):
        try:
            _, calls = micro(
                name,
                graph,
                spec["seed"],
                c["calls"],
                fanout=cfg["flags"]["fanout"],
                batch_size=cfg["flags"]["batch_size"],
                count=count,
            )
        except (ImportError, UnknownBench) as exc:
            return {"status": "unavailable", "reason": f"{type(exc).__name__}: {exc}"}
        return {"status": "ok", "counted": {"regions": [name], "unit": "call", "units": calls}}
    a, b = c["epochs"]
    one = {**cfg, "epochs": 1, "max_steps_per_epoch": None}
    r = train(one)  # Python's and torch's lazy set-up, outside every region
    if r.status != "ok":
        return {"status": r.status, "reason": str(r.unavailable or r.error)}
    regions = []
    for epochs in (a, b):
        count.gnnbench_count_start()
        r = train({**one, "epochs": epochs})
        count.gnnbench_count_stop(f"{name}@{epochs}".encode())
        regions.append(f"{name}@{epochs}")
        if r.status != "ok":
            return {"status": r.status, "reason": str(r.unavailable or r.error)}
    return {
        "status": "ok",
        "counted": {"regions": regions, "unit": "step", "units": (b - a) * int(r.steps_per_epoch or 0)},
    }


DUET_ABORTED = 3  # the exit status of a duet process whose peer never arrived at a barrier (or failed)


def barrier(duet: dict, index: int, *, poll: float = 0.0005) -> None:
    """Wait for the peer at barrier ``index`` (see the module's docstring); exits :data:`DUET_ABORTED` when the
    peer failed or does not arrive within ``duet["timeout"]`` seconds."""
    folder = Path(duet["dir"])
    (folder / f"{index}.{duet['me']}.ready").touch()
    theirs = folder / f"{index}.{duet['peer']}.ready"
    deadline = time.monotonic() + float(duet.get("timeout", 600.0))
    while not theirs.exists():
        if (folder / "abort").exists():
            print(f"duet: the peer ({duet['peer']}) failed before barrier {index}", file=sys.stderr)
            raise SystemExit(DUET_ABORTED)
        if time.monotonic() > deadline:
            print(f"duet: the peer ({duet['peer']}) did not reach barrier {index} in time", file=sys.stderr)
            raise SystemExit(DUET_ABORTED)
        time.sleep(poll)


def _save(out: dict, path: str) -> None:
    """The results so far, replaced whole after every benchmark: a crash later keeps what was measured."""
    part = path + ".part"
    with open(part, "w") as f:
        f.write(json.dumps(out))
    os.replace(part, path)


def main(argv: list[str]) -> None:
    """``argv``: ``[program, SPEC.json, OUT.json, THREADS]``."""
    spec = json.loads(open(argv[1]).read())
    duet = spec.get("duet")
    if duet is not None and hasattr(os, "sched_setaffinity"):  # before torch starts its threads
        os.sched_setaffinity(0, {int(duet["cpu"])})
    import torch

    torch.set_num_threads(int(argv[3]))
    # the tree's API, imported before anything runs: a tree without it fails as a process
    from gnnbench.graphs import GraphSpec, generate
    from gnnbench.measure.run import run
    from gnnbench.training import RunConfig

    graph = generate(GraphSpec(**spec["graph"]))
    out: dict = {}

    def train(cfg: dict) -> Any:
        return run(RunConfig.from_dict(cfg), graph=graph)

    count = marker() if spec.get("counts") else None
    if spec.get("counts") and count is None:
        raise SystemExit("a counting spec needs the marker library (GNNBENCH_COUNT_MARKER)")
    for index, (name, cfg) in enumerate(spec["benches"].items()):
        if duet is not None:
            barrier(duet, index)
        out[name] = {"status": "running"}  # left behind if the process dies here: the driver names this benchmark
        _save(out, argv[2])
        started = time.time()  # wall clock, comparable across the two processes of a duet
        try:
            out[name] = (
                counted(name, cfg, graph, spec, train, count)
                if count is not None
                else bench(name, cfg, graph, spec, train)
            )
        except Exception as exc:  # the benchmark's own code raised: a failure of this tree, reported per benchmark
            out[name] = {
                "status": "failed",
                "reason": f"{type(exc).__name__}: {exc}",
                "traceback": traceback.format_exc()[-2000:],
            }
        out[name]["started"] = started
        _save(out, argv[2])
    _save(out, argv[2])


if __name__ == "__main__":
    main(sys.argv)
