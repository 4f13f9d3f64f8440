"""Launch one configuration on N ranks through torchrun, and collect its one result.

:func:`launch` starts ``torchrun`` on the loopback interface with ``N`` ranks of
:mod:`gnnbench.measure.run.rank`; every rank runs the ordinary ``Trainer.steps()`` loop
(:func:`gnnbench.measure.run.single.run`) and rank 0 writes the one result atomically. The backend is gloo
on CPU and NCCL on CUDA, with the process-group ``timeout`` given here. A failed run (a rank that
died, a collective that timed out, the wall timeout) raises :class:`DistributedRunError` with one
line, leaves no result file and no process behind. :func:`run_local` runs a function on spawned gloo
ranks in-process (tests, experiments).

The command line, the failure handling and the multi-machine form: ``docs/distributed.md``.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import re
import signal
import socket
import sys
import tempfile
import time
import traceback
from datetime import timedelta
from pathlib import Path
from typing import Any, Callable

from gnnbench import process
from gnnbench.atomic import write_json_atomic
from gnnbench.flags import Flags
from gnnbench.training.config import RunConfig

__all__ = [
    "launch",
    "DistributedRunError",
    "DEFAULT_TIMEOUT",
    "free_port",
    "local_env",
    "run_local",
    "survivors",
    "rank_threads",
]

DEFAULT_TIMEOUT = 60.0  # seconds a collective (or the rendezvous) may wait before the run fails
WORKER_MODULE = "gnnbench.measure.run.rank"
KILL_GRACE_S = 5.0  # seconds torchrun has after SIGTERM to stop its ranks before its group is killed


class DistributedRunError(RuntimeError):
    """A multi-rank run that failed: one line saying which rank and why."""


def free_port() -> int:
    """A TCP port free on the loopback interface now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rank_threads(environ: dict[str, str] | None = None) -> int:
    """Threads each local rank computes with: ``OMP_NUM_THREADS`` when it is set, else 1, which torchrun
    sets for every rank when it starts more than one per machine (what the ranks' results record)."""
    value = (os.environ if environ is None else environ).get("OMP_NUM_THREADS", "")
    return int(value) if value.isdigit() and int(value) > 0 else 1


