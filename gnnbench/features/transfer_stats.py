"""What a feature store counts: the bytes it moves host -> device and its hot-hit rate, per epoch fed."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["TransferStats"]


@dataclass
class TransferStats:
    """Host -> device traffic of the feature store."""

    batches: int = 0  # gathers served
    bytes_h2d: int = 0  # total bytes moved host -> device
    last_bytes_h2d: int = 0  # bytes moved by the latest gather
    rows: int = 0  # feature rows gathered (every id of every batch's n_id)
    rows_device: int = 0  # of those, rows read from device-resident memory
    # per epoch fed (PlacedFeatures.feed starts one): [rows, rows_device], so hit rates show per epoch
    epochs: list = field(default_factory=list)

    def record(self, nbytes: int, rows: int = 0, rows_device: int = 0) -> None:
        self.batches += 1
        self.bytes_h2d += nbytes
        self.last_bytes_h2d = nbytes
        self.rows += rows
        self.rows_device += rows_device
        if self.epochs:
            self.epochs[-1][0] += rows
            self.epochs[-1][1] += rows_device

    def new_epoch(self) -> None:
        self.epochs.append([0, 0])

    @property
    def hit_rate_per_epoch(self) -> list[float]:
        """Per epoch fed, the share of its gathered rows served from device memory (hot_cold's cache hits)."""
        return [d / r if r else 0.0 for r, d in self.epochs]

    @property
    def mean_bytes_per_batch(self) -> float:
        return self.bytes_h2d / self.batches if self.batches else 0.0

    @property
    def hot_hit_rate(self) -> float:
        """Share of gathered rows served from device memory (0.0 before any gather)."""
        return self.rows_device / self.rows if self.rows else 0.0
