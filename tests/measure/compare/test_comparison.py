"""gnnbench.measure.compare.comparison: the references of multi-rank rows are found by what they are (their flags),
whatever their labels, never by a registry entry's name."""

from gnnbench.flags import Flags
from gnnbench.measure.compare import compare
from gnnbench.measure.run import Accuracy, RunResult
from tests.advice.test_distributed_advice import PART, _partition_run


def _run(
    label: str, rnd: int, step: float, flags: Flags, *, test: float = 0.5, distributed: dict | None = None
) -> RunResult:
    r = _partition_run(label, rnd, step)
    r.config["flags"] = flags.to_dict()
    r.optimizations = []  # nothing named: only the flags say what each configuration is
    r.accuracy = Accuracy(metric="accuracy", val=test, test=test)
    if distributed is not None:
        r.distributed = distributed
    return r


def _parallel(mode: str, compression: str = "none", **extra) -> dict:
    return {
        "world_size": 2,
        "backend": "gloo",
        "parallel": mode,
        "grad_compression": compression,
        "comm_share": 0.5,
        "bytes_per_step": 1024.0,
        "dense_bytes_per_step": 1024.0,
        "compression_ratio": 1.0,
        **extra,
    }


FULL = Flags(batch_source="full")
PARTITIONED = Flags(batch_source="full", parallel="partition")


def test_a_partition_rows_efficiency_is_against_the_single_process_full_batch_configuration_by_its_flags():
    runs = [
        run
        for k in range(3)
        for run in (
            _run("baseline", k, 0.1, Flags()),
            _run("full_batch", k, 9.9, Flags(batch_source="cluster_gcn")),  # named like the entry, but it is not one
            _run("whole graph", k, 1.0, FULL),
            _run("split", k, 0.8, PARTITIONED, distributed=_parallel("partition", partition=PART)),
        )
    ]
    d = next(r for r in compare(runs).rows if r.label == "split").distributed
    assert d["efficiency_against"] == "whole graph"
    assert abs(d["scaling_efficiency"]["ratio"] - 1.25 / 2) < 1e-9
    # without a single-process full-batch configuration there is no reference
    alone = [r for r in runs if r.label != "whole graph"]
    assert next(r for r in compare(alone).rows if r.label == "split").distributed["efficiency_against"] is None


def test_of_several_references_the_one_closest_to_the_row_is_taken():
    runs = [
        run
        for k in range(3)
        for run in (
            _run("baseline", k, 0.1, Flags()),
            _run("full", k, 2.0, FULL),
            _run("full int32", k, 1.0, FULL.replace(index_dtype="int32")),
            _run(
                "split int32",
                k,
                0.8,
                PARTITIONED.replace(index_dtype="int32"),
                distributed=_parallel("partition", partition=PART),
            ),
        )
    ]
    d = next(r for r in compare(runs).rows if r.label == "split int32").distributed
    assert d["efficiency_against"] == "full int32" and abs(d["scaling_efficiency"]["ratio"] - 1.25 / 2) < 1e-9


def test_a_compressions_accuracy_is_against_dense_data_parallel_by_its_flags():
    dp = Flags(parallel="data")
    runs = [
        run
        for k in range(3)
        for run in (
            _run("baseline", k, 0.1, Flags(), test=0.8),
            _run("dense", k, 0.1, dp, test=0.80 + 0.001 * k, distributed=_parallel("data")),
            _run(
                "sparse grads",
                k,
                0.1,
                dp.replace(grad_compression="topk"),
                test=0.799 + 0.001 * k,
                distributed=_parallel("data", "topk", compression_ratio=0.02),
            ),
        )
    ]
    rows = {r.label: r for r in compare(runs).rows}
    a = rows["sparse grads"].distributed["accuracy_vs_dense"]
    assert a["against"] == "dense" and a["rounds"] == 3 and abs(a["delta"] + 0.001) < 1e-9
    assert "accuracy_vs_dense" not in rows["dense"].distributed


def _env(fingerprint: str, machine: str = "m1") -> dict:
    return {
        "code_fingerprint": fingerprint,
        "hardware_class": machine,
        "device_name": "cpu",
        "torch": "2.13.0",
        "torch_geometric": "2.8.0",
        "python": "3.11.7",
        "threads": 2,
    }


def _identical(label: str, rnd: int, env: dict, step: float = 0.1, epochs: int = 1) -> RunResult:
    r = _run(label, rnd, step, Flags())
    r.environment = env
    r.config = {**r.config, "epochs": epochs, "seed": rnd, "flags": Flags().to_dict()}
    return r


def test_a_mixed_folder_is_refused_naming_what_differs():
    """Baseline and int32 identical, plus a second baseline set from another code fingerprint (twice as slow):
    merged, it would read as a significant gain from nothing; refused, with the fingerprints and counts."""
    import pytest

    from gnnbench.measure.compare import MixedSweepError, identity_problem

    one = [r for k in range(3) for r in (_identical("baseline", k, _env("aaaa")), _identical("int32", k, _env("aaaa")))]
    assert identity_problem(one) is None
    assert compare(one).rows  # one sweep compares
    other = [_identical("baseline", k + 3, _env("bbbb"), step=0.2) for k in range(3)]
    with pytest.raises(MixedSweepError, match=r"code_fingerprint differs \(aaaa in 6, bbbb in 3\)"):
        compare(one + other)
    moved = [_identical("baseline", k + 3, _env("aaaa", machine="m2")) for k in range(3)]
    assert "hardware_class differs (m1 in 6, m2 in 3)" in identity_problem(one + moved)
    # another host of the same class is the same sweep (rounds on several identical machines)
    host = [_identical("baseline", k + 3, {**_env("aaaa"), "machine": "other-host"}) for k in range(3)]
    assert identity_problem(one + host) is None
    longer = [_identical("baseline", k + 3, _env("aaaa"), epochs=5) for k in range(3)]
    assert "base configuration's epochs differs" in identity_problem(one + longer)
    # what an entry or a round sets (flags, seed, nproc, ranks' threads) is not a second identity
    ranks = _identical("int32", 0, {**_env("aaaa"), "threads": 1})
    ranks.config = {**ranks.config, "nproc": 2, "flags": Flags(parallel="data").to_dict()}
    assert identity_problem(one + [ranks]) is None
