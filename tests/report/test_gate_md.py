"""The gate block (docs/regression-gate.md) in words (``gnnbench.report.gate_md``): every null run's exit is named, an inconclusive one
included, and the run times are read from every run, min to max."""

from __future__ import annotations

from gnnbench.report.gate_md import wall_clock_markdown


def _run(seconds, exit_status=0, flagged=(), right=None):
    return {
        "seconds": seconds,
        "exit_status": exit_status,
        "flagged": list(flagged),
        "right_phase": right,
        "per_bench": {"baseline": {}, "csr": {}},
        "ratio": 1.0,
        "p_value": 0.5,
        "high": 1.1,
        "threshold": 1.03,
    }


def _doc():
    slow = {
        "commit": "c",
        "runs": 2,
        "flagged": 1,
        "right_phase": 1,
        "delivered": {"slowdown": 0.048, "low": 0.03, "high": 0.06, "rounds": 12},
        "detail": [_run(410.0, 1, ["baseline"], True), _run(300.0, 3)],
    }
    return {
        "machine": "vm|AMD EPYC|2",
        "threads": 1,
        "base": "abcdef123456",
        "complete": True,
        "settings": {"rounds": 8, "budget": 600, "pilot_rounds": 12},
        "wall_seconds": 1800,
        "benches": {"null": ["baseline", "csr"]},
        "shares": {},
        "results": {
            "null-comment": {
                "runs": 3,
                "flagged": 0,
                "right_phase": 0,
                "detail": [_run(250.0), _run(260.0, 3), _run(290.0)],
            },
            "slow-sample-5": slow,
        },
    }


def test_every_exit_and_the_whole_range_of_run_times_are_stated():
    text = wall_clock_markdown(_doc())
    assert "AMD EPYC, 2 cores (vm)" in text and "abcdef1" in text and "30 minutes" in text
    assert "2 exit 0 (no regression); 1 exit 3 (inconclusive" in text
    assert "0 of 3" in text and "0 of 6" in text  # runs, then benchmark verdicts
    assert "Detection at 5%.** The step 5% slower through sample; delivered +4.8%" in text
    assert "Runs that failed the gate: 1 of 2" in text and "right phase named in 1 of 1" in text
    assert "250-410 s (median 290 s) over all 5 runs" in text and "null runs 250-290 s (median 260 s)" in text


def test_runs_that_also_counted_say_which_measure_raised_each_alarm_and_where_they_ran():
    from gnnbench.report.gate_md import command

    doc = _doc()
    doc["settings"].update({"counts": 1, "injection": "work", "paths": "loss,sample", "null_repeats": 2})
    doc["condition"], doc["cores"] = "the other core busy", [0]
    slow = doc["results"]["slow-sample-5"]["detail"]
    slow[0]["flagged"], slow[0]["count_flagged"] = ["baseline", "micro:sampler (counts)"], ["micro:sampler"]
    slow[1]["flagged"], slow[1]["count_flagged"] = ["micro:sampler (counts)"], ["micro:sampler"]
    doc["results"]["slow-sample-5"]["flagged"] = 2
    null = doc["results"]["null-comment"]["detail"]
    null[2]["flagged"], null[2]["count_flagged"] = ["baseline (counts)"], ["baseline"]
    doc["results"]["null-comment"]["flagged"] = 1
    text = wall_clock_markdown(doc)
    assert "2 cores (vm), pinned to core 0; the other core busy;" in text
    assert "the path's own work again, 1 callgrind process per tree" in text
    assert (
        "Runs that failed the gate: 2 of 2 (100% [34%, 100%]) (by wall time 1 of 2 (50% [9%, 91%]); by counted "
        "instructions 2 of 2"
    ) in text
    assert "null commits that failed the gate: 1 of 3 (33% [6%, 79%]) (by wall time 0 of 3" in text
    assert "benchmark verdicts by wall time: 0 of 6" in text  # a counted alarm is not a wall-clock one
    cmd = command(doc["settings"])
    assert cmd.startswith("python scripts/gate_error_rates.py ") and "--counts 1" in cmd
    assert "--injection work" in cmd and "--paths loss,sample" in cmd and "--null-repeats 2" in cmd
    assert "--rounds" not in cmd  # a default is not repeated


def test_what_the_counts_saw_is_listed_per_slow_run_and_the_worst_null():
    doc = _doc()
    doc["settings"].update({"counts": 1})
    for name, ratios in (("slow-sample-5", (1.012, 1.9)), ("slow-sample-10", (1.025, 3.1))):
        res = doc["results"].setdefault(name, {**doc["results"]["slow-sample-5"], "detail": [_run(300.0)]})
        res["detail"] = [{**_run(300.0), "counts": {"baseline": ratios[0], "micro:sampler": ratios[1]}}]
    doc["results"]["null-comment"]["detail"][0]["counts"] = {"baseline": 0.999, "micro:gather": 1.004}
    text = wall_clock_markdown(doc)
    assert (
        "slow-sample-5 baseline +1.20%, micro:sampler +90.00%; slow-sample-10 baseline +2.50%, micro:sampler +210.00%"
    ) in text
    assert "Null runs: at most +0.40% (micro:gather)." in text


def test_a_file_names_its_injection_and_how_its_rounds_timed_the_two_trees():
    """A sleep-injected duet file says so in its block, its goal-table cell and its command; a file made before
    duet rounds (no ``design`` in its settings) says its rounds alternated, and its command reruns it that way."""
    from gnnbench.report.gate_md import _where_short, command

    old = _doc()
    assert "alternating rounds" in wall_clock_markdown(old) and "alternating rounds" in _where_short(old)
    assert command(old["settings"]).endswith("--design alternating")
    duet = _doc()
    duet["settings"].update({"injection": "sleep", "design": "duet", "budget": 300.0})
    text = wall_clock_markdown(duet)
    assert "slowdowns injected as timed sleeps (not work: the core idles)" in text
    assert "duet rounds (both trees at once, one per core)" in text and "a 300 s budget per run" in text
    assert "; sleeps; wall time; duet rounds" in _where_short(duet)
    cmd = command(duet["settings"])
    assert "--injection sleep" in cmd and "--budget 300" in cmd and "--design" not in cmd


def test_an_inconclusive_null_run_names_the_primary_benchmarks_that_could_not_see_the_sensitivity():
    doc = _doc()
    runs = doc["results"]["null-comment"]["detail"]
    runs[0].update(exit_status=3, blind=[], time_blind=["micro:sampler"])
    runs[1].update(blind=["baseline"], time_blind=["micro:sampler"])
    text = wall_clock_markdown(doc)
    assert "2 exit 3 (inconclusive: nothing regressed, but a primary benchmark could not resolve the " in text
    assert "sensitivity: micro:sampler in 2 runs, baseline in 1 run)" in text


def test_a_file_without_null_runs_says_so_and_states_the_slow_runs_times_only():
    doc = _doc()
    del doc["results"]["null-comment"]
    text = wall_clock_markdown(doc)
    assert "No null commit measured yet: the file holds its slow commits only, and a rerun of its command" in text
    assert "Their exits" not in text
    assert "over all 2 runs." in text and "the null runs" not in text
