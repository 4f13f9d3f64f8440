"""The verdict of a watch: the measured steps turned into a :class:`~gnnbench.advice.watch.report.WatchReport`
(phase medians, bottleneck, the advice in the user's own terms, :data:`IN_YOUR_LOOP`, and the ``gnnbench
compare`` command that verifies it on a twin of their graph); :class:`Watch` gets it from :class:`Verdict`."""

from __future__ import annotations

import statistics
from typing import Any

import torch

from gnnbench import registry
from gnnbench.advice.op_profile import HOT_OP_SHARE, OpProfile, attribute_ops
from gnnbench.advice.rules import Finding, allocation_finding, classify
from gnnbench.advice.watch.patches import COST_KINDS
from gnnbench.advice.watch.report import WATCH_PHASES, Advice, WatchReport, measured_overhead
from gnnbench.flags import Flags
from gnnbench.process import ALLOCATORS, allocator_in_effect, in_effect, shell_prefix
from gnnbench.process.allocators import allocator_unavailable

# the phases in which the loop waits for its next batch (the loader's next(), split where it could be)
_DATA_WAIT = ("wait", "sample", "gather", "transform")
# watch phases -> the bottleneck groups of advice.diagnose (the loader's undivided wait counts as sampling: it
# holds the sampler and the feature gather of the workers, and the advice for it is the loader's; so does the
# user's transform, loader-side work that workers parallelize)
_GROUP_OF = {
    "wait": "sampling",
    "sample": "sampling",
    "transform": "sampling",
    "gather": "features",
    "transfer": "features",
    "forward": "kernels",
    "backward": "kernels",
    "optimizer": "kernels",
}

# Registry entry -> the setting of a user's own PyG / PyTorch loop that gives it (the registry entry measures it)
IN_YOUR_LOOP = {
    "int32": "keep edge_index / the CSR as int32 where the kernels accept it (torch.sparse_csr_tensor, pyg-lib)",
    "cached_norm": "GCNConv(..., cached=True) in a full-batch loop (the normalization is computed once)",
    "csr": "build the CSR once (T.ToSparseTensor() or data.csr()) instead of converting per batch",
    "fanout": "NeighborLoader(num_neighbors=[...]) with a smaller last hop (fewer sampled nodes per batch)",
    "labor": "LABOR sampling (DGL GraphBolt's LaborSampler; in PyG, a sampler that shares one variate per "
    "source across the batch): fewer distinct vertices per batch",
    "workers": "DataLoader / NeighborLoader(num_workers=k) with k below the cores the model's threads leave free "
    "(torch.set_num_threads(cores - k)): sampling in worker processes",
    "workers_split": "NeighborLoader(num_workers=1) with torch.set_num_threads(cores - 1) and the worker pinned to a "
    "core of its own (loader.enable_cpu_affinity(), or worker_init_fn pinning with "
    "os.sched_setaffinity): sampling overlapped on its own core",
    "persistent_workers": "persistent_workers=True on the loader (workers kept between epochs)",
    "prefetch": "prefetch_factor=4 on the loader (more batches in flight per worker)",
    "pin_memory": "pin_memory=True on the loader and batch.to(device, non_blocking=True)",
    "batch_cache": "reuse each epoch's sampled batches for a few epochs (store the loader's output)",
    "cluster_gcn": "ClusterData + ClusterLoader (Cluster-GCN subgraph batches)",
    "graphsaint": "GraphSAINTRandomWalkSampler (GraphSAINT subgraph batches)",
    "full_batch": "train full batch: model(data.x, data.edge_index) on the whole graph, no loader",
    "features_on_device": "data.x moved to the device once, before the loop (the loader slices it there)",
    "fp16_features": "data.x stored as float16 (upcast inside the model): half the feature bytes gathered",
    "hot_cold": "the training nodes' features on the device, the rest in pinned host memory",
    "uva": "features in pinned host memory read by the device directly (UVA zero-copy)",
    "feature_prefetch": "copy the next batch's features on a side CUDA stream while this one trains",
    "gpu_sampling": "sample on the GPU (pyg-lib's CUDA sampler, or the CSR on the device)",
    "uva_sampling": "the CSR in pinned host memory, sampled by the device (UVA)",
    "pipelined_loader": "a producer thread that samples the next batch while this one trains",
    "sparse_agg": "a sparse adjacency instead of edge_index scatter: T.ToSparseTensor() / SparseTensor "
    "or a torch.sparse_csr_tensor in the convolutions",
    "norm_estimator": "GraphSAINT's normalization estimates for sampled subgraphs",
    "partial_amp": "torch.autocast(device_type, dtype=torch.bfloat16) around the linear layers only, "
    "the aggregation in float32",
    "full_amp": "torch.autocast around the whole forward (aggregation in low precision too)",
    "fast_dropout": "dropout fused into the layer (F.dropout(..., inplace=True) or a fused kernel)",
    "compile": "model = torch.compile(model)",
    "degree_negatives": "negatives drawn in proportion to node degree "
    "(LinkNeighborLoader(neg_sampling=NegativeSampling('binary', weight=deg)))",
    "unchecked_negatives": "negatives drawn without rejecting training positives (PyG's default)",
    "data_parallel": "DistributedDataParallel over several processes, seeds split per rank",
    "topk_compression": "top-k gradient compression in DDP (a communication hook)",
    "fp16_compression": "DDP's fp16_compress_hook",
    "powersgd": "DDP's PowerSGD communication hook",
    "partition_metis": "METIS partitions, one per rank (torch_geometric.loader.ClusterData per rank)",
    "partition_degree": "degree-bucket partitions, one per rank",
    # the process: set in the environment the script starts with (the library's path as found on this machine)
    **{
        name: f"start the script as `{shell_prefix(name)} python train.py` ({ALLOCATORS[name].description})"
        for name in ("glibc_tuned", "tcmalloc", "jemalloc", "jemalloc_pyg")
    },
}


