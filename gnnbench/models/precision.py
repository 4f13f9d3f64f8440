"""The precision policy: which parts of the model run in low precision (fp16 on CUDA, bf16 elsewhere)."""

from __future__ import annotations

from contextlib import nullcontext
from dataclasses import dataclass

import torch

from gnnbench.flags import PRECISIONS, Flags

__all__ = ["Precision"]


@dataclass(frozen=True)
class Precision:
    """Precision policy.

    - ``off``: everything fp32;
    - ``full``: linear layers and aggregation in low precision (fp16 on CUDA, bf16 elsewhere);
    - ``partial``: linear layers in low precision, aggregation in fp32.
    """

    mode: str = "off"
    device_type: str = "cpu"

    def __post_init__(self) -> None:
        if self.mode not in PRECISIONS:
            raise ValueError(f"precision must be one of {', '.join(map(repr, PRECISIONS))} (got {self.mode!r})")

    @classmethod
    def for_flags(cls, flags: Flags, device: torch.device) -> "Precision":
        """The run's precision policy (the layer's factory): ``flags.precision`` on ``device``'s type."""
        return cls(flags.precision, device.type)

    @property
    def low_dtype(self) -> torch.dtype:
        return torch.float16 if self.device_type == "cuda" else torch.bfloat16

    @property
    def needs_grad_scaler(self) -> bool:
        return self.mode != "off" and self.low_dtype == torch.float16

    def linear_context(self):
        if self.mode == "off":
            return nullcontext()
        return torch.autocast(device_type=self.device_type, dtype=self.low_dtype)

    @property
    def aggregation_dtype(self) -> torch.dtype:
        return self.low_dtype if self.mode == "full" else torch.float32
