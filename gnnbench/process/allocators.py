"""The memory allocator a measured process runs with: what each choice sets when the process starts.

An allocator is chosen before the interpreter starts (``LD_PRELOAD`` of tcmalloc or jemalloc, glibc's
``MALLOC_*`` tunables read at its first ``malloc``), so it cannot be switched inside a running process: a run
whose ``Flags.allocator`` differs from the allocator its process runs with is started again in a child process
with :func:`child_environment` (:mod:`gnnbench.process.placement`), and every result records the allocator its
process really ran with, read back from the process (:mod:`gnnbench.process.readback`).

The choices (``Flags.allocator``):

* ``glibc``: glibc's malloc with its defaults (the baseline): blocks of 128 KiB and more (a threshold glibc
  raises up to 32 MiB as it sees them freed) are mapped and unmapped per allocation, and the heap top above
  128 KiB is returned to the kernel on ``free``, so a step that frees large temporaries faults them back in at
  the next one.
* ``glibc_tuned``: glibc's malloc with the mmap threshold at 1 GiB (blocks stay on the heap), the trim threshold
  at 16 GiB (freed heap stays mapped) and 1 GiB of top pad (the heap grows in large steps): the process keeps its
  peak of freed memory mapped instead of returning it to the kernel.
* ``tcmalloc``: gperftools' tcmalloc (minimal) preloaded, with its defaults.
* ``jemalloc``: jemalloc preloaded with dirty and muzzy page purging off (freed pages are kept for reuse).
* ``jemalloc_pyg``: jemalloc preloaded with the ``MALLOC_CONF`` PyG's own CPU benchmark READMEs set for every run
  (``benchmark/training/README.md``), so a user can see what those settings do on their machine.
"""

from __future__ import annotations

import os
import platform
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Mapping

__all__ = [
    "Allocator",
    "ALLOCATORS",
    "ALLOCATOR_VARIABLES",
    "library_path",
    "child_environment",
    "allocator_unavailable",
    "BASELINE_ALLOCATOR",
    "shell_prefix",
]

BASELINE_ALLOCATOR = "glibc"

# Every variable through which the allocator of a process is chosen or tuned at its start: a child's
# environment drops them all and sets only its own allocator's (a user's LD_PRELOAD of other libraries stays).
ALLOCATOR_VARIABLES = (
    "MALLOC_CONF",
    "MALLOC_MMAP_THRESHOLD_",
    "MALLOC_TRIM_THRESHOLD_",
    "MALLOC_TOP_PAD_",
    "MALLOC_MMAP_MAX_",
    "MALLOC_ARENA_MAX",
    "MALLOC_ARENA_TEST",
    "TCMALLOC_RELEASE_RATE",
    "TCMALLOC_MAX_TOTAL_THREAD_CACHE_BYTES",
)
_PRELOADED = ("tcmalloc", "jemalloc")  # LD_PRELOAD entries naming these are allocators


@dataclass(frozen=True)
class Allocator:
    """One allocator choice.

    Args:
        name: The ``Flags.allocator`` value.
        family: Which library serves ``malloc``: ``"glibc"``, ``"tcmalloc"`` or ``"jemalloc"``.
        library: The shared library preloaded (its soname), or ``""`` for glibc's own malloc.
        package: What installs ``library`` (Debian/Ubuntu package; conda's in parentheses).
        variables: The environment variables set in the process (besides ``LD_PRELOAD``).
        description: One line: what it changes.
    """

    name: str
    family: str
    library: str = ""
    package: str = ""
    variables: Mapping[str, str] = field(default_factory=dict)
    description: str = ""


ALLOCATORS: Mapping[str, Allocator] = MappingProxyType(
    {
        a.name: a
        for a in (
            Allocator("glibc", "glibc", description="glibc's malloc with its defaults"),
            Allocator(
                "glibc_tuned",
                "glibc",
                variables={
                    "MALLOC_MMAP_THRESHOLD_": str(1 << 30),
                    "MALLOC_TRIM_THRESHOLD_": str(16 << 30),
                    "MALLOC_TOP_PAD_": str(1 << 30),
                },
                description="glibc's malloc keeping freed memory mapped: mmap threshold 1 GiB, trim threshold "
                "16 GiB, top pad 1 GiB",
            ),
            Allocator(
                "tcmalloc",
                "tcmalloc",
                library="libtcmalloc_minimal.so.4",
                package="libtcmalloc-minimal4 (conda: gperftools)",
                description="tcmalloc (gperftools), defaults",
            ),
            Allocator(
                "jemalloc",
                "jemalloc",
                library="libjemalloc.so.2",
                package="libjemalloc2 (conda: jemalloc)",
                variables={"MALLOC_CONF": "dirty_decay_ms:-1,muzzy_decay_ms:-1"},
                description="jemalloc without page purging (dirty_decay_ms:-1, muzzy_decay_ms:-1)",
            ),
            Allocator(
                "jemalloc_pyg",
                "jemalloc",
                library="libjemalloc.so.2",
                package="libjemalloc2 (conda: jemalloc)",
                variables={
                    "MALLOC_CONF": "oversize_threshold:1,background_thread:true,metadata_thp:auto,"
                    "dirty_decay_ms:9000000000,muzzy_decay_ms:9000000000"
                },
                description="jemalloc with the MALLOC_CONF of PyG's CPU benchmark READMEs",
            ),
        )
    }
)

