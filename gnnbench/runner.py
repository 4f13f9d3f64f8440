"""The measured training step: one configuration in, one result (JSON) out.

A run generates (or loads) the graph, prepares it, builds the batch source,
the feature store and the model from ``Flags``, trains for ``epochs`` epochs
and evaluates with full neighbourhoods (no sampling noise). The first
``warmup_steps`` steps (first touch, compilation) are excluded from the
steady-state timings; each measured step is split into the phases of
:data:`gnnbench.timing.PHASES`.
"""

from __future__ import annotations

import dataclasses
import json
import os
import resource
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import torch
import torch.nn.functional as F
from torch import Tensor

from gnnbench.env import environment, resolve_device
from gnnbench.features import FeatureStore, Unavailable, prefetch_features
from gnnbench.flags import Flags
from gnnbench.graphs import GraphSpec, generate
from gnnbench.graphs.norm import GCNNorm
from gnnbench.graphs.prepare import IndexOverflowError, prepare
from gnnbench.linkpred import HITS_K, auc, evaluation_negatives, hits_at_k, link_loss
from gnnbench.models import Aggregator, Precision, build_model
from gnnbench.sampling.loader import make_batch_source
from gnnbench.sampling.sampler import native_backend_status
from gnnbench.timing import PHASES, PhaseTimer, summarize

__all__ = ["RunConfig", "Trainer", "ConfigUnavailable", "run", "config_unavailable", "write_json_atomic",
           "SCHEMA_VERSION"]

SCHEMA_VERSION = 1


@dataclass(frozen=True)
class RunConfig:
    """One configuration to measure.

    Args:
        spec: The graph to generate.
        flags: The optimizations switched on (``Flags()`` = baseline).
        task: ``"node"`` (classification, accuracy) or ``"link"`` (prediction on
            held-out edges, AUC and Hits@50).
        model: ``"gcn"`` or ``"sage"``; its depth is ``len(flags.fanout)``.
        num_layers: Optional explicit depth; must equal ``len(flags.fanout)``.
        hidden: Hidden width.
        epochs: Training epochs.
        max_steps_per_epoch: Cap on steps per epoch (``None`` = full epochs).
        warmup_steps: Steps excluded from steady-state timings.
        lr: Adam learning rate.
        seed: Seed of the model, sampler and shuffles.
        device: ``"cpu"``, ``"cuda"``, ``"cuda:N"`` or ``"auto"``.
        sync_phases: Synchronize at phase boundaries (per-phase numbers); off =
            end-to-end step times only.
        cache_dir: Batch-cache directory (default: the user cache).
    """

    spec: GraphSpec = field(default_factory=lambda: GraphSpec.preset("small"))
    flags: Flags = field(default_factory=Flags)
    task: str = "node"  # "node" classification | "link" prediction
    model: str = "gcn"  # "gcn" | "sage"
    num_layers: int | None = None  # None: follows the fanout
    hidden: int = 64  # hidden width
    epochs: int = 2  # training epochs
    max_steps_per_epoch: int | None = None  # cap steps per epoch
    warmup_steps: int = 3  # excluded from steady-state timings
    lr: float = 0.01  # Adam learning rate
    seed: int = 0  # model / sampler / shuffle seed
    device: str = "cpu"  # cpu | cuda | cuda:N | auto
    sync_phases: bool = True  # per-phase sync (True) or end-to-end only
    cache_dir: str | None = None  # batch-cache directory

    def __post_init__(self) -> None:
        from gnnbench.models import MODELS

        if self.task not in ("node", "link"):
            raise ValueError(f"unknown task {self.task!r}; accepted: 'node', 'link'")
        if self.model not in MODELS:
            raise ValueError(f"unknown model {self.model!r}; accepted: {', '.join(MODELS)}")
        if self.num_layers is not None and self.num_layers != len(self.flags.fanout):
            raise ValueError(
                f"fanout {list(self.flags.fanout)} has {len(self.flags.fanout)} hops but the model has "
                f"{self.num_layers} layers; the depth follows the fanout (give a fanout of {self.num_layers} hops)")
        for name, low in (("hidden", 1), ("epochs", 1), ("warmup_steps", 0)):
            value = getattr(self, name)
            if not isinstance(value, int) or value < low:
                raise ValueError(f"RunConfig.{name} must be an integer >= {low} (got {value!r})")
        if self.max_steps_per_epoch is not None and self.max_steps_per_epoch < 1:
            raise ValueError(f"RunConfig.max_steps_per_epoch must be None or >= 1 (got {self.max_steps_per_epoch})")
        if not self.lr > 0:
            raise ValueError(f"RunConfig.lr must be > 0 (got {self.lr})")

    def to_dict(self) -> dict[str, Any]:
        d = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        d["spec"] = self.spec.to_dict()
        d["flags"] = self.flags.to_dict()
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "RunConfig":
        d = dict(d)
        d["spec"] = GraphSpec(**d["spec"])
        d["flags"] = Flags.from_dict(d["flags"])
        return cls(**d)


