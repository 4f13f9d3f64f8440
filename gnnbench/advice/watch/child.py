"""One measured run of ``diagnose --script --verify``: the user's script, unmodified, with one
:class:`~gnnbench.advice.watch.changes.ScriptChange` applied, under a :class:`~gnnbench.advice.watch.clock.Watch`
stopped after its measured steps; started by :mod:`gnnbench.advice.watch.verify` as
``python -m gnnbench.advice.watch.child SPEC.json`` in a process of its own.

It writes ``spec["out"]`` (JSON): each measured step's seconds, the loss of every ``backward`` call, what the
change applied to, the intra-op threads and the allocator read back from the process, and the loader's facts; or
``error`` with the reason the run failed (the script raised, the change found nothing to apply to, the process
runs another allocator than asked, or the loader's ``next()`` waited longer than ``wait_bound_s``: then the
loader's state is in ``loader`` and the process exits 1 at once).
"""

from __future__ import annotations

import json
import os
import sys
import time
from contextlib import ExitStack
from typing import Any


def _seed(seed: int) -> None:
    """The script's randomness seeded identically in every run of a round (a script that seeds itself wins)."""
    import random

    import numpy as np
    import torch

    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def _record_losses(stack: ExitStack, losses: list[float], rss: list[int]) -> None:
    """Every ``torch.autograd.backward`` of a one-element tensor records its value (the loss at each step) and
    the process's resident memory at that point."""
    import torch

    from gnnbench.host_memory import rss_bytes

    original = torch.autograd.backward

    def backward(*args: Any, **kwargs: Any) -> Any:
        t = args[0] if args else kwargs.get("tensors")
        if isinstance(t, torch.Tensor) and t.numel() == 1:
            losses.append(float(t.detach()))
            rss.append(rss_bytes())
        return original(*args, **kwargs)

    torch.autograd.backward = backward
    stack.callback(setattr, torch.autograd, "backward", original)


def run_child(spec: dict[str, Any]) -> dict[str, Any]:
    """Run the script as ``spec`` says (``argv``, ``change``, ``warmup``, ``steps``, ``seed``,
    ``wait_bound_s``) and return the result (see the module's docstring)."""
    import torch

    from gnnbench.advice.watch.changes import ScriptChange, SparseRefused, applied, not_applied
    from gnnbench.advice.watch.clock import Watch
    from gnnbench.advice.watch.script import ScriptError, run_watched, watchdog
    from gnnbench.process import allocator_in_effect

    change = ScriptChange.from_dict(spec["change"])
    out: dict[str, Any] = {"label": change.label}
    if change.allocator is not None:
        running = allocator_in_effect()["allocator"]
        if running != change.allocator:
            out["error"] = f"allocator {change.allocator!r} asked for, the process runs {running!r}"
            return out
    losses: list[float] = []
    rss: list[int] = []
    _seed(int(spec.get("seed", 0)))
    w = Watch(None, None, None, warmup=int(spec["warmup"]), steps=int(spec["steps"]), stop_after=True)
    threads = {}
    t0 = time.perf_counter()
    with ExitStack() as stack:
        counts = applied(stack, change)
        threads["intra_op"] = torch.get_num_threads()
        _record_losses(stack, losses, rss)
        if spec.get("wait_bound_s"):
            watchdog(w, float(spec["wait_bound_s"]), spec["_write"])
        try:
            run_watched(list(spec["argv"]), w)
        except ScriptError as exc:
            out["error"] = str(exc)
        except SparseRefused as exc:
            out["error"] = f"refused: {exc}"
    marks = w.timeline
    warm_end = marks.get("warm-up", marks.get("first step"))
    out.update(warmup_s=(warm_end - marks["entered"]) if warm_end and "entered" in marks else None)
    out.update(
        wall_s=time.perf_counter() - t0,
        step_s=[r["step"] for r in w.records],
        losses=losses,
        rss=rss,
        warmup=w.warmup,
        seen=w.seen,
        threads=threads,
        allocator=allocator_in_effect()["allocator"],
        loader=w._loader_facts() if w.loaders else {},
        applied={
            "loaders": counts.loaders,
            "models": counts.models,
            "linears": counts.linears,
            "dropouts": counts.dropouts,
        },
    )
    if "error" not in out:
        why = not_applied(change, counts)
        if why:
            out["error"] = f"not applied: {why}"
    return out


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    with open(argv[0]) as f:
        spec = json.load(f)

    def write(result: dict[str, Any]) -> None:
        with open(spec["out"] + ".tmp", "w") as f:
            json.dump(result, f)
        os.replace(spec["out"] + ".tmp", spec["out"])

    spec["_write"] = write
    result = run_child(spec)
    write(result)
    sys.stdout.flush()
    return 1 if "error" in result else 0


if __name__ == "__main__":
    # os._exit: a script's non-daemon threads or loader workers must not keep a finished run alive
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