def local_env(base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of local ranks: collectives on the loopback interface only."""
    env = dict(os.environ if base is None else base)
    env.setdefault("MASTER_ADDR", "127.0.0.1")
    if Path("/sys/class/net/lo").exists():
        env.setdefault("GLOO_SOCKET_IFNAME", "lo")
    env["PYTHONUNBUFFERED"] = "1"
    return env


def survivors(tag: str) -> list[int]:
    """Pids of live processes whose command line contains ``tag`` (Linux ``/proc``; empty elsewhere)."""
    pids = []
    me = os.getpid()
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if tag in cmd and int(entry.name) != me and state != "Z":
            pids.append(int(entry.name))
    return pids


def _rank_errors(error_dir: Path) -> dict[str, str]:
    """The one-line error each failed rank wrote (``rank<R>.error``), earliest first."""
    files = sorted(error_dir.glob("rank*.error"), key=lambda p: p.stat().st_mtime)
    return {f.stem[len("rank") :]: f.read_text().strip() for f in files if f.read_text().strip()}


def _root_cause(stderr: str) -> tuple[str, str] | None:
    """``(rank, exit)`` of torchrun's "Root Cause (first observed failure)" report, if it printed one."""
    text = stderr[stderr.find("Root Cause") :] if "Root Cause" in stderr else stderr
    rank = code = None
    for line in text.splitlines():
        s = line.strip()
        if s.startswith("rank") and ":" in s and rank is None:
            rank = s.split(":", 1)[1].strip().split()[0]
        if s.startswith("exitcode") and ":" in s and code is None:
            code = s.split(":", 1)[1].strip().split()[0]
    if rank is None or code is None:
        return None
    try:
        if int(code) < 0:
            code = f"{code} (killed by {signal.Signals(-int(code)).name})"
    except (ValueError, KeyError):
        pass
    return rank, code


def _why(stderr: str, error_dir: Path, returncode: int) -> str:
    """One line: the first failed rank (torchrun's root cause) and its own error, else its exit code."""
    errors = _rank_errors(error_dir)
    root = _root_cause(stderr)
    if root is not None:
        rank, code = root
        return errors.get(rank) or f"rank {rank} exited with code {code}"
    if errors:
        return next(iter(errors.values()))
    return f"torchrun exited with code {returncode}: {_last_line(stderr)}"


def launch(
    config: Any,
    out: str | Path,
    *,
    nproc: int | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    wall_timeout: float | None = None,
    python: str | None = None,
) -> dict[str, Any]:
    """Run ``config`` on ``nproc`` local ranks (default ``config.nproc``) through torchrun; return the result.

    Args:
        config: A :class:`~gnnbench.training.config.RunConfig` (or its dict).
        out: Where rank 0 writes the result JSON (atomically; never left behind on failure).
        nproc: Ranks (default: ``config.nproc``).
        timeout: Process-group timeout in seconds: the longest a collective or the rendezvous waits.
        wall_timeout: Seconds after which the whole run is killed (default: from the run's time budget with a
            margin, or an hour without one: :func:`gnnbench.process.budget_timeout`; the process-group timeout
            already bounds a hang in a collective, this one a hang anywhere else).
        python: The interpreter (default: this one).

    Raises:
        ValueError: ``nproc`` below 1, or a ``timeout`` or ``wall_timeout`` that is not positive.
        DistributedRunError: a rank failed or died, a collective timed out, or the run outlived
            ``wall_timeout``; the message is one line.
    """
    cfg = config if isinstance(config, dict) else config.to_dict()
    nproc = int(nproc if nproc is not None else cfg.get("nproc", 1))
    if nproc < 1:
        raise ValueError(f"nproc must be >= 1 (got {nproc})")
    if not timeout > 0:
        raise ValueError(f"the process-group timeout must be > 0 seconds (got {timeout!r})")
    if wall_timeout is None:
        run_config = config if isinstance(config, RunConfig) else RunConfig.from_dict(cfg)
        wall_timeout = process.budget_timeout(run_config.clock_bound)
    elif isinstance(wall_timeout, bool) or not isinstance(wall_timeout, (int, float)) or not wall_timeout > 0:
        raise ValueError(f"wall_timeout must be None or a number of seconds > 0 (got {wall_timeout!r})")
    out = Path(out)
    out.unlink(missing_ok=True)
    with tempfile.TemporaryDirectory(prefix="gnnbench-dist-") as tmp:
        cfg_path = Path(tmp) / "config.json"
        error_dir = Path(tmp) / "errors"
        error_dir.mkdir()
        write_json_atomic(cfg_path, {**cfg, "nproc": nproc})
        cmd = [
            python or sys.executable,
            "-m",
            "torch.distributed.run",
            "--nnodes",
            "1",
            "--node-rank",
            "0",
            "--nproc-per-node",
            str(nproc),
            "--master-addr",
            "127.0.0.1",
            "--master-port",
            str(free_port()),
            "--local-addr",
            "127.0.0.1",
            "--max-restarts",
            "0",
            "--monitor-interval",
            "0.2",
            "-m",
            WORKER_MODULE,
            str(cfg_path),
            str(out),
            "--timeout",
            str(timeout),
            "--error-dir",
            str(error_dir),
        ]
        started = time.monotonic()
        # every rank starts with the configuration's allocator (gnnbench.process)
        env = local_env(process.child_environment(Flags.from_dict(cfg.get("flags") or {})))
        try:  # torchrun in a group of its own: a wall timeout or an interruption ends the whole group
            child = process.run_child(cmd, env=env, timeout=wall_timeout, grace=KILL_GRACE_S)
        except BaseException:  # Ctrl-C or any error here: ranks in sessions of their own must not outlive us
            _reap(str(cfg_path))
            out.unlink(missing_ok=True)
            raise
        elapsed = time.monotonic() - started
        stderr = child.stderr
        if child.timed_out:  # ranks torchrun did not stop: SIGTERM first, so each dumps where it was
            _terminate(str(cfg_path))
        left = _reap(str(cfg_path))
        if child.timed_out or child.returncode != 0 or left:
            out.unlink(missing_ok=True)
            if child.timed_out:
                why = f"the run outlived its wall timeout of {wall_timeout:g} s and was killed"
                why += _where_ranks_were(error_dir)
            else:
                why = _why(stderr, error_dir, child.returncode)
            if left:
                why += f"; killed {len(left)} leftover process(es) {left}"
            raise DistributedRunError(f"{nproc}-rank run failed after {elapsed:.1f} s: {why}")
    try:
        return json.loads(out.read_text())
    except (OSError, ValueError) as exc:
        raise DistributedRunError(
            f"{nproc}-rank run exited cleanly but left no readable result in {out} "
            f"({exc}); torchrun said: {_last_line(stderr)}"
        ) from None


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1] if lines else "(no output)"


def _terminate(tag: str, grace: float = 3.0) -> None:
    """SIGTERM to the run's processes still alive (each rank then writes its stack, :mod:`.rank`); waits for
    them at most ``grace`` seconds."""
    for pid in survivors(tag):
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + grace
    while survivors(tag) and time.monotonic() < deadline:
        time.sleep(0.1)


