"""The environment a result was measured in: versions, device, threads, commit, optional backends."""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import os
import platform
import subprocess
import sys
from pathlib import Path

import torch

__all__ = [
    "environment",
    "optional_backends",
    "resolve_device",
    "code_fingerprint",
    "machine_id",
    "hardware_class",
    "device_memory_bytes",
    "COMPARABLE_KEYS",
    "head_commit",
    "uncommitted_files",
    "commits_since",
]

# What must match for a stored result to stand in for a new measurement (besides the config).
COMPARABLE_KEYS = ("code_fingerprint", "hardware_class", "device_name", "torch", "torch_geometric", "python", "threads")


def _git(args: list[str]) -> str | None:
    """``git args`` in the checkout gnnbench runs from: its output, or ``None`` where git or the checkout is
    missing or the command fails."""
    root = Path(__file__).resolve().parent.parent
    try:
        out = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def head_commit() -> str | None:
    """The commit gnnbench runs from, with ``+dirty`` when tracked files differ from it; ``None`` outside git."""
    sha = _git(["rev-parse", "HEAD"])
    if not sha:
        return None
    return sha + ("+dirty" if _git(["status", "--porcelain", "--untracked-files=no"]) else "")


def uncommitted_files() -> list[str] | None:
    """The tracked files of the checkout gnnbench runs from that differ from its commit; ``None`` outside git."""
    if not _git(["rev-parse", "HEAD"]):
        return None
    status = _git(["status", "--porcelain", "--untracked-files=no"]) or ""
    return [line.split(maxsplit=1)[1] for line in status.splitlines() if len(line.split(maxsplit=1)) == 2]


def commits_since(old: str, new: str) -> int | None:
    """How many first-parent commits lead from ``old`` to ``new`` (0 when they are the same commit); ``None``
    when ``old`` is not in ``new``'s history or git cannot tell (no repository, a shallow clone)."""
    new = new.removesuffix("+dirty")
    if _git(["merge-base", "--is-ancestor", old, new]) is None:
        return None
    count = _git(["rev-list", "--first-parent", "--count", f"{old}..{new}"])
    return int(count) if count and count.isdigit() else None


@functools.lru_cache(maxsize=None)
def code_fingerprint() -> str:
    """A hash of gnnbench's own source files (paths and contents): changes with any edit to the package,
    committed or not."""
    root = Path(__file__).resolve().parent
    h = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        h.update(str(path.relative_to(root)).encode())
        h.update(b"\0")
        h.update(path.read_bytes())
        h.update(b"\0")
    return h.hexdigest()[:16]


@functools.lru_cache(maxsize=None)
def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "cpu"


def machine_id() -> str:
    """This machine: host name, CPU model, logical cores (recorded with every result)."""
    return f"{platform.node()}|{_cpu_model()}|{os.cpu_count()}"


def hardware_class() -> str:
    """The class of machine results compare by: CPU model, logical cores and memory (GiB), without the host
    name, so a sweep's rounds may run on several identical machines (``compare --executor slurm``) and stay one
    sweep, while results from machines of another class are refused."""
    gib = round(device_memory_bytes("cpu") / 2**30) if device_memory_bytes("cpu") else "?"
    return f"{_cpu_model()}|{os.cpu_count()} cores|{gib} GiB"


def optional_backends() -> dict[str, bool]:
    """Which optional libraries are importable here."""
    names = ["pyg_lib", "torch_sparse", "torch_scatter", "pymetis", "pynvml", "asv", "pytest_benchmark"]
    return {n: importlib.util.find_spec(n) is not None for n in names}


def resolve_device(device: str | None) -> torch.device:
    """``None``/"auto" -> CUDA when present, else CPU; an explicit CUDA request without CUDA is an error."""
    if device in (None, "auto"):
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(device)
    except RuntimeError:
        raise ValueError(f"unknown device {device!r}; accepted: cpu, cuda, cuda:N, auto") from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device {device!r} requested but CUDA is not available here (torch {torch.__version__})")
    if dev.type not in ("cpu", "cuda"):
        raise ValueError(f"unsupported device {device!r}; accepted: cpu, cuda, cuda:N, auto")
    return dev


def environment(device: torch.device | str = "cpu") -> dict:
    """Versions, device and threads, for every result."""
    import torch_geometric

    dev = torch.device(device)
    info = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "torch_geometric": torch_geometric.__version__,
        "cuda": torch.version.cuda,
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "threads": torch.get_num_threads(),
        "device": str(dev),
        "device_name": torch.cuda.get_device_name(dev) if dev.type == "cuda" else _cpu_model(),
        "commit": head_commit(),
        "code_fingerprint": code_fingerprint(),
        "machine": machine_id(),
        "hardware_class": hardware_class(),
        "argv": sys.argv[:],
        "optional_backends": optional_backends(),
    }
    return info


def device_memory_bytes(device: str) -> int:
    """One device's memory: the GPU's, or on a CPU the machine's (``/proc/meminfo``'s MemTotal)."""
    if device.startswith("cuda") and torch.cuda.is_available():
        return torch.cuda.get_device_properties(torch.device(device)).total_memory
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
