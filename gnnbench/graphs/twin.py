"""Synthetic twin of a graph: the closest preset and the generator overrides that mimic the graph.

Four statistics describe a graph (:func:`graph_signature`, from :mod:`gnnbench.graphs.stats`): its size,
its average degree (stored directed edges per node, as :class:`GraphSpec.avg_degree` counts them), its
degree tail exponent (Hill estimate) and its edge homophily. :func:`closest_preset` picks the preset
nearest by :func:`preset_distance` and the overrides that mimic the graph; :func:`twin_spec` is the
resulting :class:`GraphSpec`.

How far the generator's own statistics sit from its spec: ``docs/graphs.md``.
"""

from __future__ import annotations

import math
from typing import Any

from gnnbench.graphs.container import Graph
from gnnbench.graphs.spec import PRESETS, GraphSpec
from gnnbench.graphs.stats import edge_homophily, hill_exponent

__all__ = ["EXPONENT_RANGE", "closest_preset", "graph_signature", "preset_distance", "twin_spec"]

EXPONENT_RANGE = (2.01, 5.0)  # the generator accepts (2, 5]; measured exponents are clamped into it
_CLI_OPTIONS = {  # GraphSpec field -> `gnnbench run/compare` option (gnnbench/cli/options.py)
    "num_nodes": "--nodes",
    "avg_degree": "--avg-degree",
    "exponent": "--exponent",
    "homophily": "--homophily",
    "num_classes": "--classes",
    "feature_dim": "--feature-dim",
}


def graph_signature(graph: Graph) -> dict[str, float]:
    """The four statistics the distance uses: ``num_nodes``, ``avg_degree``, ``exponent``, ``homophily``."""
    return {
        "num_nodes": float(graph.num_nodes),
        "avg_degree": graph.num_edges / max(graph.num_nodes, 1),
        "exponent": hill_exponent(graph.deg),
        "homophily": edge_homophily(graph),
    }


def _spec_signature(spec: GraphSpec) -> dict[str, float]:
    return {
        "num_nodes": float(spec.num_nodes),
        "avg_degree": float(spec.avg_degree),
        "exponent": float(spec.exponent),
        "homophily": float(spec.homophily),
    }


def preset_distance(signature: dict[str, float], spec: GraphSpec) -> float:
    """Distance between a graph's :func:`graph_signature` and a preset's spec (its ``num_nodes``,
    ``avg_degree``, ``exponent`` and ``homophily``)::

        d = |log10(N / N_p)| + |log10(D / D_p)| + |gamma - gamma_p| / 2 + |h - h_p|

    so a factor of 10 in size or degree, an exponent gap of 2 and the whole homophily range each cost 1.
    A term whose statistic is undefined (no edges: no degree or homophily; too few nodes for a Hill
    estimate) is left out.
    """
    ref = _spec_signature(spec)
    terms = [abs(math.log10(signature["num_nodes"] / ref["num_nodes"]))]
    if signature["avg_degree"] > 0:
        terms.append(abs(math.log10(signature["avg_degree"] / ref["avg_degree"])))
    if math.isfinite(signature["exponent"]):
        terms.append(abs(signature["exponent"] - ref["exponent"]) / 2.0)
    if math.isfinite(signature["homophily"]):
        terms.append(abs(signature["homophily"] - ref["homophily"]))
    return float(sum(terms))


def _overrides(graph: Graph, signature: dict[str, float], base: GraphSpec) -> dict[str, Any]:
    n = max(graph.num_nodes, 2)
    gamma = signature["exponent"]
    h = signature["homophily"]
    avg = signature["avg_degree"]
    return {
        "num_nodes": n,
        "avg_degree": round(min(max(avg, 1e-3), n - 1), 3) if avg > 0 else base.avg_degree,
        "exponent": round(min(max(gamma, EXPONENT_RANGE[0]), EXPONENT_RANGE[1]), 3)
        if math.isfinite(gamma)
        else base.exponent,
        "homophily": round(min(max(h, 0.0), 1.0), 3) if math.isfinite(h) else base.homophily,
        "num_classes": min(max(graph.num_classes, 2), n),
        "feature_dim": max(graph.num_features, 1),
    }


