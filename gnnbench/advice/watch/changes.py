"""The changes ``diagnose --script --verify`` applies to an unmodified script, each tied to the registry entry it
corresponds to (:class:`ScriptChange`, :func:`change_for`), and how a child process applies one while the script
runs (:func:`applied`).

A change is applied from the outside, at points the watch already patches or hooks, never by editing the
script:

- **loader settings** (``workers``, ``workers_split``, ``persistent_workers``, ``prefetch``, ``pin_memory``):
  keyword arguments set at the construction of every ``torch.utils.data.DataLoader`` the script builds (PyG's
  loaders are ``DataLoader`` subclasses and pass theirs through; with workers a PyG loader also gets
  ``filter_per_worker=True``, so the workers gather the features too); with workers on a CPU the script's intra-op
  threads are cut to the cores the workers leave (``torch.set_num_threads``), and ``workers_split`` pins each
  worker to a core of its own;
- **the process** (``glibc_tuned``, ``tcmalloc``, ``jemalloc``, ``jemalloc_pyg``): the environment the child
  process starts with (:func:`gnnbench.process.child_environment`), read back from it;
- **the model** (``compile``, ``full_amp``, ``partial_amp``, ``sparse_agg``): the outermost module with
  parameters, at its first call in grad mode (a training forward), gets ``torch.compile`` of its ``forward``
  (dynamic shapes), or ``torch.autocast`` (bf16 on the CPU, fp16 on CUDA) around its whole ``forward`` or around
  each ``nn.Linear`` inside it (the output cast back to float32, so the aggregation stays in float32); with
  ``sparse_agg`` each of its calls gets its ``edge_index`` as a CSR ``adj_t`` (what ``T.ToSparseTensor`` makes),
  where every convolution of the model is one whose sparse path was checked equal (:data:`SPARSE_CONVS`);
- **dropout** (``fast_dropout``): ``torch.nn.functional.dropout`` (what ``nn.Dropout`` and PyG's models call)
  replaced, while training and not in place, by the kernel the ``fast_dropout`` entry uses
  (:func:`gnnbench.models.nets.uniform_dropout`: one vectorized uniform draw compared with ``p``, where ATen's CPU
  ``bernoulli_`` draws element by element); the same distribution of masks, other random numbers, so its loss is
  compared as a numerics change's.

Every other entry is refused with the reason (:data:`REFUSED`), never measured as a no-op; a change that finds
nothing to apply to in the script (no loader built, no model called) fails its run with that reason.
"""

from __future__ import annotations

import functools
from contextlib import ExitStack
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Callable

import torch

from gnnbench.process import ALLOCATORS, shell_prefix
from gnnbench.process.allocators import allocator_unavailable
from gnnbench.process.threads import WorkerPin, usable_cores

# entries --verify cannot apply to a running script without editing it, and why
REFUSED = {
    "int32": "int32 indices are a storage choice inside PyG's sampler and kernels, not a setting of the script",
    "csr": "the CSR is built inside PyG's loader; the script has no setting for it",
    "cached_norm": "GCNConv(cached=True) is an argument of the script's own layer constructor",
}


@dataclass(frozen=True)
class ScriptChange:
    """One variant of the script: what is set, and the lines a user would edit to make it theirs."""

    label: str  # the variant's name in the tables (the entry's name, or "workers=3" on the curve)
    entries: tuple[str, ...]  # the registry entries it measures
    loader: dict[str, Any] = field(default_factory=dict)  # DataLoader keyword arguments set at construction
    pyg_loader: dict[str, Any] = field(default_factory=dict)  # PyG NodeLoader / LinkLoader keyword arguments
    intra_op: int | None = None  # torch.set_num_threads in the script's process (None: untouched)
    pin_workers: bool = False  # each loader worker pinned to a core of its own (the last cores)
    allocator: str | None = None  # the allocator the child process starts with (None: glibc's defaults)
    compile: bool = False  # torch.compile of the outermost model's forward
    precision: str | None = None  # "full": autocast around the forward; "partial": around each nn.Linear
    sparse: bool = False  # the model's edge_index argument passed as a sparse adjacency (CSR adj_t)
    dropout: bool = False  # F.dropout replaced by the fast_dropout entry's kernel (one uniform draw)
    numerics: bool = False  # whether it may change the numbers the script computes (its loss is compared)
    edit: tuple[str, ...] = ()  # what to change in the script (or its command line)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "ScriptChange":
        d = dict(d)
        for key in ("entries", "edit"):
            d[key] = tuple(d.get(key, ()))
        return cls(**d)

    def combined(self, other: "ScriptChange") -> "ScriptChange":
        """Both changes at once (the later one's settings win where both set one)."""
        return ScriptChange(
            f"{self.label}+{other.label}",
            self.entries + other.entries,
            {**self.loader, **other.loader},
            {**self.pyg_loader, **other.pyg_loader},
            other.intra_op if other.intra_op is not None else self.intra_op,
            self.pin_workers or other.pin_workers,
            other.allocator or self.allocator,
            self.compile or other.compile,
            other.precision or self.precision,
            self.sparse or other.sparse,
            self.dropout or other.dropout,
            self.numerics or other.numerics,
            self.edit + other.edit,
        )


