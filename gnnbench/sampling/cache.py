"""On-disk cache of sampled mini-batches, reused for K epochs then regenerated.

:class:`BatchCache` measures the regime "sample once, replay K - 1 epochs" from a cold start: by default
each run gets a fresh temporary directory, removed by :meth:`BatchCache.close`; a shared directory
(``--cache-dir``, :func:`default_cache_dir`) reuses batches across runs. Every window of batches carries a
manifest of checksums (:func:`checksum`) and is keyed by everything that determines its batches, the code
included (:func:`sampling_code_version`), so a changed input misses and a corrupt or incomplete window is
rebuilt instead of replayed. :func:`cache_size` and :func:`clean_cache` manage a shared directory.

The layout, the key and the integrity rules: ``docs/data-pipeline.md``.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import io
import json
import os
import shutil
import tempfile
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

import torch

from gnnbench.atomic import write_bytes_atomic
from gnnbench.sampling.batch import Batch

__all__ = [
    "BatchCache",
    "CacheStats",
    "FORMAT_VERSION",
    "default_cache_dir",
    "cache_size",
    "clean_cache",
    "sampling_code_version",
    "tensor_digest",
    "checksum",
]

FORMAT_VERSION = 2  # of the batch files and manifest (xxh3-128 checksums); a window of another format is rebuilt
_MARKER = "gnnbench-batch-cache.json"
_PACKAGE = Path(__file__).resolve().parent.parent  # gnnbench/
_CODE_GLOBS = ("sampling/*.py", "graphs/*.py")  # the code that produces batches
_CODE_DISTRIBUTIONS = ("torch", "torch_geometric", "pyg_lib", "torch_sparse")  # ... and what it drives
_DIGEST_CHUNK = 1 << 22  # elements hashed per update: bounded extra memory on large graphs


@functools.lru_cache(maxsize=1)
def sampling_code_version() -> str:
    """A hash of the code that produces batches: the contents of ``gnnbench/sampling/*.py`` and
    ``gnnbench/graphs/*.py``, and the installed versions of torch, PyG, pyg-lib and torch-sparse.

    Part of every cache key, so a changed sampler misses instead of replaying
    batches it would no longer produce (computed once per process).
    """
    h = hashlib.sha256()
    for pattern in _CODE_GLOBS:
        for path in sorted(_PACKAGE.glob(pattern)):
            h.update(path.relative_to(_PACKAGE).as_posix().encode() + b"\0")
            h.update(path.read_bytes() + b"\0")
    for dist in _CODE_DISTRIBUTIONS:
        try:
            version = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            version = "-"
        h.update(f"{dist}={version}\0".encode())
    return h.hexdigest()[:20]


def checksum(data: bytes) -> str:
    """``xxh3:<hex>`` (xxh3-128) of a cached batch file, or ``b2:<hex>`` (BLAKE2b) without the ``xxhash``
    package; the prefix names the algorithm, so a manifest written with one never verifies under the other."""
    try:
        import xxhash
    except ImportError:  # pragma: no cover - xxhash is a dependency; this keeps a bare install working
        return "b2:" + hashlib.blake2b(data, digest_size=16).hexdigest()
    return "xxh3:" + xxhash.xxh3_128_hexdigest(data)


def tensor_digest(*tensors: torch.Tensor) -> str:
    """BLAKE2b of the tensors' dtypes, shapes and contents, hashed in chunks (no full-size copy)."""
    h = hashlib.blake2b(digest_size=16)
    for t in tensors:
        h.update(f"{t.dtype}:{tuple(t.shape)}\0".encode())
        flat = t.detach().cpu().contiguous().view(-1)
        if flat.dtype == torch.bool:
            flat = flat.view(torch.uint8)
        for start in range(0, flat.numel(), _DIGEST_CHUNK):
            h.update(flat[start : start + _DIGEST_CHUNK].numpy())
    return h.hexdigest()


def default_cache_dir() -> Path:
    """``$GNNBENCH_CACHE_DIR``, else ``$XDG_CACHE_HOME/gnnbench/batches``, else ``~/.cache/gnnbench/batches``."""
    env = os.environ.get("GNNBENCH_CACHE_DIR")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "gnnbench" / "batches"


@dataclass
class CacheStats:
    """What the cache did: batches served from disk, sampled anew, rejected."""

    hits: int = 0  # batches loaded from a verified cache entry
    misses: int = 0  # batches sampled (and written)
    corrupt: int = 0  # entries rejected by checksum or decoding
    windows_built: int = 0  # windows (re)written
    bytes_written: int = 0
    bytes_read: int = 0
    per_epoch: list[dict[str, int]] = field(default_factory=list)  # {"epoch", "hits", "misses"} per epoch served


class BatchCache:
    """Cache the batches of one epoch and replay them for the next ``epochs - 1``.

    Args:
        root: Cache directory shared by every cache given it (see
            :func:`default_cache_dir`); ``None``: a fresh temporary directory
            owned by this cache and removed by :meth:`close` (or when the cache
            is collected, or at interpreter exit), so each run starts cold.
        key_material: JSON-serializable description of everything that
            determines the batches (graph fingerprint, sampling flags, seed,
            code version).
        epochs: ``K``: a window of K epochs shares one sampled set of batches.
        seed: Seed of the batch order when replaying.
    """

    def __init__(self, root: str | Path | None, key_material: dict[str, Any], epochs: int = 5, seed: int = 0) -> None:
        if epochs < 1:
            raise ValueError(f"batch cache epochs must be >= 1 (got {epochs})")
        self.owns_root = root is None
        self.root = Path(tempfile.mkdtemp(prefix="gnnbench-batches-")) if root is None else Path(root)
        self._cleanup = (
            weakref.finalize(self, shutil.rmtree, str(self.root), ignore_errors=True) if self.owns_root else None
        )
        self.epochs = epochs
        self.seed = seed
        material = {"format": FORMAT_VERSION, "epochs": epochs, **key_material}
        self.material = material
        blob = json.dumps(material, sort_keys=True, default=str).encode()
        self.key = hashlib.sha256(blob).hexdigest()[:20]
        self.dir = self.root / self.key
        self.dir.mkdir(parents=True, exist_ok=True)
        marker = self.dir / _MARKER
        if not marker.exists():
            write_bytes_atomic(marker, json.dumps(material, indent=1, sort_keys=True, default=str).encode())
        self.stats = CacheStats()

    @property
    def min_epochs(self) -> int:
        """Epochs a run needs to show the regime: one window (sampled once, replayed ``K - 1`` times)
        and the first epoch of the next, which resamples: ``K + 1``."""
        return self.epochs + 1

    def close(self) -> None:
        """Remove the temporary directory this cache created (a given ``root`` is left as it is)."""
        if self._cleanup is not None:
            self._cleanup()

    def window(self, epoch: int) -> int:
        return epoch // self.epochs

    def _window_dir(self, window: int) -> Path:
        return self.dir / f"window-{window:06d}"

    def _read_manifest(self, wdir: Path) -> list[dict[str, Any]] | None:
        try:
            manifest = json.loads((wdir / "manifest.json").read_text())
            if manifest.get("format") != FORMAT_VERSION:
                return None
            return list(manifest["batches"])
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def _load(self, wdir: Path, entry: dict[str, Any]) -> Batch | None:
        try:
            data = (wdir / str(entry["file"])).read_bytes()
        except (OSError, KeyError):
            return None
        if checksum(data) != entry.get("checksum"):
            return None
        try:
            batch = Batch.from_dict(torch.load(io.BytesIO(data), weights_only=True))
        except Exception:  # noqa: BLE001 - any decoding failure means "do not trust"
            return None
        self.stats.bytes_read += len(data)
        return batch

    def epoch(self, epoch: int, produce: Callable[[], Iterator[Batch]]) -> Iterator[Batch]:
        """The batches of ``epoch``: replayed from the window's cache, or produced and cached.

        Before replaying, every entry's checksum is verified; if any fails the
        whole window is rebuilt and this epoch gets freshly sampled batches, so
        an epoch never mixes batches of two samplings.
        """
        window = self.window(epoch)
        wdir = self._window_dir(window)
        self._drop_other_windows(keep=window)
        row = {"epoch": epoch, "hits": 0, "misses": 0}
        self.stats.per_epoch.append(row)
        entries = self._read_manifest(wdir)
        if entries is not None and not self._verify(wdir, entries):
            self.stats.corrupt += 1
            entries = None
        if entries is None:
            yield from self._build(wdir, produce(), row)
            return
        if epoch % self.epochs == 0:
            order = list(range(len(entries)))
        else:  # replayed epochs see the window's batches in a fresh order
            gen = torch.Generator().manual_seed(self.seed * 7_919 + epoch)
            order = torch.randperm(len(entries), generator=gen).tolist()
        for i in order:
            batch = self._load(wdir, entries[i])
            if batch is None:  # changed on disk after verification: never serve it
                self.stats.corrupt += 1
                shutil.rmtree(wdir, ignore_errors=True)
                raise RuntimeError(
                    f"batch cache entry {entries[i].get('file')} in {wdir} changed while in use; "
                    "the window was deleted and will be rebuilt"
                )
            self.stats.hits += 1
            row["hits"] += 1
            yield batch

    def _verify(self, wdir: Path, entries: list[dict[str, Any]]) -> bool:
        """Whether every entry exists with the recorded size and checksum."""
        for entry in entries:
            path = wdir / str(entry.get("file", ""))
            try:
                if path.stat().st_size != entry.get("bytes"):
                    return False
                if checksum(path.read_bytes()) != entry.get("checksum"):
                    return False
            except OSError:
                return False
        return True

    def _build(self, wdir: Path, batches: Iterator[Batch], row: dict[str, int]) -> Iterator[Batch]:
        """Yield ``batches`` while writing them; the manifest is written only for a complete epoch.

        One batch is read ahead so the manifest is in place before the last
        batch is handed out (a consumer that stops right after it still gets a
        cached window). An epoch the consumer abandons early, or whose producer
        fails, leaves no manifest, so a later epoch never replays a partial
        window as if it were whole.
        """
        shutil.rmtree(wdir, ignore_errors=True)
        wdir.mkdir(parents=True)
        entries: list[dict[str, Any]] = []
        it = iter(batches)
        nxt = next(it, None)
        while nxt is not None:
            batch = nxt
            buf = io.BytesIO()
            # a replayed batch draws no negatives: its record says so (the batch served now keeps its time)
            torch.save(batch.to_dict() | {"negatives_seconds": 0.0}, buf)
            data = buf.getvalue()
            name = f"batch-{len(entries):06d}.pt"
            write_bytes_atomic(wdir / name, data)
            entries.append({"file": name, "checksum": checksum(data), "bytes": len(data)})
            self.stats.misses += 1
            row["misses"] += 1
            self.stats.bytes_written += len(data)
            nxt = next(it, None)
            if nxt is None:  # complete: the manifest goes last, before the final batch is served
                write_bytes_atomic(
                    wdir / "manifest.json", json.dumps({"format": FORMAT_VERSION, "batches": entries}).encode()
                )
                self.stats.windows_built += 1
            yield batch

    def _drop_other_windows(self, keep: int) -> None:
        for path in self.dir.glob("window-*"):
            if path.is_dir() and path.name != self._window_dir(keep).name:
                shutil.rmtree(path, ignore_errors=True)

    def size_bytes(self) -> int:
        return cache_size(self.dir)


def cache_size(root: str | Path | None = None) -> int:
    """Bytes held under ``root`` (default: :func:`default_cache_dir`)."""
    root = Path(root) if root is not None else default_cache_dir()
    if not root.exists():
        return 0
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())


def clean_cache(root: str | Path | None = None) -> int:
    """Delete gnnbench batch-cache entries under ``root``; return the bytes freed.

    Only directories carrying gnnbench's marker file are removed, so pointing
    this at the wrong directory deletes nothing else.
    """
    root = Path(root) if root is not None else default_cache_dir()
    if not root.exists():
        return 0
    freed = 0
    for marker in root.glob(f"*/{_MARKER}"):
        entry = marker.parent
        freed += cache_size(entry)
        shutil.rmtree(entry, ignore_errors=True)
    return freed