def _frames(block: str) -> list[str]:
    """``file:line in function`` for each frame of one thread in a :mod:`faulthandler` dump, innermost first."""
    found = re.findall(r'File "([^"]+)", line (\d+) in (\S+)', block)
    return [f"{_short(path)}:{line} in {func}" for path, line, func in found]


def _short(path: str) -> str:
    """A frame's file from its package on (``gnnbench/...``, ``torch/...``), else its name."""
    parts = Path(path).parts
    for root in ("gnnbench", "torch", "torch_geometric"):
        if root in parts:
            return "/".join(parts[len(parts) - 1 - parts[::-1].index(root) :])
    return Path(path).name


def _where_ranks_were(error_dir: Path) -> str:
    """``; where the ranks were: ...``: for each rank that dumped its stack when it was stopped
    (``rank<R>.stack``), each thread inside gnnbench: its innermost frame and its innermost gnnbench frame; or
    that no rank dumped one (torchrun itself hung, or the ranks had left)."""
    parts = []
    for path in sorted(error_dir.glob("rank*.stack")):
        threads = [_frames(b) for b in path.read_text(errors="replace").split("\n\n") if "File " in b]
        ours = [t for t in threads if any(f.startswith("gnnbench/") for f in t)] or threads[:1]
        said = []
        for t in ours:
            inner = next((f for f in t if f.startswith("gnnbench/")), t[0])
            said.append(t[0] if inner == t[0] else f"{t[0]} (from {inner})")
        if said:
            parts.append(f"rank {path.stem[len('rank') :]} in " + " | ".join(said))
    done = sorted(p.stem[len("rank") :] for p in error_dir.glob("rank*.done"))
    after = f"; rank(s) {', '.join(done)} had passed the last collective (a hang in the teardown)" if done else ""
    if not parts:
        return "; no rank dumped its stack (torchrun itself hung, or no rank was alive)" + after
    return "; where the ranks were: " + "; ".join(parts) + after


def _reap(tag: str, grace: float = 5.0) -> list[int]:
    """Processes of the run still alive once torchrun returned: waited for briefly, then killed; their pids."""
    deadline = time.monotonic() + grace
    left = survivors(tag)
    while left and time.monotonic() < deadline:
        time.sleep(0.1)
        left = survivors(tag)
    for pid in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return left


# ----------------------------------------------------------------- in-process ranks (tests, experiments)
def _rank_main(rank: int, world: int, port: int, timeout: float, fn: Callable, args: tuple, result_dir: str) -> None:
    import torch.distributed as dist

    os.environ.update(local_env({}))
    try:
        dist.init_process_group(
            "gloo",
            init_method=f"tcp://127.0.0.1:{port}",
            rank=rank,
            world_size=world,
            timeout=timedelta(seconds=timeout),
        )
        value = fn(rank, world, *args)
        write_json_atomic(Path(result_dir) / f"rank{rank}.json", {"value": value})
    except BaseException as exc:  # noqa: BLE001 - reported to the parent as one line
        write_json_atomic(
            Path(result_dir) / f"rank{rank}.json",
            {"error": f"{type(exc).__name__}: {exc}", "trace": traceback.format_exc()},
        )
        raise SystemExit(1) from None
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


def run_local(
    fn: Callable, world_size: int = 2, *args: Any, timeout: float = 10.0, wall_timeout: float = 120.0
) -> list[Any]:
    """Run ``fn(rank, world_size, *args)`` on ``world_size`` spawned gloo ranks on 127.0.0.1; their
    JSON-ready return values in rank order. ``fn`` must be importable (a module-level function).

    Raises:
        DistributedRunError: a rank raised, died, or the ranks outlived ``wall_timeout`` (all are killed).
    """
    ctx = mp.get_context("spawn")
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="gnnbench-ranks-") as tmp:
        procs = [
            ctx.Process(target=_rank_main, args=(r, world_size, port, timeout, fn, args, tmp))
            for r in range(world_size)
        ]
        for p in procs:
            p.start()
        deadline = time.monotonic() + wall_timeout
        for p in procs:
            p.join(max(0.0, deadline - time.monotonic()))
        hung = [p for p in procs if p.is_alive()]
        for p in hung:
            p.kill()
            p.join()
        values, errors = [], []
        for r, p in enumerate(procs):
            path = Path(tmp) / f"rank{r}.json"
            data = json.loads(path.read_text()) if path.exists() else {"error": f"exit code {p.exitcode}"}
            if "error" in data:
                errors.append(f"rank {r}: {data['error']}")
            values.append(data.get("value"))
        if hung:
            raise DistributedRunError(f"{len(hung)} rank(s) outlived {wall_timeout:g} s and were killed")
        if errors:
            raise DistributedRunError("; ".join(errors))
        return values