def low_precision(device: str) -> torch.dtype:
    """The autocast dtype of ``device``: fp16 on CUDA, bf16 on the CPU (as the registry's amp entries)."""
    return torch.float16 if device.startswith("cuda") else torch.bfloat16


def worker_change(
    k: int, *, cores: int | None = None, pin: bool = False, label: str | None = None, entry: str = "workers"
) -> ScriptChange:
    """``num_workers=k`` with the intra-op threads of the script's process cut to the cores the workers leave
    (at least one)."""
    n = cores if cores is not None else len(usable_cores())
    threads = max(1, n - k) if k else None
    edit = [
        f"num_workers={k}"
        + (", persistent_workers=True" if k else "")
        + " in the loader's constructor"
        + (" (a PyG loader: also filter_per_worker=True, the features gathered in the workers)" if k else "")
    ]
    if threads is not None:
        edit.append(f"torch.set_num_threads({threads}) at the top of the script ({n} usable cores - {k} workers)")
    if pin and k:
        edit.append(
            "each worker pinned to its own core: loader.enable_cpu_affinity() (PyG), or a worker_init_fn "
            "calling os.sched_setaffinity"
        )
    loader: dict[str, Any] = {"num_workers": k}
    if k:
        loader["persistent_workers"] = True  # workers forked once, not each epoch (what a user would write)
    return ScriptChange(
        label or (entry if not pin else "workers_split"),
        (entry,),
        loader,
        {"filter_per_worker": True} if k else {},
        threads,
        pin,
        edit=tuple(edit),
    )