def config_unavailable(config: RunConfig, device: torch.device) -> dict[str, str]:
    """Every flag of ``config`` that cannot run here (device, model or missing library), with the reason."""
    flags = config.flags
    reasons = dict(flags.unavailable(device))
    if flags.cached_norm and config.model != "gcn":
        reasons["cached_norm"] = f"cached_norm caches GCN's normalization; model {config.model!r} has none"
    if config.task == "node" and (flags.negative_mode != "uniform" or not flags.negative_strict):
        reasons["negative_mode"] = "negative sampling applies to link prediction; this run trains node classification"
    if config.task == "link" and flags.batch_source != "neighbor":
        reasons["batch_source"] = (f"{flags.batch_source} batches train node classification; link prediction "
                                   "uses neighbour-sampled edge batches")
    if flags.sampler_backend == "pyg":
        reason = native_backend_status()
        if reason:
            reasons["sampler_backend"] = reason
    if flags.batch_source != "neighbor" and (flags.num_workers or flags.sampler_backend != "gnnbench"):
        reasons["batch_source"] = (f"{flags.batch_source} batches are built in the main process; loader workers "
                                   "and sampler backends apply to neighbour sampling only")
    return reasons


def write_json_atomic(path: str | Path, data: dict) -> None:
    """Write JSON so that readers see the old file or the new one, never a partial one."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    with open(tmp, "w") as fh:
        json.dump(data, fh, indent=1, default=str)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def _host_peak_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _instrumentation_overhead(device: torch.device, sync: bool, phases_per_step: int) -> float:
    """Seconds the timer itself adds to one step (measured on empty phases)."""
    timer = PhaseTimer(device, sync=sync)
    reps = 200
    timer.start_step()
    t0 = time.perf_counter()
    for _ in range(reps):
        with timer.phase("forward"):
            pass
    per_phase = (time.perf_counter() - t0) / reps
    timer.end_step(record=False)
    return per_phase * phases_per_step


class _NvmlSampler:
    """Device utilization readings (NVML) taken at step ends; ``None`` where NVML is unavailable."""

    def __init__(self, device: torch.device) -> None:
        self.values: list[float] = []
        self.reason: str | None = None
        if device.type != "cuda":
            self.reason = "device utilization comes from NVML, which needs a CUDA device"
            return
        try:
            torch.cuda.utilization(device)
        except Exception as exc:  # noqa: BLE001 - pynvml missing or driver without NVML
            self.reason = f"NVML not available ({exc}); install nvidia-ml-py"
        self.device = device

    def sample(self) -> None:
        if self.reason is None:
            self.values.append(float(torch.cuda.utilization(self.device)))


def _unavailable_result(config: RunConfig, device: torch.device, reasons: dict[str, str], env: dict) -> dict:
    return {"schema_version": SCHEMA_VERSION, "status": "unavailable", "unavailable": reasons,
            "environment": env, "config": config.to_dict()}


class ConfigUnavailable(Exception):
    """The configuration cannot run here; ``reasons`` maps each offending flag to why."""

    def __init__(self, reasons: dict[str, str]) -> None:
        super().__init__("; ".join(f"{k}: {v}" for k, v in reasons.items()))
        self.reasons = reasons


class Trainer:
    """Everything one configuration builds, with the training step as a method.

    :func:`run` drives it with phase timing; asv's ``time_step`` calls
    :meth:`train_step` directly.

    Raises:
        ConfigUnavailable: when a flag cannot run on this device or setup.
    """

    def __init__(self, config: RunConfig, graph: Any = None) -> None:
        self.config = config
        self.device = device = resolve_device(config.device)
        torch.manual_seed(config.seed)
        reasons = config_unavailable(config, device)
        if reasons:
            raise ConfigUnavailable(reasons)
        self.flags = flags = config.flags
        t0 = time.perf_counter()
        if graph is None:
            graph = generate(config.spec)
            self.generate_seconds = time.perf_counter() - t0
        else:
            if graph.meta.get("spec") != config.spec.to_dict():
                raise ValueError("the graph passed to run() was not generated from config.spec")
            self.generate_seconds = graph.meta.get("generate_seconds", 0.0)
        self.full_graph = graph
        if config.task == "link":
            graph = graph.link_split()  # held-out edges never feed message passing
        self.graph = graph
        try:
            self.prepared = prepare(graph, flags)
        except IndexOverflowError as exc:
            raise ConfigUnavailable({"index_dtype": str(exc)}) from None
        t1 = time.perf_counter()
        try:
            self.store = FeatureStore(graph.x, device, flags.feature_placement,
                                      hot_nodes=graph.train_mask.nonzero().view(-1), pin_memory=flags.pin_memory)
            self.source = make_batch_source(self.prepared, flags, seed=config.seed, cache_dir=config.cache_dir,
                                            task=config.task)
        except Unavailable as exc:
            raise ConfigUnavailable({"feature_placement": str(exc)}) from None
        except ImportError as exc:  # an optional library a batch source needs (pymetis for Cluster-GCN)
            raise ConfigUnavailable({"batch_source": str(exc)}) from None
        self.setup_seconds = time.perf_counter() - t1

        out_dim = graph.num_classes if config.task == "node" else config.hidden
        self.model = build_model(config.model, graph.num_features, config.hidden, out_dim,
                                 len(flags.fanout)).to(device)
        self.precision = Precision(flags.precision, device.type)
        self.opt = torch.optim.Adam(self.model.parameters(), lr=config.lr)
        self.scaler = torch.amp.GradScaler(device.type, enabled=self.precision.needs_grad_scaler)
        self.forward = self.model
        self.dynamo_counters = None
        if flags.compile:
            from torch import _dynamo

            _dynamo.reset()
            self.dynamo_counters = _dynamo.utils.counters
            self.forward = torch.compile(self.model, dynamic=True)
        self.norm = self.deg_full = None
        if flags.cached_norm or flags.batch_source == "saint_rw":
            # GraphSAINT's subgraph aggregation rescales full-graph coefficients (see _aggregator),
            # so it needs them whether or not they are cached for the other batch sources.
            cached = self.prepared.gcn_norm()
            self.norm = GCNNorm(cached.edge_weight.to(device), cached.self_weight.to(device))
            self.deg_full = graph.deg.to(device)
        self.y_all = graph.y.to(device)
        self.timer = PhaseTimer(device, sync=config.sync_phases)
        self._epoch = 0
        self._open: tuple | None = None

    def epoch_batches(self, epoch: int):
        """``(iterator of (batch, features or None), closeables)`` for ``epoch``."""
        epoch_batches = self.source.epoch(epoch)
        if self.flags.feature_prefetch:
            # Yields (batch, features): the next batch's gather and copy run on a side stream
            # while this one computes, so they are timed inside "sample" (the wait for data).
            return prefetch_features(epoch_batches, self.store), (epoch_batches,)
        return ((b, None) for b in epoch_batches), (epoch_batches,)

    def step(self, batch, x=None) -> Tensor:
        """One training step on ``batch`` (features gathered here unless given); returns the loss."""
        timer, device, flags = self.timer, self.device, self.flags
        if x is None:
            x = self.store.gather(batch.n_id, timer)
        with timer.phase("transfer"):
            edge_index = batch.edge_index.to(device, non_blocking=True)
            target = batch.target.to(device, non_blocking=True)
            n_id = batch.n_id.to(device, non_blocking=True)
            e_id = batch.e_id.to(device, non_blocking=True) if self.norm is not None else None
            node_norm = batch.node_norm.to(device) if batch.node_norm is not None else None
        with timer.phase("forward"):
            agg = _aggregator(edge_index, n_id, e_id, self.norm, flags, self.precision,
                              deg_full=self.deg_full)
            out_all = self.forward(x, agg, self.precision)
            if self.config.task == "link":
                loss = link_loss(out_all, batch.edge_label_index.to(device), batch.edge_label.to(device))
            else:
                logits = out_all[target].float()
                labels = self.y_all.index_select(0, n_id.index_select(0, target))
                if node_norm is not None:  # GraphSAINT: unbiased estimate of the mean training loss
                    loss = (F.cross_entropy(logits, labels, reduction="none") * node_norm).sum()
                else:
                    loss = F.cross_entropy(logits, labels) if target.numel() else logits.sum() * 0.0
        with timer.phase("backward"):
            self.scaler.scale(loss).backward()
        with timer.phase("optimizer"):
            self.scaler.step(self.opt)
            self.scaler.update()
            self.opt.zero_grad(set_to_none=True)
        return loss.detach()

    def train_step(self) -> float:
        """Pull the next batch (moving to the next epoch when one ends) and train on it."""
        self.model.train()
        for _ in range(2):
            if self._open is None:
                self._open = self.epoch_batches(self._epoch)
            item = next(self._open[0], None)
            if item is not None:
                loss = self.step(*item)
                if self.device.type == "cuda":
                    torch.cuda.synchronize(self.device)
                return float(loss)
            self._close_open()
            self._epoch += 1
        raise RuntimeError(f"the batch source yielded no batches for epoch {self._epoch - 1}")

    def _close_open(self) -> None:
        if self._open is not None:
            for it in (self._open[0], *self._open[1]):
                if hasattr(it, "close"):
                    it.close()  # an epoch cut short must release its loader iterator (and its workers)
            self._open = None

    def evaluate(self) -> tuple[dict, float]:
        """Full-neighbourhood evaluation: accuracy for node tasks, AUC and Hits@50 for links."""
        if self.config.task == "link":
            return _evaluate_links(self.model, self.prepared, self.full_graph, self.device, self.flags,
                                   self.precision, self.norm, seed=self.config.seed)
        val, test, seconds = _evaluate(self.model, self.prepared, self.graph, self.device,
                                       self.flags, self.precision, self.norm)
        return {"metric": "accuracy", "val": val, "test": test}, seconds

    def close(self) -> None:
        self._close_open()
        if hasattr(self.source, "close"):
            self.source.close()


def run(config: RunConfig, *, out: str | Path | None = None,
        progress: Callable[[int, int], None] | None = None, profiler: Any = None, graph: Any = None) -> dict:
    """Measure ``config``; returns (and, with ``out``, atomically writes) the result dict.

    A configuration that cannot run here returns ``status: "unavailable"`` with
    the reason for each offending flag, never a number. ``profiler`` (e.g. a
    ``torch.profiler.profile``) is entered around the training loop and
    stepped after every training step. ``graph`` reuses an already generated
    graph of ``config.spec`` (a sweep generates each spec once).
    """
    device = resolve_device(config.device)
    env = environment(device)
    try:
        trainer = Trainer(config, graph)
    except ConfigUnavailable as exc:
        result = _unavailable_result(config, device, exc.reasons, env)
        if out:
            write_json_atomic(out, result)
        return result
    flags = config.flags
    graph, prepared, store, source, timer = trainer.graph, trainer.prepared, trainer.store, trainer.source, trainer.timer
    t_gen, setup_seconds, dynamo_counters = trainer.generate_seconds, trainer.setup_seconds, trainer.dynamo_counters
    nvml = _NvmlSampler(device)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    step = 0
    epoch_seconds: list[float] = []
    first_step_seconds: float | None = None
    losses: list[float] = []
    total_steps = config.epochs * (config.max_steps_per_epoch or 0)
    if profiler is not None:
        profiler.__enter__()
    try:
        for epoch in range(config.epochs):
            trainer.model.train()
            t_epoch = time.perf_counter()
            batches, closeables = trainer.epoch_batches(epoch)
            steps_this_epoch = 0
            while config.max_steps_per_epoch is None or steps_this_epoch < config.max_steps_per_epoch:
                timer.start_step()
                t_step = time.perf_counter()
                with timer.phase("sample"):
                    item = next(batches, None)
                if item is None:
                    timer.end_step(record=False)
                    break
                loss = trainer.step(*item)
                timer.end_step(record=step >= config.warmup_steps)
                if step == 0:
                    first_step_seconds = time.perf_counter() - t_step
                nvml.sample()
                losses.append(float(loss))
                if profiler is not None:
                    profiler.step()
                step += 1
                steps_this_epoch += 1
                if progress:
                    progress(step, total_steps)
            for it in (batches, *closeables):
                if hasattr(it, "close"):
                    it.close()  # an epoch cut short must release its loader iterator (and its workers)
            epoch_seconds.append(time.perf_counter() - t_epoch)
    finally:
        trainer.close()
        if profiler is not None:
            profiler.__exit__(None, None, None)

    accuracy, eval_seconds = trainer.evaluate()

    steps = timer.steps
    phase_stats = {p: summarize([s.get(p, 0.0) for s in steps]) for p in PHASES}
    step_stats = summarize(timer.step_seconds)
    median_step = step_stats["median"]
    overhead = _instrumentation_overhead(device, config.sync_phases, phases_per_step=8 if config.sync_phases else 0)
    sample_frac = (phase_stats["sample"]["median"] / median_step) if steps and config.sync_phases else None
    compute = sum(phase_stats[p]["median"] for p in ("forward", "backward", "optimizer"))
    compile_info = None
    if flags.compile:
        stats = dynamo_counters["stats"] if dynamo_counters is not None else {}
        compile_info = {
            "first_step_seconds": first_step_seconds,
            "estimated_compile_seconds": max(0.0, (first_step_seconds or 0.0) - median_step) if steps else None,
            "unique_graphs": int(stats.get("unique_graphs", 0)),
            "recompilations": max(0, int(stats.get("unique_graphs", 0)) - 1),
        }
    result = {
        "schema_version": SCHEMA_VERSION,
        "status": "ok",
        "environment": env,
        "config": config.to_dict(),
        "timing_mode": timer.mode,
        "graph": {"num_nodes": graph.num_nodes, "num_edges": graph.num_edges,
                  "generate_seconds": t_gen, "prepare_seconds": prepared.prepare_seconds,
                  "setup_seconds": setup_seconds, "index_bytes": prepared.index_bytes_after,
                  "index_bytes_int64": prepared.index_bytes_before},
        "steps": {"measured": len(timer.step_seconds), "warmup": min(step, config.warmup_steps), "total": step},
        "step_seconds": step_stats,
        "step_seconds_all": timer.step_seconds,
        "phases": phase_stats,
        "device_phase_ms": ({p: summarize([d.get(p, 0.0) for d in timer.device_ms]) for p in PHASES}
                            if timer.device_ms else None),
        "epoch_seconds": epoch_seconds,
        "eval_seconds": eval_seconds,
        "data_wait_fraction": sample_frac,
        "compute_fraction": (compute / median_step) if steps and config.sync_phases else None,
        "device_busy_fraction": (sum(nvml.values) / len(nvml.values) / 100.0) if nvml.values else None,
        "device_busy_reason": nvml.reason,
        "instrumentation_overhead_fraction": (overhead / median_step) if steps else None,
        "compile": compile_info,
        "transfer": {"bytes_h2d_per_batch": store.stats.mean_bytes_per_batch,
                     "bytes_h2d_total": store.stats.bytes_h2d, "device_feature_bytes": store.device_bytes()},
        "accuracy": {**accuracy, "final_loss": losses[-1] if losses else None},
        "memory": {"host_peak_bytes": _host_peak_bytes(),
                   "device_peak_bytes": torch.cuda.max_memory_allocated(device) if device.type == "cuda" else None},
        "batch_cache": dataclasses.asdict(source.cache.stats) if hasattr(source, "cache") else None,
    }
    if not timer.step_seconds:
        result["warnings"] = [f"no steps measured: {step} steps ran and the first {config.warmup_steps} are "
                              "warm-up; run more epochs, fewer warm-up steps or smaller batches"]
    if out:
        write_json_atomic(out, result)
    return result


def _aggregator(edge_index, n_id, e_id, norm: GCNNorm | None, flags: Flags, precision: Precision,
                num_nodes: int | None = None, deg_full=None) -> Aggregator:
    """The batch's aggregator.

    With a cached (full-graph) GCN normalization, each sampled edge keeps its
    cached coefficient, rescaled by ``deg / sampled`` of its target so that the
    sum over the sampled neighbours estimates the full-neighbourhood sum
    without bias; on the full graph the scale is 1 and the result equals the
    recomputed normalization exactly. GraphSAINT batches use this estimator
    too (GraphSAINT's own per-edge ``alpha_uv`` normalization, estimated from
    a 20x-coverage pre-pass, made training diverge to chance accuracy here:
    its variance on hub edges is too high). Without a cache the batch
    subgraph is normalized anew at every layer (PyG's ``GCNConv(cached=False)``).
    """
    n = n_id.numel() if num_nodes is None else num_nodes
    gcn_weights = None
    if norm is not None:
        w = norm.edge_weight if e_id is None else norm.edge_weight.index_select(0, e_id)
        if e_id is not None and deg_full is not None:
            dst = edge_index[1]
            sampled = torch.bincount(dst, minlength=n).clamp_min_(1)
            scale = deg_full.index_select(0, n_id).to(w.dtype) / sampled.to(w.dtype)
            w = w * scale.index_select(0, dst)
        s = norm.self_weight if num_nodes is not None else norm.self_weight.index_select(0, n_id)
        fixed = GCNNorm(w, s)
        gcn_weights = lambda: fixed  # noqa: E731 - cached: no recomputation per layer
    return Aggregator(edge_index, n, mode=flags.aggregation, gcn_weights=gcn_weights,
                      dtype=precision.aggregation_dtype)


@torch.no_grad()
def _evaluate_links(model, prepared, full_graph, device, flags, precision, norm, *, seed: int) -> tuple[dict, float]:
    """Full-neighbourhood embeddings on the training graph; held-out positives against fixed negatives."""
    t0 = time.perf_counter()
    model.eval()
    g = prepared.graph
    n_id = torch.arange(g.num_nodes, device=device)
    agg = _aggregator(prepared.edge_index.to(device), n_id, None, norm, flags, precision,
                      num_nodes=g.num_nodes)
    z = model(g.x.to(device), agg, precision).float().cpu()
    out: dict = {"metric": "auc"}
    for split, pos in (("val", full_graph.lp_val_pos), ("test", full_graph.lp_test_pos)):
        if pos is None or pos.numel() == 0:
            out[split] = float("nan")
            continue
        neg = evaluation_negatives(full_graph.edge_index, full_graph.num_nodes, max(pos.size(1), 4 * HITS_K),
                                   seed=seed + (1 if split == "val" else 2))
        ps = (z[pos[0]] * z[pos[1]]).sum(-1)
        ns = (z[neg[0]] * z[neg[1]]).sum(-1)
        out[split] = auc(ps, ns)
        out[f"{split}_hits@{HITS_K}"] = hits_at_k(ps, ns, HITS_K)
    return out, time.perf_counter() - t0


@torch.no_grad()
def _evaluate(model, prepared, graph, device, flags, precision, norm) -> tuple[float, float, float]:
    """Full-neighbourhood evaluation on the whole graph: no sampling noise."""
    t0 = time.perf_counter()
    model.eval()
    x = graph.x.to(device)
    edge_index = prepared.edge_index.to(device)
    n_id = torch.arange(graph.num_nodes, device=device)
    agg = _aggregator(edge_index, n_id, None, norm, flags, precision, num_nodes=graph.num_nodes)
    pred = model(x, agg, precision).argmax(dim=-1).cpu()
    val = float((pred[graph.val_mask] == graph.y[graph.val_mask]).float().mean())
    test = float((pred[graph.test_mask] == graph.y[graph.test_mask]).float().mean())
    return val, test, time.perf_counter() - t0
