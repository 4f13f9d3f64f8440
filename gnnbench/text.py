"""Text primitives shared by every band that prints: the CLI tables, the HTML report, diagnose, tune and the
micro-benchmarks write a ratio, an accuracy delta, a noise floor, a byte count, a share or a duration through
these functions, so one figure reads the same everywhere.

A missing figure is ``None`` or NaN (a one-round interval has NaN bounds); each function says what it prints
for it. The functions return plain text: the report HTML-escapes it.
"""

from __future__ import annotations

from typing import Any, Mapping

__all__ = [
    "absent",
    "human_bytes",
    "percent",
    "ratio",
    "ratio_of",
    "pp",
    "noise_floor",
    "seconds",
    "milliseconds",
    "ONE_ROUND",
]

ONE_ROUND = "(one round: no interval)"  # said after a ratio measured in one round, where asked for


def absent(x: Any) -> bool:
    """Whether a figure is missing: ``None`` or NaN."""
    return x is None or x != x


def human_bytes(n: float) -> str:
    """A byte count in binary units: ``512 B``, ``1.5 KiB``, ``20.0 MiB``, ``3.2 GiB`` (GiB above that)."""
    for unit in ("B", "KiB", "MiB"):
        if abs(n) < 1024:
            return f"{int(n)} B" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


def percent(x: float | None, *, digits: int = 1, missing: str = "n/a") -> str:
    """A fraction as a percentage: ``12.3%`` (``digits`` decimals); ``missing`` when there is none."""
    return missing if absent(x) else f"{x:.{digits}%}"


def ratio(
    value: float | None,
    low: float | None = None,
    high: float | None = None,
    *,
    digits: int = 2,
    unit: str = "x",
    missing: str = "-",
    one_round: bool = False,
) -> str:
    """A ratio with its interval: ``1.23x [1.10, 1.38]``.

    Args:
        value: The ratio; ``missing`` is printed when it is absent.
        low: Lower bound of the interval; absent (one round): the ratio alone, ``1.23x``.
        high: Upper bound of the interval.
        digits: Decimals of the ratio and its bounds (default 2).
        unit: Written after the ratio (default ``"x"``; ``""`` for a plain factor such as an efficiency).
        missing: The text for an absent ratio (default ``"-"``).
        one_round: Say why a ratio has no interval: ``1.23x (one round: no interval)``.
    """
    if absent(value):
        return missing
    text = f"{value:.{digits}f}{unit}"
    if absent(low) or absent(high):
        return f"{text} {ONE_ROUND}" if one_round else text
    return f"{text} [{low:.{digits}f}, {high:.{digits}f}]"


def ratio_of(d: Any, **options: Any) -> str:
    """:func:`ratio` of a paired ratio: an object with ``ratio``, ``low`` and ``high`` attributes (a
    :class:`gnnbench.measure.compare.rows.PairedRatio` of :func:`gnnbench.measure.compare.comparison.compare`) or a mapping with
    those keys (a scaling efficiency); ``options`` are :func:`ratio`'s keywords."""
    if not d:
        return ratio(None, **options)
    if isinstance(d, Mapping):
        return ratio(d.get("ratio"), d.get("low"), d.get("high"), **options)
    return ratio(d.ratio, d.low, d.high, **options)


def pp(delta: float, low: float | None = None, high: float | None = None, *, digits: int = 2, unit: str = " pp") -> str:
    """A difference of two fractions in percentage points, signed, with its interval: ``-0.12 pp [-0.40, +0.16]``.

    Args:
        delta: The difference as a fraction (``-0.0012`` is ``-0.12 pp``).
        low: Lower bound of the interval (a fraction); absent: the delta alone.
        high: Upper bound of the interval.
        digits: Decimals (default 2).
        unit: Written after the delta, before the interval (default ``" pp"``; ``""`` in a column headed pp).
    """
    text = f"{100 * delta:+.{digits}f}{unit}"
    if absent(low) or absent(high):
        return text
    return f"{text} [{100 * low:+.{digits}f}, {100 * high:+.{digits}f}]"


def noise_floor(factor: float | None, *, missing: str = "n/a") -> str:
    """The smallest resolvable factor as a percentage either way: ``1.04`` is ``+-4.0%``; ``missing`` when it
    could not be estimated (fewer than 2 rounds)."""
    return missing if absent(factor) else f"+-{(factor - 1) * 100:.1f}%"


def seconds(x: float, *, digits: int = 2) -> str:
    """A duration in seconds: ``1.23 s``."""
    return f"{x:.{digits}f} s"


def milliseconds(x: float, *, digits: int = 1) -> str:
    """A duration given in seconds, in milliseconds: ``0.0123`` is ``12.3 ms``."""
    return f"{1e3 * x:.{digits}f} ms"