def change_for(
    entry: str, *, device: str = "cpu", loader: dict[str, Any] | None = None, cores: int | None = None
) -> ScriptChange | str:
    """The change that measures registry entry ``entry`` in the script, or why it cannot be applied.

    Args:
        entry: The registry entry's name.
        device: The device the script trains on.
        loader: What the diagnosis saw of the script's loader (``WatchReport.loader``: type, workers, ...).
        cores: Usable cores (default: this process's).
    """
    loader = loader or {}
    has_loader = bool(loader) and loader.get("type") != "none (full batch)"
    workers = int(loader.get("workers") or 0)
    n = cores if cores is not None else len(usable_cores())
    if entry in REFUSED:
        return REFUSED[entry]
    if entry in ("workers", "workers_split", "persistent_workers", "prefetch", "pin_memory"):
        if not has_loader:
            return "the script iterates no DataLoader (a full-batch loop): there is no loader to set"
        if entry == "pin_memory":
            if not device.startswith("cuda"):
                return "pinned memory speeds host-to-device copies; this script trains on the CPU"
            return ScriptChange(
                "pin_memory",
                (entry,),
                {"pin_memory": True},
                edit=("pin_memory=True in the loader's constructor, batch.to(device, non_blocking=True)",),
            )
        if entry in ("persistent_workers", "prefetch"):
            if not workers:
                return f"{entry} needs loader workers, and the script's loader has none (try workers first)"
            if entry == "persistent_workers":
                return ScriptChange(
                    entry,
                    (entry,),
                    {"persistent_workers": True},
                    edit=("persistent_workers=True in the loader's constructor",),
                )
            return ScriptChange(
                entry, (entry,), {"prefetch_factor": 4}, edit=("prefetch_factor=4 in the loader's constructor",)
            )
        if workers:
            return f"the script's loader has {workers} workers already"
        if n < 2:
            return f"loader workers need a core of their own beside the model's; this process may use {n}"
        if entry == "workers_split":
            return worker_change(1, cores=n, pin=True, entry=entry)
        return worker_change(max(1, min(4, n // 2)), cores=n)
    if entry in ALLOCATORS:
        reason = allocator_unavailable(entry)
        if reason:
            return reason
        return ScriptChange(
            entry, (entry,), allocator=entry, edit=(f"start the script as `{shell_prefix(entry)} python train.py`",)
        )
    if entry == "sparse_agg":
        return ScriptChange(
            entry,
            (entry,),
            sparse=True,
            numerics=True,
            edit=(
                "transform=T.ToSparseTensor(layout=torch.sparse_csr) on the loader (or the dataset), and "
                "model(batch.x, batch.adj_t) where the script calls model(batch.x, batch.edge_index)",
            ),
        )
    if entry == "fast_dropout":
        return ScriptChange(
            entry,
            (entry,),
            dropout=True,
            numerics=True,
            edit=(
                "F.dropout(x, p, training) replaced by one uniform draw compared with p: "
                "x * (torch.rand_like(x) >= p) / (1 - p) while training (gnnbench.models.uniform_dropout; "
                "nn.Dropout layers: call it in the model's forward instead)",
            ),
        )
    if entry == "compile":
        return ScriptChange(
            entry,
            (entry,),
            compile=True,
            numerics=True,
            edit=("model = torch.compile(model, dynamic=True) after building the model",),
        )
    if entry in ("full_amp", "partial_amp"):
        dtype = str(low_precision(device))
        kind = device.split(":")[0]
        if entry == "full_amp":
            edit = (
                f"with torch.autocast({kind!r}, dtype={dtype}): around the forward call "
                "(out = model(...)), the loss outside it",
            )
        else:
            edit = (
                f"with torch.autocast({kind!r}, dtype={dtype}): around each nn.Linear's call inside the model "
                "(or the layer's lin), its output .float() before the aggregation",
            )
        return ScriptChange(
            entry, (entry,), precision="full" if entry == "full_amp" else "partial", numerics=True, edit=edit
        )
    return "not a setting --verify can apply to a running script (measure it with gnnbench compare on a twin)"


# ---------------------------------------------------------------------------------------- applied in the child
class SparseRefused(BaseException):
    """Raised from the model's first training call when its convolutions cannot take a sparse adjacency: a
    ``BaseException``, so the script's own ``except Exception`` cannot swallow it and measure a no-op."""


class _Applied:
    """What a child applied, counted (a change that found nothing to apply to fails its run)."""

    def __init__(self) -> None:
        self.loaders = 0  # DataLoaders built with the change's settings
        self.models = 0  # models whose forward was compiled or autocast
        self.linears = 0  # nn.Linear layers autocast (partial)
        self.dropouts = 0  # dropout calls given the fast kernel


def _patch_loader_construction(stack: ExitStack, change: ScriptChange, applied: _Applied) -> None:
    from torch.utils.data import DataLoader

    original = DataLoader.__dict__["__init__"]
    worker_cores = tuple(usable_cores()[-change.loader.get("num_workers", 0) :]) if change.pin_workers else ()

    @functools.wraps(original)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        kwargs.update(change.loader)
        if not kwargs.get("num_workers"):
            kwargs.pop("persistent_workers", None)
            kwargs.pop("prefetch_factor", None)
        elif worker_cores:
            kwargs["worker_init_fn"] = WorkerPin(worker_cores, kwargs.get("worker_init_fn"))
        applied.loaders += 1
        original(self, *args, **kwargs)

    DataLoader.__init__ = __init__
    stack.callback(setattr, DataLoader, "__init__", original)


def _patch_pyg_loader_construction(stack: ExitStack, change: ScriptChange) -> None:
    """PyG's ``NodeLoader`` / ``LinkLoader`` (every Neighbor / LinkNeighbor loader) built with the change's
    PyG-only settings (``filter_per_worker``); they pass the rest on to ``DataLoader``."""
    from torch_geometric.loader import LinkLoader, NodeLoader

    for cls in (NodeLoader, LinkLoader):
        original = cls.__dict__["__init__"]

        def __init__(self: Any, *args: Any, _original: Callable = original, **kwargs: Any) -> None:
            kwargs.update(change.pyg_loader)
            _original(self, *args, **kwargs)

        cls.__init__ = functools.wraps(original)(__init__)
        stack.callback(setattr, cls, "__init__", original)


def _autocast(fn: Callable, device: str, *, to_float: bool) -> Callable:
    dtype = low_precision(device)
    kind = device.split(":")[0]

    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> Any:
        with torch.autocast(kind, dtype=dtype):
            out = fn(*args, **kwargs)
        return out.float() if to_float and isinstance(out, torch.Tensor) else out

    return run


def _linear_types() -> tuple[type, ...]:
    """``nn.Linear`` and PyG's own ``Linear`` (what its convolutions' ``lin`` layers are)."""
    try:
        from torch_geometric.nn.dense.linear import Linear
    except ImportError:
        return (torch.nn.Linear,)
    return (torch.nn.Linear, Linear)


# The convolutions whose sparse-adjacency path computes what their edge_index path computes (checked by
# tests/advice/test_verify_script.py); a model with any other message-passing layer is refused, with the reason.
SPARSE_CONVS = ("SAGEConv", "GCNConv")
# GCNConv adds self-loops to a sparse adjacency on top of the graph's own, and only the missing ones to an
# edge_index: the two agree on a graph without self-loops, which is checked at every call
GCN_LOOPS = (
    "GCNConv adds a self-loop to every node of a sparse adjacency, on top of those edge_index has, where "
    "its edge_index path adds only the missing ones: with self-loops in the graph the two compute "
    "different things (remove them, or GCNConv(add_self_loops=False))"
)
SPARSE_WHY = {
    "GATConv": "GATConv weighs each edge by an attention coefficient computed from its two endpoints: it has no "
    "fused sparse-matrix product, so a sparse adjacency cannot remove its per-edge gather and scatter",
    "GATv2Conv": "GATv2Conv weighs each edge by attention computed from its two endpoints: no fused sparse product",
}


def sparse_refusal(model: torch.nn.Module) -> str | None:
    """Why ``model``'s convolutions cannot take a sparse adjacency here, or ``None``."""
    from torch_geometric.nn.conv import MessagePassing

    convs = [m for m in model.modules() if isinstance(m, MessagePassing)]
    if not convs:
        return "the model has no PyG message-passing layer to pass a sparse adjacency to"
    other = sorted({type(c).__name__ for c in convs} - set(SPARSE_CONVS))
    if other:
        why = "; ".join(
            SPARSE_WHY.get(name, f"{name}: its sparse-adjacency path is not checked equal to its edge_index path here")
            for name in other
        )
        return f"{why} (applied to {', '.join(SPARSE_CONVS)} only)"
    return None


def _adds_loops(model: torch.nn.Module) -> bool:
    """Whether a convolution of ``model`` adds self-loops to a sparse adjacency (GCNConv's default)."""
    from torch_geometric.nn import GCNConv

    return any(isinstance(m, GCNConv) and m.add_self_loops and m.normalize for m in model.modules())


def _to_adj_t(args: tuple, *, no_loops: bool = False) -> tuple | None:
    """``args`` of a model call with its ``edge_index`` (the first ``[2, E]`` integer tensor after the features)
    as a CSR ``adj_t`` over the features' rows (rows are targets; duplicate edges merged), or ``None``; with
    ``no_loops``, an ``edge_index`` with self-loops is refused (:data:`GCN_LOOPS`)."""
    from torch_geometric.utils import coalesce, to_torch_csr_tensor

    if not args or not isinstance(args[0], torch.Tensor):
        return None
    n = args[0].size(0)
    for i, a in enumerate(args[1:], 1):
        if (
            isinstance(a, torch.Tensor)
            and a.dim() == 2
            and a.size(0) == 2
            and not a.is_floating_point()
            and not a.is_sparse
            and a.layout == torch.strided
        ):
            if no_loops and bool((a[0] == a[1]).any()):
                raise SparseRefused(GCN_LOOPS)
            adj_t = to_torch_csr_tensor(coalesce(a.flip(0), num_nodes=n), size=(n, n))
            return (*args[:i], adj_t, *args[i + 1 :])
    return None


def _patch_model(stack: ExitStack, change: ScriptChange, applied: _Applied) -> None:
    """At the first training call of the outermost module with parameters: its forward compiled and/or
    autocast (the instance's ``forward`` attribute, which the module's call reads from the next call on); with
    ``sparse``, every call of that module gets its ``edge_index`` as a sparse adjacency."""
    from torch.nn.modules.module import register_module_forward_hook, register_module_forward_pre_hook

    depth = [0]
    done: list[torch.nn.Module] = []
    loops = [False]  # the model adds self-loops to a sparse adjacency: edge_index must have none

    def pre(module: torch.nn.Module, args: Any) -> Any:
        depth[0] += 1
        if depth[0] != 1:
            return None
        if done and change.sparse and module is done[0]:
            return _to_adj_t(args, no_loops=loops[0])
        if done or not torch.is_grad_enabled():
            return None
        p = next(iter(module.parameters()), None)
        if p is None:
            return None
        if change.sparse:
            why = sparse_refusal(module)
            if why:
                raise SparseRefused(why)
        device = str(p.device)
        forward = module.forward
        if change.precision == "partial":
            for lin in module.modules():
                if isinstance(lin, _linear_types()):
                    lin.forward = _autocast(lin.forward, device, to_float=True)
                    applied.linears += 1
        elif change.precision == "full":
            forward = _autocast(forward, device, to_float=False)
        if change.compile:
            forward = torch.compile(forward, dynamic=True)
        if forward is not module.forward:
            module.forward = forward
        done.append(module)
        applied.models += 1
        if change.sparse:
            loops[0] = _adds_loops(module)
            converted = _to_adj_t(args, no_loops=loops[0])
            if converted is None:
                raise SparseRefused("the model's call has no edge_index ([2, E] integer tensor) to convert")
            return converted
        return None

    def post(module: torch.nn.Module, args: Any, output: Any) -> None:
        depth[0] -= 1

    for h in (register_module_forward_pre_hook(pre), register_module_forward_hook(post, always_call=True)):
        stack.callback(h.remove)


def _patch_dropout(stack: ExitStack, applied: _Applied) -> None:
    """``F.dropout`` (module attribute, read at each call by ``nn.Dropout`` and PyG's models) given the
    ``fast_dropout`` entry's kernel while training and not in place; other calls (``inplace=True``, evaluation)
    pass through unchanged."""
    import torch.nn.functional as F

    from gnnbench.models.nets import uniform_dropout

    original = F.dropout

    @functools.wraps(original)
    def dropout(input: torch.Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> torch.Tensor:
        if not training or inplace or p <= 0.0 or p >= 1.0 or not isinstance(input, torch.Tensor):
            return original(input, p, training, inplace)
        applied.dropouts += 1
        return uniform_dropout(input, p, training)

    F.dropout = dropout
    stack.callback(setattr, F, "dropout", original)


def applied(stack: ExitStack, change: ScriptChange) -> _Applied:
    """Apply ``change`` (but its allocator, set when the process started) in this process until ``stack``
    closes; the counts of what it applied to."""
    out = _Applied()
    if change.intra_op is not None:
        before = torch.get_num_threads()
        torch.set_num_threads(change.intra_op)
        stack.callback(torch.set_num_threads, before)
    if change.loader:
        _patch_loader_construction(stack, change, out)
    if change.pyg_loader:
        _patch_pyg_loader_construction(stack, change)
    if change.compile or change.precision or change.sparse:
        _patch_model(stack, change, out)
    if change.dropout:
        _patch_dropout(stack, out)
    return out


def not_applied(change: ScriptChange, counts: _Applied) -> str | None:
    """Why ``change`` was not applied to anything in the script that ran, or ``None``."""
    if change.loader and not counts.loaders:
        return "the script built no DataLoader: the loader settings had nothing to apply to"
    if (change.compile or change.precision or change.sparse) and not counts.models:
        return "no module with parameters was called in grad mode: no model to compile or autocast"
    if change.precision == "partial" and not counts.linears:
        return "the model has no nn.Linear (or PyG Linear) layer to autocast"
    if change.dropout and not counts.dropouts:
        return "the script called no dropout while training (F.dropout / nn.Dropout): nothing to replace"
    return None


BASELINE = ScriptChange("baseline", ())


def with_label(change: ScriptChange, label: str) -> ScriptChange:
    return replace(change, label=label)