def _calibrate(overrides: dict[str, Any], signature: dict[str, float], preset: str, pilot_nodes: int) -> None:
    """One fixed-point step: generate a pilot twin, shift exponent and homophily by what it missed."""
    from gnnbench.graphs.generate import generate

    pilot = dict(overrides, num_nodes=min(overrides["num_nodes"], pilot_nodes))
    pilot["avg_degree"] = min(pilot["avg_degree"], pilot["num_nodes"] - 1)
    pilot["num_classes"] = min(pilot["num_classes"], pilot["num_nodes"])
    got = graph_signature(generate(GraphSpec.preset(preset, **pilot)))
    lo, hi = EXPONENT_RANGE
    if math.isfinite(signature["exponent"]) and math.isfinite(got["exponent"]):
        shifted = overrides["exponent"] + signature["exponent"] - got["exponent"]
        overrides["exponent"] = round(min(max(shifted, lo), hi), 3)
    if math.isfinite(signature["homophily"]) and math.isfinite(got["homophily"]):
        shifted = overrides["homophily"] + signature["homophily"] - got["homophily"]
        overrides["homophily"] = round(min(max(shifted, 0.0), 1.0), 3)


def closest_preset(graph: Graph, *, calibrate: bool = False, pilot_nodes: int = 100_000) -> dict[str, Any]:
    """The preset closest to ``graph`` and the generator overrides that mimic it.

    Args:
        graph: The graph to mimic.
        calibrate: Generate one pilot twin (at most ``pilot_nodes`` nodes) and correct the exponent
            and homophily overrides by what the pilot missed: the generator's realized Hill estimate
            and homophily sit slightly off its spec on small graphs (``docs/graphs.md``).
        pilot_nodes: Node cap of the pilot graph.

    Returns:
        A dict with ``preset`` (name), ``distance``, ``distances`` (every preset's), ``signature``
        (the graph's four statistics), ``overrides`` (``GraphSpec`` fields: ``num_nodes``,
        ``avg_degree``, ``exponent`` clamped to :data:`EXPONENT_RANGE`, ``homophily``,
        ``num_classes``, ``feature_dim``; undefined statistics keep the preset's value), ``cli``
        (the same as ``gnnbench run`` options, one line) and ``notes`` (caveats, e.g. a directed
        graph, whose twin is undirected).
    """
    signature = graph_signature(graph)
    distances = {name: preset_distance(signature, spec) for name, spec in PRESETS.items()}
    name = min(distances, key=distances.get)
    overrides = _overrides(graph, signature, PRESETS[name])
    if calibrate and graph.num_edges:
        _calibrate(overrides, signature, name, pilot_nodes)
    cli = " ".join([f"--preset {name}"] + [f"{_CLI_OPTIONS[k]} {v}" for k, v in overrides.items()])
    notes = []
    if graph.num_edges and not graph.is_undirected():
        notes.append("the graph is directed; the generator makes undirected graphs with the same stored edge count")
    if not math.isfinite(signature["exponent"]):
        notes.append(f"too few nodes for a Hill estimate: exponent is the preset's ({PRESETS[name].exponent})")
    if graph.meta.get("labels_substituted"):
        notes.append("labels were substituted: homophily and class count describe the substitute labels")
    return {
        "preset": name,
        "distance": distances[name],
        "distances": distances,
        "signature": signature,
        "overrides": overrides,
        "cli": cli,
        "notes": notes,
    }


def twin_spec(graph: Graph, seed: int = 0, *, calibrate: bool = False) -> GraphSpec:
    """The :class:`GraphSpec` of ``graph``'s synthetic twin: its closest preset with the overrides."""
    twin = closest_preset(graph, calibrate=calibrate)
    return GraphSpec.preset(twin["preset"], seed=seed, **twin["overrides"])