_LIBRARY_DIRS = (
    "/usr/lib/x86_64-linux-gnu",
    "/usr/lib/aarch64-linux-gnu",
    "/usr/lib64",
    "/usr/lib",
    "/usr/local/lib",
    "/lib/x86_64-linux-gnu",
    "/lib64",
    "/lib",
)


def library_path(soname: str, search: tuple[str, ...] | None = None) -> str | None:
    """The path of the shared library ``soname`` on this machine, or ``None``: the directories of
    ``$GNNBENCH_LIBRARY_PATH`` (colon-separated) first, then the active conda environment's ``lib``, then the
    system's library directories (``search`` replaces all of them)."""
    if search is None:
        extra = [d for d in os.environ.get("GNNBENCH_LIBRARY_PATH", "").split(":") if d]
        conda = [str(Path(os.environ["CONDA_PREFIX"]) / "lib")] if os.environ.get("CONDA_PREFIX") else []
        search = (*extra, *conda, *_LIBRARY_DIRS)
    for folder in search:
        candidate = Path(folder) / soname
        if candidate.is_file():
            return str(candidate)
    return None


def allocator_unavailable(name: str) -> str | None:
    """Why the allocator ``name`` cannot be set for a process on this machine, or ``None`` if it can."""
    alloc = ALLOCATORS[name]
    if platform.system() != "Linux":
        if name == BASELINE_ALLOCATOR:
            return None
        return (
            f"{name} is set when the process starts (LD_PRELOAD or glibc's MALLOC_* variables), which "
            f"gnnbench does on Linux only (this is {platform.system()})"
        )
    libc = platform.libc_ver()[0]
    if alloc.family == "glibc" and libc != "glibc":
        if name == BASELINE_ALLOCATOR:
            return None  # the baseline is whatever malloc the C library has
        return f"{name} tunes glibc's malloc, and this process's C library is {libc or 'not glibc'}"
    if alloc.library and library_path(alloc.library) is None:
        return (
            f"{alloc.library} is not installed here (install {alloc.package}, or point "
            "GNNBENCH_LIBRARY_PATH at the folder that holds it)"
        )
    return None


def _without_allocators(preload: str) -> str:
    kept = [p for p in preload.replace(" ", ":").split(":") if p and not any(a in p for a in _PRELOADED)]
    return ":".join(kept)


def _without_malloc_tunables(tunables: str) -> str:
    return ":".join(t for t in tunables.split(":") if t and not t.startswith("glibc.malloc."))


def child_environment(name: str, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of a process that runs with the allocator ``name``: ``base`` (default: this process's)
    without any allocator setting of its own (an allocator in ``LD_PRELOAD``, the ``MALLOC_*`` variables,
    glibc's malloc tunables), plus ``name``'s library and variables.

    Raises:
        ValueError: when ``name`` cannot be set here (:func:`allocator_unavailable`).
    """
    alloc = ALLOCATORS[name]
    reason = allocator_unavailable(name)
    if reason:
        raise ValueError(reason)
    env = dict(os.environ if base is None else base)
    for var in ALLOCATOR_VARIABLES:
        env.pop(var, None)
    preload = _without_allocators(env.pop("LD_PRELOAD", ""))
    tunables = _without_malloc_tunables(env.pop("GLIBC_TUNABLES", ""))
    if tunables:
        env["GLIBC_TUNABLES"] = tunables
    if alloc.library:
        preload = ":".join(p for p in (library_path(alloc.library), preload) if p)
    if preload:
        env["LD_PRELOAD"] = preload
    env.update(alloc.variables)
    return env


def shell_prefix(name: str) -> str:
    """The variables to put before a command so it runs with the allocator ``name`` on this machine, as a user
    types them (``LD_PRELOAD=/usr/lib/.../libtcmalloc_minimal.so.4 python train.py``); ``""`` for the baseline."""
    alloc = ALLOCATORS[name]
    parts = []
    if alloc.library:
        parts.append(f"LD_PRELOAD={library_path(alloc.library) or alloc.library}")
    parts += [f"{k}={v}" for k, v in alloc.variables.items()]
    return " ".join(parts)
