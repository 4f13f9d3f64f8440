"""What ``gnnbench.watch`` costs a training loop, end to end: the same user-written PyG loop (``NeighborLoader`` +
``GraphSAGE`` node classification, as in PyG's examples) timed unwatched and watched, in alternating processes.

    .venv/bin/python scripts/watch_overhead.py [--rounds 6] [--blocks 24] [--steps 20] [--preset tiny] [--out FILE]

Each process builds the graph (gnnbench's generator, ``--preset``), the loader, the model and the optimizer from
one seed, runs one warm-up block, then ``--blocks`` blocks of ``--steps`` steps, half of them inside
``gnnbench.watch(loader, model, optimizer)`` (its default, non-synchronizing mode, without the profiler), in
ABBA order (the two blocks of each pair seeded alike, so they draw the same batches), and reports the median
step of its watched and of its unwatched blocks. A step is timed by this
script's own clock in both, from the loader's ``next()`` to the optimizer's ``step`` returning, so the watch's
instrumentation is inside the measured step and its own figures play no part. Pairing within a process keeps
what differs between processes (memory layout, the machine's drift) out of the ratio; processes are the
rounds of the interval.

Printed: the watched/unwatched ratio of median steps with a paired-t 95% interval over the processes
(``gnnbench.measure.stats.intervals.paired_ratio``, the run-level interval the rest of gnnbench reports), the
watch's own estimate from the watched processes (``WatchReport.overhead``: each instrumented call's cost measured
at entry times its calls per step, a lower bound) beside it, and whether
the issue's goal (under 2%) is met by the interval. The measured figure: docs/advice.md, 'What the watch
costs'. Exit status 0 always (a benchmark reports; it does not assert a speed).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

GOAL = 0.02  # the watch's overhead on the step at most, non-synchronizing mode


def _loop(preset: str, blocks: int, steps: int, seed: int) -> dict:
    """One process: ``blocks`` blocks of ``steps`` steps, watched and unwatched in ABBA order after one warm-up
    block; the median step of every block."""
    import torch
    import torch.nn.functional as F
    from torch_geometric.data import Data
    from torch_geometric.loader import NeighborLoader
    from torch_geometric.nn import GraphSAGE

    import gnnbench
    from gnnbench.graphs.generate import generate
    from gnnbench.graphs.spec import GraphSpec
    from gnnbench.sampling.pyg_fallback import pyg_sampling_fallback

    warnings.filterwarnings("ignore", message="Using 'NeighborSampler' without a 'pyg-lib'")
    torch.manual_seed(seed)
    g = generate(GraphSpec.preset(preset))
    data = Data(x=g.x, edge_index=g.edge_index, y=g.y, train_mask=g.train_mask)
    classes = int(g.y.max()) + 1
    medians: dict[str, list[float]] = {"plain": [], "watched": []}
    estimates = []
    with pyg_sampling_fallback():  # PyG's NeighborLoader needs pyg-lib or torch-sparse; both modes use the same
        loader = NeighborLoader(data, num_neighbors=[10, 5], batch_size=256, input_nodes=data.train_mask, shuffle=True)
        model = GraphSAGE(data.num_features, 64, num_layers=2, out_channels=classes)
        opt = torch.optim.Adam(model.parameters(), lr=0.01)
        model.train()

        def block(n: int) -> list[float]:
            """``n`` steps of the user's loop, each timed by this script's clock (next() to optimizer.step)."""
            times: list[float] = []
            while len(times) < n:
                it = iter(loader)  # inside the block: a watched block's iterator is the watched one
                while len(times) < n:
                    t0 = time.perf_counter()
                    try:
                        batch = next(it)
                    except StopIteration:
                        break
                    opt.zero_grad()
                    out = model(batch.x, batch.edge_index)[: batch.batch_size]
                    loss = F.cross_entropy(out, batch.y[: batch.batch_size])
                    loss.backward()
                    opt.step()
                    times.append(time.perf_counter() - t0)
            return times

        block(steps)  # warm-up: first touch, allocator, the fallback sampler's first call
        for k in range(blocks):
            watched = k % 4 in (1, 2)  # ABBA: drift within the process falls on both
            torch.manual_seed(seed * 100_003 + k // 2)  # the two blocks of a pair draw the same batches
            if watched:
                with gnnbench.watch(loader, model, opt, warmup=0) as w:
                    times = block(steps)
                estimates.append(w.report().overhead)
            else:
                times = block(steps)
            medians["watched" if watched else "plain"].append(statistics.median(times))
    est = [e for e in estimates if e is not None]
    return {
        "plain": statistics.median(medians["plain"]),
        "watched": statistics.median(medians["watched"]),
        "estimate": statistics.median(est) if est else None,
    }


def _child(args: argparse.Namespace, seed: int) -> dict:
    cmd = [
        sys.executable,
        __file__,
        "--child",
        "--preset",
        args.preset,
        "--blocks",
        str(args.blocks),
        "--steps",
        str(args.steps),
        "--seed",
        str(seed),
    ]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=6, help="processes (default 6)")
    p.add_argument("--blocks", type=int, default=24, help="blocks per process, half of them watched (default 24)")
    p.add_argument("--steps", type=int, default=20, help="timed steps per block (default 20)")
    p.add_argument("--preset", default="tiny", help="gnnbench graph preset (default tiny)")
    p.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--out", default=None, help="also write the figures here (JSON, atomically)")
    args = p.parse_args(argv)
    for name, low in (("rounds", 2), ("blocks", 4), ("steps", 1)):
        if getattr(args, name) < low:
            p.error(f"--{name} must be >= {low} (got {getattr(args, name)})")
    if args.child:
        print(json.dumps(_loop(args.preset, args.blocks, args.steps, args.seed)))
        return 0

    from gnnbench.atomic import write_json_atomic
    from gnnbench.measure.stats import paired_ratio

    plain, watched, estimates = [], [], []
    for r in range(args.rounds):
        got = _child(args, seed=r)
        plain.append(got["plain"])
        watched.append(got["watched"])
        if got.get("estimate") is not None:
            estimates.append(got["estimate"])
        print(
            f"process {r}: unwatched {1e3 * plain[-1]:.3f} ms, watched {1e3 * watched[-1]:.3f} ms "
            f"(medians of {args.blocks // 2} blocks each)",
            flush=True,
        )
    ratio = paired_ratio(watched, plain)  # watched / unwatched: > 1 is the watch's cost
    est = statistics.median(estimates) if estimates else None
    verdict = (
        "goal met" if ratio.high < 1 + GOAL else "goal missed" if ratio.low > 1 + GOAL else "undecided at this noise"
    )
    print(
        f"\nwatched / unwatched median step, paired within {args.rounds} processes ({args.preset}, "
        f"{args.blocks} blocks of {args.steps} steps each, ABBA): {ratio.ratio:.4f}x "
        f"[{ratio.low:.4f}, {ratio.high:.4f}] (95%); median step {1e3 * statistics.median(plain):.2f} ms "
        "unwatched"
    )
    if est is not None:
        print(f"the watch's own estimate (a lower bound): {est:.2%} of the step")
    print(f"goal: under {GOAL:.0%} of the step: {verdict}")
    if args.out:
        write_json_atomic(
            args.out,
            {
                "preset": args.preset,
                "rounds": args.rounds,
                "blocks": args.blocks,
                "steps": args.steps,
                "unwatched": plain,
                "watched": watched,
                "ratio": ratio.ratio,
                "low": ratio.low,
                "high": ratio.high,
                "estimate": est,
                "goal": GOAL,
                "verdict": verdict,
            },
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
