"""What the running process really runs with, read back from the process itself, never assumed.

:func:`allocator_in_effect` asks the dynamic linker which library serves ``malloc`` (``dladdr`` on the address
the process's ``malloc`` symbol resolves to, which is the preloaded allocator's when one is preloaded), reads the
allocator's own settings where it can report them (jemalloc's ``mallctl`` options, tcmalloc's numeric
properties) and, for glibc, probes where a 64 MiB block is served from (a block glibc maps with ``mmap`` shows as
one more mapped chunk in ``mallinfo2``; the raised mmap threshold keeps it on the heap). :func:`matching_allocator`
names the ``Flags.allocator`` choice those facts match.
"""

from __future__ import annotations

import ctypes
import os
from typing import Any

from gnnbench.process.allocators import ALLOCATOR_VARIABLES, ALLOCATORS

__all__ = ["allocator_in_effect", "matching_allocator", "PROBE_BYTES"]

PROBE_BYTES = 64 << 20  # the block glibc's probe allocates: above glibc's default mmap threshold (at most 32 MiB)


class _DlInfo(ctypes.Structure):
    _fields_ = [
        ("dli_fname", ctypes.c_char_p),
        ("dli_fbase", ctypes.c_void_p),
        ("dli_sname", ctypes.c_char_p),
        ("dli_saddr", ctypes.c_void_p),
    ]


class _Mallinfo2(ctypes.Structure):
    _fields_ = [
        (n, ctypes.c_size_t)
        for n in (
            "arena",
            "ordblks",
            "smblks",
            "hblks",
            "hblkhd",
            "usmblks",
            "fsmblks",
            "uordblks",
            "fordblks",
            "keepcost",
        )
    ]


def _process_symbols() -> Any:
    return ctypes.CDLL(None)


def _malloc_library() -> str | None:
    """The file of the library whose ``malloc`` this process calls (``None`` where ``dladdr`` cannot tell)."""
    try:
        lib = _process_symbols()
        dladdr = lib.dladdr
    except (OSError, AttributeError):
        return None
    dladdr.argtypes = [ctypes.c_void_p, ctypes.POINTER(_DlInfo)]
    dladdr.restype = ctypes.c_int
    info = _DlInfo()
    address = ctypes.cast(lib.malloc, ctypes.c_void_p).value
    if not dladdr(address, ctypes.byref(info)) or not info.dli_fname:
        return None
    return os.path.realpath(info.dli_fname.decode(errors="replace"))


def _family(library: str | None) -> str:
    if library is None:
        return "unknown"
    name = os.path.basename(library)
    for family in ("tcmalloc", "jemalloc"):
        if family in name:
            return family
    return "glibc" if name.startswith("libc.so") or name.startswith("libc-") else "other"


def _glibc_large_block_on_heap() -> bool | None:
    """Whether glibc serves a :data:`PROBE_BYTES` block from its heap (``True``: the mmap threshold is above it)
    or maps it (``False``); ``None`` without ``mallinfo2`` (glibc < 2.33)."""
    lib = _process_symbols()
    try:
        mallinfo2 = lib.mallinfo2
    except AttributeError:
        return None
    mallinfo2.restype = _Mallinfo2
    lib.malloc.restype = ctypes.c_void_p
    lib.malloc.argtypes = [ctypes.c_size_t]
    lib.free.argtypes = [ctypes.c_void_p]
    before = mallinfo2().hblks
    block = lib.malloc(PROBE_BYTES)
    if not block:
        return None
    mapped = mallinfo2().hblks > before
    lib.free(block)
    return not mapped


def _jemalloc_options() -> dict[str, Any]:
    """jemalloc's options in effect, through ``mallctl`` (empty where it cannot be called)."""
    lib = _process_symbols()
    try:
        mallctl = lib.mallctl
    except AttributeError:
        return {}
    mallctl.argtypes = [
        ctypes.c_char_p,
        ctypes.c_void_p,
        ctypes.POINTER(ctypes.c_size_t),
        ctypes.c_void_p,
        ctypes.c_size_t,
    ]
    mallctl.restype = ctypes.c_int
    out: dict[str, Any] = {}
    for key, ctype in (
        ("opt.dirty_decay_ms", ctypes.c_ssize_t),
        ("opt.muzzy_decay_ms", ctypes.c_ssize_t),
        ("opt.background_thread", ctypes.c_bool),
        ("opt.oversize_threshold", ctypes.c_size_t),
        ("opt.narenas", ctypes.c_uint),
    ):
        value = ctype()
        size = ctypes.c_size_t(ctypes.sizeof(value))
        if mallctl(key.encode(), ctypes.byref(value), ctypes.byref(size), None, 0) == 0:
            out[key[4:]] = value.value
    return out


def _tcmalloc_properties() -> dict[str, Any]:
    """tcmalloc's numeric properties (``MallocExtension_GetNumericProperty``; empty where it cannot be called)."""
    lib = _process_symbols()
    try:
        get = lib.MallocExtension_GetNumericProperty
    except AttributeError:
        return {}
    get.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_size_t)]
    get.restype = ctypes.c_int
    out: dict[str, Any] = {}
    for key in ("tcmalloc.max_total_thread_cache_bytes", "generic.heap_size", "tcmalloc.pageheap_free_bytes"):
        value = ctypes.c_size_t()
        if get(key.encode(), ctypes.byref(value)):
            out[key] = value.value
    return out


def allocator_in_effect() -> dict[str, Any]:
    """The allocator this process runs with, read back from it: the library serving ``malloc``, its family,
    the allocator variables of the process's environment, and the allocator's own report (jemalloc's options,
    tcmalloc's properties, or where glibc serves a 64 MiB block)."""
    library = _malloc_library()
    family = _family(library)
    settings = {k: os.environ[k] for k in (*ALLOCATOR_VARIABLES, "LD_PRELOAD", "GLIBC_TUNABLES") if k in os.environ}
    report: dict[str, Any] = {}
    if family == "glibc":
        on_heap = _glibc_large_block_on_heap()
        if on_heap is not None:
            report["large_block_on_heap"] = on_heap
    elif family == "jemalloc":
        report = _jemalloc_options()
    elif family == "tcmalloc":
        report = _tcmalloc_properties()
    found = {"library": library, "family": family, "settings": settings, "report": report}
    found["allocator"] = matching_allocator(found)
    return found


def matching_allocator(found: dict[str, Any]) -> str | None:
    """The ``Flags.allocator`` choice that :func:`allocator_in_effect`'s facts match, or ``None`` (an allocator
    gnnbench does not set, or settings other than any choice's)."""
    settings = {k: v for k, v in (found.get("settings") or {}).items() if k in ALLOCATOR_VARIABLES}
    tunables = [
        t for t in (found.get("settings") or {}).get("GLIBC_TUNABLES", "").split(":") if t.startswith("glibc.malloc.")
    ]
    for name, alloc in ALLOCATORS.items():
        if alloc.family == found.get("family") and settings == dict(alloc.variables) and not tunables:
            return name
    return None
