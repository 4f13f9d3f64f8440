"""The plotly.js the page inlines: the basic bundle (scatter and bar traces, all the report draws; 1.2 MB) when it
was built for the same plotly.js version as the installed Python ``plotly`` package, else the full bundle (4.8 MB)
that package carries, and the page says which (``gnnbench/report/vendor/README.md``)."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

__all__ = ["BASIC_BUNDLE", "BASIC_SHA256", "BASIC_TRACES", "PlotlyBundle", "bundle_version", "plotly_bundle"]

BASIC_BUNDLE = Path(__file__).parent / "vendor" / "plotly-basic.min.js"
BASIC_SHA256 = "99784e3abfb07b142a15e521a439e6d9addceadb3f79553fd24c72774f0649ba"  # npm plotly.js-basic-dist-min 4.1.1
BASIC_TRACES = frozenset({"scatter", "bar", "pie"})  # the trace types the basic bundle registers

_VERSION = re.compile(r"plotly\.js(?: \([^)]*\))? v(\d+\.\d+\.\d+)")


def bundle_version(js: str) -> str | None:
    """The plotly.js version a bundle's header names (``4.1.1``), or ``None``."""
    found = _VERSION.search(js[:400])
    return found.group(1) if found else None


@dataclass(frozen=True)
class PlotlyBundle:
    js: str
    name: str  # "basic" or "full"
    note: str  # what the page says about it


def plotly_bundle(traces: set[str] | frozenset[str] = frozenset({"scatter", "bar"})) -> PlotlyBundle:
    """The bundle a page drawing ``traces`` inlines: the basic one when it is intact, holds every trace type and
    matches the installed plotly's version; else the full one, with the reason."""
    import plotly.offline

    full = plotly.offline.get_plotlyjs()
    wanted = bundle_version(full)
    problem = None
    try:
        data = BASIC_BUNDLE.read_bytes()
    except OSError as exc:
        problem = f"the basic bundle is missing ({exc})"
    else:
        basic = data.decode("utf-8")
        if hashlib.sha256(data).hexdigest() != BASIC_SHA256:
            problem = "the basic bundle's SHA-256 is not the recorded one"
        elif bundle_version(basic) != wanted:
            problem = f"the basic bundle is plotly.js {bundle_version(basic)}, the installed plotly wants {wanted}"
        elif not set(traces) <= BASIC_TRACES:
            problem = f"the page draws {sorted(set(traces) - BASIC_TRACES)}, which the basic bundle lacks"
    if problem is None:
        return PlotlyBundle(basic, "basic", f"plotly.js {wanted} basic bundle (scatter and bar traces)")
    return PlotlyBundle(full, "full", f"plotly.js {wanted} full bundle: {problem}")
