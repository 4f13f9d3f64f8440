"""Load time and peak memory of ``load_graph`` per file format, against numpy.load + cleaning.

Generates a preset graph (default ``medium``: 1M nodes, 20M stored edges, about a minute), writes it
as ``.npz`` (``save_npz``), as a saved PyG ``Data`` (``.pt``) and as a comma-separated edge list with
``.features.npy`` / ``.labels.npy`` beside it, then measures, each in a fresh subprocess and
interleaved over ``--repeats`` rounds:

- ``load``: ``gnnbench.graphs.io.load_graph(path)``;
- ``baseline``: ``numpy.load`` of the same arrays (for the edge list, the edges saved as a ``[2, E]``
  ``.npy``) plus cleaning, ``Graph.from_edges`` on them.

For each it records wall time and the peak resident memory above the process's resident size after
imports (``gnnbench.host_memory.measure_peak``: ``VmHWM`` after minus ``VmRSS`` before; ``ru_maxrss`` would
carry the parent's peak across ``exec``), next to the final graph's ``graph.nbytes()``. Targets: load time at most
2x the baseline, peak at most 2.5x the final graph.

Usage::

    python scripts/load_bench.py --out load_bench.json [--preset medium] [--repeats 5] [--dir DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TIME_TARGET = 2.0  # load time / (numpy.load + cleaning)
PEAK_TARGET = 2.5  # peak memory above baseline / final graph bytes
FORMATS = ("npz", "pt", "csv")
ROWS_PER_CHUNK = 1 << 21


def _rss_now() -> int:
    with open("/proc/self/statm", "rb") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def format_edges(edges, sep: str = ",") -> bytes:
    """``[E, 2]`` non-negative int64 edges as ``src<sep>dst\\n`` text, digit by digit (vectorized)."""
    import numpy as np

    vals = np.ascontiguousarray(edges).reshape(-1)
    ndig = np.ones(vals.size, dtype=np.int64)
    t = vals // 10
    while bool((t > 0).any()):
        ndig += t > 0
        t //= 10
    ends = np.cumsum(ndig + 1)
    starts = ends - ndig - 1
    buf = np.empty(int(ends[-1]) if vals.size else 0, dtype=np.uint8)
    buf[ends - 1] = np.where(np.arange(vals.size) % 2 == 0, ord(sep), ord("\n"))
    v = vals.copy()
    for k in range(int(ndig.max()) if vals.size else 0):
        m = ndig > k
        buf[(starts + ndig - 1 - k)[m]] = 48 + (v[m] % 10)
        v //= 10
    return buf.tobytes()


def write_files(preset: str, folder: Path) -> dict:
    import numpy as np
    import torch

    from gnnbench.graphs import GraphSpec, generate
    from gnnbench.graphs.io import save_npz

    t0 = time.perf_counter()
    graph = generate(GraphSpec.preset(preset))
    gen_s = time.perf_counter() - t0
    save_npz(graph, folder / "g.npz")
    torch.save(graph.to_pyg(), folder / "g.pt")
    edges = graph.edge_index.numpy()
    with open(folder / "g.csv", "wb") as fh:
        for lo in range(0, edges.shape[1], ROWS_PER_CHUNK):
            fh.write(format_edges(edges[:, lo : lo + ROWS_PER_CHUNK].T))
    np.save(folder / "g.features.npy", graph.x.numpy())
    np.save(folder / "g.labels.npy", graph.y.numpy())
    np.save(folder / "g.edges.npy", edges)  # the edge list's baseline reads this
    sizes = {p.name: p.stat().st_size for p in folder.iterdir()}
    return {
        "preset": preset,
        "num_nodes": graph.num_nodes,
        "num_edges": graph.num_edges,
        "generate_seconds": gen_s,
        "file_bytes": sizes,
    }


def child(fmt: str, mode: str, folder: Path) -> dict:
    """Runs in a fresh process: one measurement, printed as JSON."""
    import numpy as np
    import torch  # noqa: F401 - part of the baseline after imports

    from gnnbench.graphs.container import Graph
    from gnnbench.graphs.io import measure_load
    from gnnbench.host_memory import measure_peak

    if fmt == "pt":
        import torch_geometric.data  # noqa: F401 - the .pt loader needs it; count it in the baseline

    def baseline() -> Graph:
        if fmt == "csv":
            return Graph.from_edges(
                np.load(folder / "g.edges.npy"), np.load(folder / "g.features.npy"), np.load(folder / "g.labels.npy")
            )
        with np.load(folder / "g.npz") as z:
            arrays = {k: z[k] for k in ("edge_index", "x", "y", "train_mask", "val_mask", "test_mask")}
        return Graph.from_edges(arrays.pop("edge_index"), arrays.pop("x"), arrays.pop("y"), **arrays)

    before = _rss_now()
    if mode == "load":
        graph, seconds, peak = measure_load(folder / f"g.{fmt}")
    else:
        graph, seconds, peak = measure_peak(baseline)
    return {
        "seconds": seconds,
        "peak_bytes": peak,
        "rss_after_imports": before,
        "graph_bytes": graph.nbytes(),
        "num_edges": graph.num_edges,
    }


def measure(fmt: str, mode: str, folder: Path) -> dict:
    out = subprocess.run(
        [sys.executable, __file__, "--child", fmt, mode, str(folder)], capture_output=True, text=True, check=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=False, help="write the results as JSON here")
    ap.add_argument("--preset", default="medium", help="graph preset to generate (default: medium)")
    ap.add_argument("--repeats", type=int, default=5, help="rounds of fresh processes (default: 5)")
    ap.add_argument("--dir", help="folder for the files (default: a temporary one, removed afterwards)")
    ap.add_argument("--child", nargs=3, metavar=("FORMAT", "MODE", "DIR"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.child[0], args.child[1], Path(args.child[2]))))
        return

    folder = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="gnnbench-load-"))
    folder.mkdir(parents=True, exist_ok=True)
    try:
        if not (folder / "g.csv").exists():
            info = write_files(args.preset, folder)
            print(
                f"generated {args.preset} in {info['generate_seconds']:.1f} s: {info['num_nodes']} nodes, "
                f"{info['num_edges']} edges",
                flush=True,
            )
        else:
            info = {"preset": args.preset, "reused": str(folder)}
        runs: dict[str, dict[str, list[dict]]] = {f: {"load": [], "baseline": []} for f in FORMATS}
        for r in range(args.repeats):
            for fmt in FORMATS:
                for mode in ("load", "baseline"):
                    runs[fmt][mode].append(measure(fmt, mode, folder))
            print(f"round {r + 1}/{args.repeats} done", flush=True)
    finally:
        if not args.dir:
            shutil.rmtree(folder, ignore_errors=True)

    rows = []
    for fmt in FORMATS:
        load, base = runs[fmt]["load"], runs[fmt]["baseline"]
        t_load = statistics.median(m["seconds"] for m in load)
        t_base = statistics.median(m["seconds"] for m in base)
        # Paired by round (the two ran back to back), so drift in the machine's load cancels.
        ratio = statistics.median(a["seconds"] / b["seconds"] for a, b in zip(load, base))
        peak = max(m["peak_bytes"] for m in load)
        peak_base = max(m["peak_bytes"] for m in base)
        final = load[0]["graph_bytes"]
        rows.append(
            {
                "format": fmt,
                "load_s": t_load,
                "baseline_s": t_base,
                "time_ratio": ratio,
                "load_min_s": min(m["seconds"] for m in load),
                "baseline_min_s": min(m["seconds"] for m in base),
                "peak_bytes": peak,
                "baseline_peak_bytes": peak_base,
                "graph_bytes": final,
                "peak_ratio": peak / final,
                "time_ok": ratio <= TIME_TARGET,
                "peak_ok": peak / final <= PEAK_TARGET,
                "runs": runs[fmt],
            }
        )
    mib = 1 << 20
    print(
        f"\n{'format':<7}{'load s':>12}{'numpy+clean s':>15}{'ratio':>7}  {'peak MiB':>9}{'numpy+clean MiB':>17}"
        f"{'graph MiB':>11}{'ratio':>7}  targets (time <= {TIME_TARGET}x, peak <= {PEAK_TARGET}x)"
    )
    print("(times: median (min) over rounds; time ratio: median of the per-round load / baseline ratios)")
    for row in rows:
        print(
            f"{row['format']:<7}{row['load_s']:>6.2f} ({row['load_min_s']:.2f}){row['baseline_s']:>8.2f} "
            f"({row['baseline_min_s']:.2f}){row['time_ratio']:>7.2f}  "
            f"{row['peak_bytes'] / mib:>9.0f}{row['baseline_peak_bytes'] / mib:>17.0f}{row['graph_bytes'] / mib:>11.0f}"
            f"{row['peak_ratio']:>7.2f}  {'ok' if row['time_ok'] else 'SLOW'} / {'ok' if row['peak_ok'] else 'OVER'}"
        )
    result = {
        "info": info,
        "targets": {"time_ratio": TIME_TARGET, "peak_ratio": PEAK_TARGET},
        "python": sys.version.split()[0],
        "cpus": os.cpu_count(),
        "rows": rows,
    }
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1))
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