def _quartiles(xs: list[float]) -> dict[str, float]:
    q = statistics.quantiles(xs, n=4) if len(xs) > 1 else [xs[0]] * 3
    return {
        "median": 1e3 * statistics.median(xs),
        "q1": 1e3 * q[0],
        "q3": 1e3 * q[2],
        "min": 1e3 * min(xs),
        "max": 1e3 * max(xs),
    }


class Verdict:
    """:meth:`report` and the facts it draws on (the loader, the model, the advice that applies); a base of
    :class:`~gnnbench.advice.watch.clock.Watch`, whose state it reads."""

    def report(self) -> WatchReport:
        """The diagnosis of the measured steps (see :class:`WatchReport`)."""
        from gnnbench.advice.rules import PHASE_GROUPS

        if len(self.records) < 2:
            raise ValueError(
                f"watch measured {len(self.records)} step(s) after {self.warmup} warm-up (the loop "
                f"ended {self.seen} steps in); a diagnosis needs at least 2: run more steps or lower "
                "warmup"
            )
        steps = [r["step"] for r in self.records]
        phases = {
            p: statistics.median(r.get(p, 0.0) for r in self.records)
            for p in WATCH_PHASES
            if p != "other"
            if any(p in r for r in self.records)
        }
        other = statistics.median(r["step"] - sum(v for k, v in r.items() if k in WATCH_PHASES) for r in self.records)
        phases["other"] = max(other, 0.0)
        med = statistics.median(steps)
        shares = {g: 0.0 for g in PHASE_GROUPS}
        for p, v in phases.items():
            if p in _GROUP_OF:
                shares[_GROUP_OF[p]] += v / med
        busy = self._busy.mean_fraction() if self._busy is not None else None
        finding = classify(shares, busy_fraction=busy, rules=self.rules)
        report = WatchReport(
            len(self.records),
            self.warmup,
            "sync" if self.sync and self.device.type == "cuda" else "end_to_end",
            str(self.device),
            _quartiles(steps),
            {p: 1e3 * v for p, v in phases.items()},
            shares,
            finding,
        )
        report.device_busy = busy
        report.data_wait_share = sum(phases.get(p, 0.0) for p in _DATA_WAIT) / med
        if self.device.type == "cuda" and busy is None and self._busy is not None:
            report.notes.append(f"no device busy share: {self._busy.reason}; the compute phases stand for it")
        report.loader = self._loader_facts()
        if self._prof_shares is not None:
            report.hot_ops = attribute_ops(self._prof_shares, self._task(), threshold=HOT_OP_SHARE)
        report.process = self._report_process = in_effect(usage=self.usage.summary())
        running = report.process["allocator"]["allocator"]
        report.process["finding"] = allocation_finding(report.process.get("usage"), running, self.rules)
        report.advice = self._advice(finding, self._prof_shares or OpProfile())
        self._short_loop_notes(report)
        if self._costs is not None:
            counts = {
                "event": self.event_counts,
                "pass": self.pass_counts,
                "hook": self.hook_counts,
                "optimizer": self.opt_counts,
                "next": [r.get("batches", 0) for r in self.records],
            }
            report.overhead = sum(self._costs[k] * statistics.median(counts[k]) for k in COST_KINDS) / med
            report.overhead_measured = measured_overhead()
        report.reproduce = self._reproduce(report)
        report.wall_s = self._wall_times()
        if self.backend and self.backend.startswith("gnnbench"):
            report.notes.append(
                f"PyG's NeighborSampler ran on {self.backend}: its sampling times are gnnbench's "
                "sampler's, not pyg-lib's"
            )
        per_step = statistics.median(r.get("batches", 0) for r in self.records)
        if per_step > 1:
            report.notes.append(
                f"{per_step:g} loader batches per optimizer step (gradient accumulation): a step "
                "here is one optimizer step"
            )
        if "wait" in phases and "sample" not in phases and report.loader.get("workers"):
            report.notes.append(
                "the loader samples in worker processes: 'wait' is the main process's wait for "
                "the next batch (the workers' own time overlaps the step)"
            )
        return report

    def _wall_times(self) -> dict[str, float]:
        """Seconds between the marks of :attr:`Watch.timeline`, named by what ran between them, and the report
        up to now (its share of a diagnosis: the operator attribution, the graph twin, the process read-back)."""
        import time

        names = {
            "first step": "setup and first step",
            "warm-up": "warm-up",
            "measured": "measured steps",
            "profiled": "profiled steps",
            "profile analysed": "profile analysis",
            "stopped": "until stopped",
        }
        marks = sorted(self.timeline.items(), key=lambda kv: kv[1])
        out = {names.get(b, b): t1 - t0 for (_, t0), (b, t1) in zip(marks, marks[1:]) if b in names}
        if marks:
            out["report"] = time.perf_counter() - marks[-1][1]
        return out

    def _short_loop_notes(self, report: WatchReport) -> None:
        """Say so when the loop ended before the steps asked for: fewer measured steps, or no profile (the
        advice is then not ranked by operators, :attr:`WatchReport.profiled`)."""
        needed = self.warmup + (self.steps or 0) + self.profile_steps
        if self.steps is not None and len(self.records) < self.steps:
            report.notes.append(
                f"the loop ended after {self.seen} steps: {len(self.records)} measured of the "
                f"{self.steps} asked for (after {self.warmup} warm-up)"
            )
        if self.profile_steps:
            report.profiled = self._prof_shares is not None
            if not report.profiled:
                report.notes.append(
                    f"no profile: the loop ended after {self.seen} steps, before the {self.profile_steps} profiled "
                    f"steps (it needs {needed}: {self.warmup} warm-up + {self.steps} measured + {self.profile_steps} "
                    "profiled); the advice is ranked only by what was measured: run more epochs, or fewer "
                    "--watch-steps"
                )

    def _loader_facts(self) -> dict[str, Any]:
        if not self.loaders:
            return {"type": "none (full batch)"} if self.records else {}
        loader = self.loaders[0]
        facts: dict[str, Any] = {
            "type": type(loader).__name__,
            "workers": getattr(loader, "num_workers", 0),
            "batch_size": getattr(loader, "batch_size", None),
        }
        for name in ("persistent_workers", "pin_memory", "prefetch_factor"):
            if hasattr(loader, name):
                facts[name] = getattr(loader, name)
        sampler = getattr(loader, "node_sampler", None) or getattr(loader, "link_sampler", None)
        if sampler is not None and hasattr(sampler, "num_neighbors"):
            facts["num_neighbors"] = list(sampler.num_neighbors.get_mapped_values())
            facts["sampling backend"] = self.backend
        return facts

    def _task(self) -> str:
        from torch_geometric.loader import LinkLoader

        return "link" if any(isinstance(ld, LinkLoader) for ld in self.loaders) else "node"

    def _convs(self) -> list[Any]:
        from torch_geometric.nn import GCNConv, SAGEConv

        model = self.model if self.model is not None else self.outer_model  # diagnose --script: the one called
        return [m for m in (model.modules() if model is not None else []) if isinstance(m, (GCNConv, SAGEConv))]

    def _not_here(self) -> set[str]:
        """Entries that do not apply to this loop, or that it already uses."""
        from torch_geometric.loader import ClusterLoader, GraphSAINTSampler
        from torch_geometric.nn import GCNConv

        facts = self._loader_facts()
        out = {name for name in IN_YOUR_LOOP if registry.get(name).nproc > 1}
        if self.device.type != "cuda":
            out |= _CUDA_ONLY
        if facts.get("workers"):
            out.add("workers")
        else:
            out |= {"persistent_workers", "prefetch"}  # they need workers first
        if facts.get("persistent_workers"):
            out.add("persistent_workers")
        if facts.get("pin_memory"):
            out.add("pin_memory")
        if not self.loaders:  # a full-batch loop: no loader to tune, no sampled neighbourhood
            out |= {
                "full_batch",
                "workers",
                "persistent_workers",
                "prefetch",
                "pin_memory",
                "batch_cache",
                "pipelined_loader",
                "fanout",
                "cluster_gcn",
                "graphsaint",
                "norm_estimator",
                "feature_prefetch",
                "gpu_sampling",
                "uva_sampling",
                "hot_cold",
                "uva",
            }
        if "num_neighbors" not in facts:
            out |= {"fanout", "labor"}
        from torch_geometric.loader import LinkLoader, NodeLoader

        if self.loaders and not any(
            isinstance(ld, (NodeLoader, LinkLoader, ClusterLoader, GraphSAINTSampler)) for ld in self.loaders
        ):  # a plain DataLoader (graph batches, say)
            out |= _GRAPH_SAMPLING
        data = getattr(self.loaders[0], "data", None) if self.loaders else None
        x = getattr(data, "x", None)
        if isinstance(x, torch.Tensor) and x.device.type != "cpu":
            out.add("features_on_device")
        if isinstance(x, torch.Tensor) and x.dtype in (torch.float16, torch.bfloat16):
            out.add("fp16_features")
        if not (not self.loaders and any(isinstance(m, GCNConv) and not m.cached for m in self._convs())):
            out.add("cached_norm")  # only a full-batch GCN caches its normalization
        if not any(isinstance(ld, GraphSAINTSampler) for ld in self.loaders):
            out.add("norm_estimator")
        if any(isinstance(ld, ClusterLoader) for ld in self.loaders):
            out.add("cluster_gcn")
        if any(isinstance(ld, GraphSAINTSampler) for ld in self.loaders):
            out.add("graphsaint")
        if type(self.model).__name__ == "OptimizedModule":  # torch.compile(model) already
            out.add("compile")
        running = allocator_in_effect()["allocator"]
        for name in IN_YOUR_LOOP:  # an allocator the script runs already, or one this machine cannot load
            allocator = registry.get(name).changes_for(Flags()).get("allocator")
            if allocator is not None and (allocator == running or allocator_unavailable(allocator)):
                out.add(name)
        out.add("unchecked_negatives")  # PyG's link loaders never check their negatives: already the case
        return out

    def _advice(self, finding: Finding, profile: OpProfile) -> list[Advice]:
        """Entries for the bottleneck (then the runner-up) in the user's terms, less what does not apply to the
        loop or it already does; entries credited with more of the profiled steps (the operators in the code
        paths they remove or change, :meth:`OpProfile.credit`) first."""
        skip = self._not_here()
        credit = {opt.name: sum(profile.credit(opt).values()) or None for opt in registry.for_task(self._task())}
        kernel_share = ((getattr(self, "_report_process", None) or {}).get("usage") or {}).get("kernel_share")
        for opt in registry.for_task(self._task()):  # the process's allocator: the kernel's share of the CPU time
            if "allocator" in opt.changes_for(Flags()):
                credit[opt.name] = kernel_share
        out: list[Advice] = []
        for group in (finding.bottleneck, finding.secondary):
            if group is None:
                continue
            for opt in registry.for_task(self._task()):
                if (
                    group in opt.targets
                    and opt.name not in skip
                    and opt.name in IN_YOUR_LOOP
                    and not any(a.entry == opt.name for a in out)
                ):
                    out.append(
                        Advice(opt.name, IN_YOUR_LOOP[opt.name], group, opt.costs_accuracy, credit.get(opt.name))
                    )
        out.sort(key=lambda a: (a.target != finding.bottleneck, a.costs_accuracy, -(a.op_share or 0.0)))
        return out

    def _model_options(self) -> tuple[list[str], str | None]:
        """gnnbench options for the watched model (``--model --hidden --layers``), or why there are none."""
        convs = self._convs()
        from torch_geometric.nn import SAGEConv

        if not convs:
            return [], "the model has no GCNConv or SAGEConv layer: the twin trains gnnbench's default model"
        kinds = {type(c) for c in convs}
        if len(kinds) > 1:
            return [], "the model mixes convolution types: the twin trains gnnbench's default model"
        name = "sage" if SAGEConv in kinds else "gcn"
        hops = len(self._loader_facts().get("num_neighbors") or []) or len(convs)
        options = ["--model", name, "--layers", str(hops)]
        if len(convs) > 1:  # a one-layer model's width is its class count
            options[2:2] = ["--hidden", str(convs[0].out_channels)]
        note = None
        if hops != len(convs):
            note = (
                f"the model has {len(convs)} layers over a {hops}-hop fanout; gnnbench's models have one layer "
                f"per hop, so the twin trains {hops}"
            )
        return options, note

    def _reproduce(self, report: WatchReport) -> str | None:
        """``gnnbench compare`` on a synthetic twin of the watched loader's graph with the first three entries
        of the advice: their time to accuracy against the baseline, measured."""
        loader = self.loaders[0] if self.loaders else None
        data = getattr(loader, "data", None)
        if data is None or not hasattr(data, "num_nodes"):
            report.notes.append(
                "no graph to mimic (the loader holds no PyG Data): gnnbench compare --preset "
                "small measures the same entries on a synthetic graph"
            )
            return None
        from gnnbench.graphs.container import Graph
        from gnnbench.graphs.twin import closest_preset

        try:
            twin = closest_preset(Graph.from_pyg(data))
        except (ValueError, TypeError, AttributeError, RuntimeError) as exc:
            report.notes.append(f"no synthetic twin of the loader's graph ({exc})")
            return None
        parts = ["gnnbench compare", twin["cli"]]
        model, why = self._model_options()
        parts += model
        if why:
            report.notes.append(why)
        facts = report.loader
        if facts.get("num_neighbors"):
            parts.append("--fanout " + ",".join(str(k) for k in facts["num_neighbors"]))
            if not model:
                parts.append(f"--layers {len(facts['num_neighbors'])}")
        if facts.get("batch_size"):
            parts.append(f"--batch-size {facts['batch_size']}")
        if self._task() == "link":
            parts.append("--task link")
        ranked = [a for a in report.advice if report.profiled is not False or a.op_share]  # what was measured
        if ranked:
            parts.append("--flags " + ",".join(a.entry for a in ranked[:3]))
        if self.device.type == "cuda":
            parts.append("--device cuda")
        return " ".join(parts)


# entries of node-level graph sampling (a plain DataLoader of small graphs has none of them)


_GRAPH_SAMPLING = {
    "labor",
    "fanout",
    "cluster_gcn",
    "graphsaint",
    "full_batch",
    "batch_cache",
    "gpu_sampling",
    "uva_sampling",
    "norm_estimator",
    "hot_cold",
    "uva",
    "features_on_device",
    "feature_prefetch",
    "fp16_features",
    "int32",
    "csr",
    "pipelined_loader",
}
_CUDA_ONLY = {"pin_memory", "features_on_device", "hot_cold", "uva", "feature_prefetch", "gpu_sampling", "uva_sampling"}
