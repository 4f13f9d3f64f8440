"""``gnnbench diagnose --script``: an unmodified training script run under a :class:`Watch`, stopped once it
was measured, and diagnosed."""

from __future__ import annotations

import os
import threading
import time
from typing import Any, Callable

from gnnbench.advice.watch.clock import Watch
from gnnbench.advice.watch.report import WatchReport


class ScriptError(Exception):
    """A watched script that raised, or that could not be instrumented (with the piece that was missing)."""


def run_watched(argv: list[str], w: Watch) -> None:
    """Run the unmodified script ``argv[0]`` (with ``argv[1:]`` as its arguments) as ``__main__`` inside the
    watch ``w`` (which stops it once it measured, with ``stop_after``); ``sys.argv`` and ``sys.path`` are put
    back afterwards.

    Raises:
        ScriptError: the script is missing, raised an error, or ended before two measured steps; the message
            names the pieces of a training step that were never seen (loader, forward, backward, optimizer).
    """
    import runpy
    import sys

    if not argv or not os.path.isfile(argv[0]):
        w.timeline.setdefault("stopped", 0.0)  # never started: a watchdog on it ends too
        raise ScriptError(
            f"--script {argv[0]!r} is not a file" if argv else "--script needs the path of a training script"
        )
    path = argv[0]
    saved_argv, saved_path = sys.argv[:], sys.path[:]
    sys.argv = list(argv)
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    try:
        with w:
            runpy.run_path(path, run_name="__main__")
    except SystemExit as exc:
        if exc.code not in (None, 0):
            raise ScriptError(f"{path} exited with status {exc.code} after {w.seen} step(s)") from None
    except Exception as exc:  # the script's own error: reported, with how far it got
        raise ScriptError(f"{path} raised {type(exc).__name__}: {exc} (after {w.seen} step(s))") from exc
    finally:
        sys.argv, sys.path[:] = saved_argv, saved_path
    if len(w.records) < 2:
        missing = [
            piece
            for piece, seen in (
                ("a loader iterated", bool(w.loaders) or w.seen > 0),
                ("a model forward", w.seen_phases.get("forward", False)),
                ("loss.backward()", w.seen_phases.get("backward", False)),
                ("an optimizer step", w.seen > 0),
            )
            if not seen
        ]
        what = (
            f"it never showed {', '.join(missing)}"
            if missing
            else f"it ended after {w.seen} step(s), {w.warmup} of them warm-up"
        )
        raise ScriptError(
            f"{path} could not be diagnosed: {what}; gnnbench watches torch DataLoader / PyG loader "
            "iteration, nn.Module calls, torch.autograd.backward and torch.optim optimizer steps"
        )


def watch_script(
    argv: list[str],
    *,
    steps: int = 30,
    warmup: int = 5,
    sync: bool = False,
    profile_steps: int = 5,
    device: str | None = None,
    wait_bound_s: float | None = None,
) -> WatchReport:
    """Run the unmodified script ``argv[0]`` (with ``argv[1:]`` as its arguments) as ``__main__`` under a
    :class:`Watch` of every loader, the outermost module call and every optimizer; stop it cleanly after
    ``warmup + steps + profile_steps`` steps and diagnose them (``gnnbench diagnose --script``).

    With ``wait_bound_s``, a loader ``next()`` that waits longer ends the process with exit 1 and the loader's
    state on stderr (a hung loader worker never returns).

    Raises:
        ScriptError: as :func:`run_watched`.
    """
    w = Watch(
        None,
        None,
        None,
        warmup=warmup,
        steps=steps,
        sync=sync,
        profile_steps=profile_steps,
        stop_after=True,
        device=device,
    )
    if wait_bound_s:
        import json
        import sys

        watchdog(
            w,
            wait_bound_s,
            lambda r: print(
                f"gnnbench diagnose --script: {r['error']}; loader: {json.dumps(r['loader'], default=str)}",
                file=sys.stderr,
                flush=True,
            ),
        )
    run_watched(argv, w)
    report = w.report()
    if report.advice:
        import shlex

        report.verify_in_script = "gnnbench diagnose --verify --script " + shlex.join(argv)
    return report


def watchdog(w: Watch, bound: float, write: Callable[[dict[str, Any]], None]) -> threading.Thread:
    """A thread that ends the run when one loader ``next()`` waits longer than ``bound`` seconds: it writes the
    loader's state and exits the process with status 1 (a hung worker never returns); the thread ends when the
    watch does."""

    def run() -> None:
        while True:
            time.sleep(min(1.0, bound / 4))
            if w._stack is None and "stopped" in w.timeline:
                return  # the watch is over
            if w._phase == "wait" and time.perf_counter() - w._t_phase > bound:
                facts = w._loader_facts() if w.loaders else {}
                write(
                    {
                        "error": f"the loader's next() waited more than {bound:g} s (step {w.seen + 1}): the run "
                        "was ended; a loader worker hung, died or is starved",
                        "loader": facts,
                        "hung": True,
                    }
                )
                os._exit(1)

    t = threading.Thread(target=run, daemon=True, name="gnnbench-verify-watchdog")
    t.start()
    return t
