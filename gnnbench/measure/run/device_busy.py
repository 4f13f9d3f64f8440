"""The device's busy share during training: NVML's utilization, read at step ends.

``torch.cuda.utilization`` asks NVML for the share of the last sample period in which a kernel ran on the
device. The sampler reads it after each step and averages; on a CPU, or where NVML is missing, it holds the
reason instead of a number (never a stand-in figure).
"""

from __future__ import annotations

import torch

__all__ = ["BusySampler"]


class BusySampler:
    """Device utilization readings (NVML) taken at step ends; ``None`` where NVML is unavailable.

    Args:
        device: The compute device.
    """

    def __init__(self, device: torch.device) -> None:
        self.values: list[float] = []
        self.reason: str | None = None
        self.device = device
        if device.type != "cuda":
            self.reason = "device utilization comes from NVML, which needs a CUDA device"
            return
        try:
            torch.cuda.utilization(device)
        except Exception as exc:  # noqa: BLE001 - pynvml missing or driver without NVML
            self.reason = f"NVML not available ({exc}); install nvidia-ml-py"

    def sample(self) -> None:
        """Read the utilization now (nothing where NVML is unavailable; a reading that fails stops sampling)."""
        if self.reason is not None:
            return
        try:
            self.values.append(float(torch.cuda.utilization(self.device)))
        except Exception as exc:  # noqa: BLE001 - the driver stopped answering
            self.reason = f"NVML stopped answering ({exc})"

    def mean_fraction(self) -> float | None:
        """The mean busy share in [0, 1], or ``None`` without readings."""
        return sum(self.values) / len(self.values) / 100.0 if self.values else None
