"""The measured figures the docs pages quote in prose, checked against the committed files they come from (issue
58: every figure README or a docs page quotes is a generated block or is checked by a test against its file).

``tests/project/test_readme.py`` checks the generated blocks; this file checks the prose and the hand-laid tables
around them: the replay and simulation figures of docs/statistics.md, the gate's prose, asv's timings, the A/A
files behind the quick local checks, the watch's cost, the sampler's timings and the coverage of a batch. A
figure a seeded simulation or a script gives is rerun here where that is quick; where it is not, the test is
marked ``slow`` (``pytest -m slow``). A figure that no file holds is not quoted by the docs at all.

Prose rounds a printed figure half up (``_rounded``); a figure computed here is formatted as the page prints it."""

import json
import math
import re
import statistics
import subprocess
from decimal import ROUND_HALF_UP, Decimal

import pytest

from tests.helpers import ROOT, load_script

DOCS = ROOT / "docs"
REFERENCE = ROOT / "results" / "reference"
PREVIOUS = REFERENCE / "compare-small-cpu-0671164"  # the reference before, run under the rule before
WORDS = {1: "one", 2: "two", 3: "three", 4: "four"}


def _page(name: str) -> str:
    return (DOCS / name).read_text()


def _text(name: str) -> str:
    """A page with its whitespace collapsed, so that a quoted phrase may span a line break."""
    return " ".join(_page(name).split())


def _rows(name: str, header: str, nth: int = 0) -> list[list[str]]:
    """The body rows, as stripped cells, of the ``nth`` Markdown table on page ``name`` whose header line starts
    with ``header``."""
    lines = _page(name).splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith(header)]
    assert len(starts) > nth, f"{name}: no table headed {header!r}"
    rows = []
    for line in lines[starts[nth] + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([c.strip() for c in line.strip().strip("|").split("|")])
    return rows


def _num(cell: str) -> Decimal:
    """The first number a table cell prints, exactly as printed ("3.27% +- 0.13%": 3.27)."""
    return Decimal(re.search(r"[-+]?\d+(?:\.\d+)?", cell).group())


def _rounded(x: Decimal, places: int = 0) -> str:
    """``x`` rounded half up to ``places`` decimals: a printed figure as prose rounds it."""
    return str(x.quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_UP))


def _table_lines(text: str) -> list[str]:
    """The body rows of the Markdown tables in a script's output (each table's header and rule lines left out)."""
    lines = text.splitlines()
    return [
        line for line, after in zip(lines, lines[1:] + [""]) if line.startswith("| ") and not after.startswith("|-")
    ]


# ------------------------------------------------------------------ docs/statistics.md: the two timing designs


def _noise_file(name: str) -> dict:
    from gnnbench.report.noise_md import NOISE_FILES

    return json.loads((REFERENCE / NOISE_FILES[("idle", "busy").index(name)]).read_text())


def test_the_statistics_docs_read_the_two_designs_as_their_files_give_them():
    """What the noise tables show, in words: the spreads, their ratio, the in-process A/A's mean, each entry's two
    ratios, and that two runs of one configuration in separate processes differ by well over 10%."""
    text = _text("statistics.md")
    idle, busy = _noise_file("idle")["table"], _noise_file("busy")["table"]
    one, apart = idle["baseline"]["one process"], idle["baseline"]["separate processes"]
    narrower = apart["sd_log_ratio"] / one["sd_log_ratio"]
    assert (
        f"spread was {one['sd_log_ratio']:.3f} against {apart['sd_log_ratio']:.3f} for separate processes, "
        f"{narrower:.1f} times narrower (about {narrower**2:.0f} times fewer rounds for the same interval)" in text
    )
    assert f"Its mean ({100 * one['mean_log_ratio']:+.1f}%, at the edge of its interval)" in text
    b_one, b_apart = busy["baseline"]["one process"], busy["baseline"]["separate processes"]
    assert f"spread was {b_one['sd_log_ratio']:.3f} against {b_apart['sd_log_ratio']:.3f};" in text
    for entry in ("sparse_agg", "full_amp"):
        a, b = idle[entry]["one process"], idle[entry]["separate processes"]
        assert (
            f"`{entry}` {a['ratio']:.2f}x [{a['low']:.2f}, {a['high']:.2f}] in one process against "
            f"{b['ratio']:.2f}x [{b['low']:.2f}, {b['high']:.2f}]" in text
        ), entry
    widest = max(abs(x) for t in (idle, busy) for x in t["baseline"]["separate processes"]["log_ratios"])
    assert math.exp(widest) - 1 > 0.10 and "can differ by well over 10%" in text


def test_the_pooled_in_process_edge_reads_the_three_a_a_files():
    """The in-process A/A's edge, pooled over the two committed A/A files and the first idle one (3 rounds, kept in
    git history at ``b8bdc20``), overall and by construction order (even rounds build the base first), is the
    edge the in-process error-rate block simulates."""
    from gnnbench.measure.run.interleaved import BUILD_ORDERS

    got = subprocess.run(
        ["git", "show", "b8bdc20:results/reference/inprocess-aa-small-cpu-idle.json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    if got.returncode:
        pytest.skip("not a git checkout with b8bdc20 in its history (a shallow clone?)")
    docs = [_noise_file("idle"), _noise_file("busy"), json.loads(got.stdout)]
    logs = [d["table"]["baseline"]["one process"]["log_ratios"] for d in docs]
    assert BUILD_ORDERS[0] == "base"

    def mean_se(xs):
        return f"{100 * statistics.fmean(xs):+.1f}% +- {100 * statistics.stdev(xs) / math.sqrt(len(xs)):.1f}%"

    pooled = [x for xs in logs for x in xs]
    base_first = [x for xs in logs for x in xs[0::2]]
    other_first = [x for xs in logs for x in xs[1::2]]
    text = _text("statistics.md")
    assert f"pooled over the three A/A files' {len(pooled)} rounds" in text
    assert f'the side timed as "other" was {mean_se(pooled)} faster, {mean_se(base_first)} in the rounds' in text
    assert f"built the base first and {mean_se(other_first)} in those that built the other first" in text
    assert f"null rows called faster at a {1 + statistics.fmean(pooled):.3f}x edge" in _page("statistics.md")


def test_the_statistics_docs_read_the_in_process_rates_as_their_block_gives_them():
    """The prose after the in-process error-rate block (generated, and checked by test_readme.py) quotes it."""
    rows = _rows("statistics.md", "| condition | per-round sd | rows |")
    by = {(r[0], r[2]): r for r in rows}
    text = _text("statistics.md")
    edge = re.search(r"null rows called faster at a (\d\.\d+)x edge", _page("statistics.md")).group(1)
    assert f"were every row to read {_rounded((Decimal(edge) - 1) * 100, 1)}% faster than it is" in text
    assert (
        f"a sweep of 13 paired rows would call {_rounded(_num(by['idle', '13'][7]), 1)}% of its null rows faster "
        f"on the idle machine ({_rounded(_num(by['idle', '5'][7]))}% with 5 rows)" in text
    )
    assert max(_num(r[3]) for r in rows) < 5 and "positives stay under 5% at both spreads" in text
    assert max(_num(r[6]) for r in rows) < 1 and 'the false "equivalent" rate at the 10% margin stays under 1%' in text


def test_the_in_process_a_a_sweep_figures_match_its_folder():
    """docs/statistics.md's measured A/A sweep in one process: its verdicts (``aa-summary.json``) and its blocks
    split by order (``scripts/pair_positions.py`` over the folder)."""
    folder = REFERENCE / "sequential-aa-inprocess-tiny-cpu"
    summary = json.loads((folder / "aa-summary.json").read_text())
    n, fp, ne = summary["copies"], summary["false_positives"], summary["no_effect"]
    text = _text("statistics.md")
    assert (
        f'{fp} of {n} called significant, {ne} shown "no effect beyond +-10%" (true), {n - fp - ne} not resolved'
        in text
    )
    rows = load_script("pair_positions").positions(folder)
    assert len(rows) == n
    abba = [statistics.fmean(r["ABBA"]) for r in rows.values()]
    baab = [statistics.fmean(r["BAAB"]) for r in rows.values()]
    assert all(a > b for a, b in zip(abba, baab))  # "every copy reads its ABBA blocks higher"
    assert (
        f"(mean block log ratio {min(abba):+.3f} to {max(abba):+.3f} against {min(baab):+.3f} to {max(baab):+.3f})"
        in text
    )
    rounds = statistics.fmean(statistics.fmean(r["rounds"]) for r in rows.values())
    assert f"the 8 copies' round means average {rounds:+.3f}" in text


# ------------------------------------------------------------------ docs/statistics.md: the simulations' prose


def test_the_calibration_prose_quotes_its_table():
    """docs/statistics.md's and docs/measurement.md's words on the calibration quote its table (which the slow
    test below regenerates): ``DEFAULT_REPEATS`` is the smallest R that passes at both spreads."""
    from gnnbench.measure.stats import DEFAULT_REPEATS

    rows = {r[0]: [_num(c) for c in r[1:]] for r in _rows("statistics.md", "| R | A/A (T=1) |")}
    passing = [int(R) for R, (aa, p, aa8, p8) in rows.items() if aa <= 7 and aa8 <= 7 and p >= 80 and p8 >= 80]
    assert min(passing) == DEFAULT_REPEATS
    text = _text("statistics.md")
    assert f"at its 8% end: {DEFAULT_REPEATS}." in text
    four = rows[str(DEFAULT_REPEATS - 1)]
    assert f"{DEFAULT_REPEATS - 1} would pass with {_rounded(four[1])}%" in text
    assert f"detects a 1.25x only {_rounded(four[3])}% of the time" in text
    assert f"+-{100 * math.sqrt(0.05 * 0.95 / 400):.1f}% of Monte Carlo error at 5%" in text
    aa, power = rows[str(DEFAULT_REPEATS)][:2]
    assert (
        f"this calls {_rounded(aa)}% of A/A comparisons significant and detects a true 1.25x {_rounded(power)}% of "
        f"the time at R={DEFAULT_REPEATS}" in _text("measurement.md")
    )


def _stopping_tables():
    """docs/statistics.md's tables of the stopping rule's simulation, by repeats: the A/A rates (rows -> cells),
    the power and rounds ((effect rows, ratio) -> cells), the share of alpha at the last look."""
    aa = {R: {r[0]: r[1:] for r in _rows("statistics.md", f"| rows | fixed {R} rounds |")} for R in (5, 10)}
    power = {}
    for n, R in enumerate((5, 10)):  # the two tables share a header: --repeats 5, then 10
        power[R] = {(r[0], r[1]): r[2:] for r in _rows("statistics.md", "| effect rows | true ratio |", n)}
    share = {(r[0], r[1]): r[2:] for r in _rows("statistics.md", "| repeats | final_share |")}
    return aa, power, share


def test_the_stopping_rule_prose_quotes_its_simulated_tables():
    """The words on the stopping rule (docs/statistics.md, docs/measurement.md) quote its simulated tables."""
    aa, power, share = _stopping_tables()
    text, measurement = _text("statistics.md"), _text("measurement.md")

    def column(R, k):
        return [_num(cells[k]) for cells in aa[R].values()]

    rule = column(5, 2) + column(10, 2)
    before = column(5, 1) + column(10, 1)
    assert f"the simulated A/A rate is {_rounded(min(rule), 1)}% to {_rounded(max(rule), 1)}%, not 5%" in text
    assert f"({_rounded(min(before), 1)}% to {_rounded(max(before), 1)}% before the sd floor" in text
    assert f"simulated A/A: {_rounded(min(rule), 1)}-{_rounded(max(rule), 1)}% for 1-25 rows" in measurement
    five, ten = column(5, 3), column(10, 3)
    assert (
        f"gives {_rounded(min(five), 1)}-{_rounded(max(five), 1)}% at `--repeats 5` and "
        f"{_rounded(min(ten))}-{_rounded(max(ten))}% at `--repeats 10`" in text
    )
    assert f"without the split, {math.floor(min(five))}-{math.ceil(max(five))}%" in measurement
    # power and rounds: cells are power fixed, uncurtailed, rule, rounds effect, rounds null, saved uncurtailed, saved
    p5, p10 = power[5], power[10]
    null5, null10 = p5["0", "1x"], p10["0", "1x"]
    assert (
        f"an A/A sweep saves {_rounded(_num(null5[6]))}% of its processes at `--repeats 5` and "
        f"{_rounded(_num(null10[6]))}% at `--repeats 10`" in text
    )
    assert round(float(_num(null5[6])) * 3 / 100) == 1  # "a third"
    assert "while a third of the processes of a sweep whose rows are mostly null are saved" in text
    assert "futile stops save a third of an A/A sweep's processes" in measurement
    assert {_rounded(_num(null5[5])), _rounded(_num(null10[5]))} == {"4"}
    assert "an interval narrows to it only near the end: about 4% of an A/A sweep's processes" in text
    two = p10["20", "2x"]
    assert round(float(_num(two[6])) / 50) == 1  # "half its processes"
    assert (
        f"a sweep of 2x rows runs half its processes (a 2x row stops after {_rounded(_num(two[3]), 1)} rounds" in text
    )
    assert (
        f"one 1.25x row among 20 is found {p5['1', '1.25x'][1]} of the time instead of {p5['1', '1.25x'][0]} "
        f"(1.5x: {p5['1', '1.5x'][1]} instead of {p5['1', '1.5x'][0]}); at `--repeats 10`, {p10['1', '1.25x'][1]} "
        f"instead of {p10['1', '1.25x'][0]} (1.1x: {p10['1', '1.1x'][1]} instead of {p10['1', '1.1x'][0]})" in text
    )
    assert share["5", "1"][1] == p5["1", "1.25x"][0]
    assert f"(the sd floor costs none: {share['5', '1'][1]} with it, {p5['1', '1.25x'][0]} without)" in text
    cost5 = max(_num(c[1]) - _num(c[2]) for c in p5.values() if c[1] != "-")
    cost10 = max(_num(c[1]) - _num(c[2]) for c in p10.values() if c[1] != "-")
    assert cost5 == 0 and f"none at `--repeats 5` to the table's precision, at most {cost10} points" in text
    assert f"Curtailment costs no power at `--repeats 5` to the tables' precision, and at most {cost10} points" in text
    # the paired floors' table against the tables above
    for r in _rows("statistics.md", "| repeats | rows | A/A rate, rule before |"):
        R, rows = int(r[0]), r[1]
        assert r[2] == aa[R][rows][1] and r[3] == aa[R][rows][2], r
        if rows == "20":
            cells = power[R]["1", "1.25x"]
            assert r[5] == cells[2] and r[7] == cells[6], r


def test_the_equivalence_prose_quotes_its_simulated_tables():
    """The TOST's size at the margin, and what futility that waits for equivalence buys, as the tables give them."""
    text = _text("statistics.md")
    tost = _rows("statistics.md", "| rounds | sd of the log steps ratio |")
    se = 100 * math.sqrt(0.05 * 0.95 / 20000)
    assert max(_num(c) for r in tost for c in r[2:4]) < 5 + se
    assert f"is 5% within one Monte Carlo standard error, {se:.2f}%" in text
    rule = {r[0]: r[1:] for r in _rows("statistics.md", "| per-round sd | called equivalent at 1.1x")}
    assert max(_num(c) for cells in rule.values() for c in cells[:2]) < 5
    before, now, r_before, r_now = (_num(c) for c in rule["0.05"][2:])
    assert (
        f"at no effect the verdict's power rises from {_rounded(before)}% to {_rounded(now)}% at an sd of 0.05, "
        f"paid for by about {_rounded(r_now - r_before, 1)} more rounds" in text
    )
    assert f"keeps its rounds ({_rounded(r_now, 1)} of 5 at a per-round sd of 0.05" in text


def test_the_reference_replay_prose_quotes_its_table():
    """docs/statistics.md's words on the replayed reference, and its factors example, quote the replay table
    (which the slow test below regenerates)."""
    rows = {r[0]: r for r in _rows("statistics.md", "| row | verdict as it ran |")}
    text = _text("statistics.md")
    full, cluster = rows["full_amp"], rows["cluster_gcn"]
    assert f"(`full_amp`: {_rounded(_num(full[5]), 2)}x per step, steps {_num(full[4])}x)" in text
    assert (
        f"(`cluster_gcn`: {_rounded(_num(cluster[4]), 2)}x the epochs at {_rounded(_num(cluster[5]), 1)}x per" in text
    )
    p = float(re.search(r"TOST p (\d\.\d+)", full[3]).group(1))
    assert f"`full_amp` (steps ratio {full[4]}, TOST p = {p:.1g})" in text
    assert f"(its interval becomes {rows['workers'][6]}," in text


def test_the_as_ran_figures_quote_the_previous_references_log():
    """What the rule before did to the reference of ``0671164``: its floors and the intervals it stopped rows
    on, as that sweep's ``compare.log`` prints them."""
    log = (PREVIOUS / "compare.log").read_text()
    floor = re.search(r"noise floor .*?: step \+-(\d+\.\d)%, .*time to accuracy \+-(\d+\.\d)%", log)
    step, tta = float(floor.group(1)), float(floor.group(2))
    rows = {}
    for line in log.splitlines():
        m = re.match(r"([a-z_]+(?: \([a-z-]+\))?)\s*(?:<=)?\d+\.\d+x (\[\d+\.\d+, \d+\.\d+\])", line)
        if m:
            rows.setdefault(m.group(1), m.group(2))
    text = _text("statistics.md")
    assert round(tta / step) == 10
    assert f"(+-{tta}% on the `small` reference of `0671164`, ten times the step clock's +-{step}%" in text
    assert f"(`full_amp` {rows['full_amp']}, `prefetch` {rows['prefetch']})" in text
    twin = rows["workers (measured)"]
    assert f"(the derived `workers` row on {rows['workers']}, while its measured twin gave {twin})" in text
    assert f"as wide as its measured twin's as it ran, {twin})" in text


def test_the_steps_to_the_target_quote_the_reference():
    """The spread of the baseline's steps to the target (its first evaluation at or above the target, in the
    reference's baseline rounds) and the calibrated steps."""
    from gnnbench.measure.run import load_result

    sweep = REFERENCE / "compare-small-cpu"
    calibration = json.loads((sweep / "sweep.json").read_text())["calibration"]
    target = calibration["target"]
    steps = []
    for path in sorted(sweep.glob("baseline-r*.json")):
        run = load_result(path)
        steps.append(next(p.step for p in run.curve if p.val >= target))
    text = _text("statistics.md")
    assert f"reach the target after {min(steps)}-{max(steps)} steps" in text
    assert f"the baseline needs {min(steps)} to {max(steps)} steps depending on the seed" in text
    assert (
        f"the baseline reaches the target in about {statistics.median(calibration['steps_to_target']):.0f} steps"
        in text
    )


def test_the_sequential_a_a_replay_stops_its_rows_as_futile():
    """docs/statistics.md: the measured A/A sweep replayed under the curtailed rule (the report's own loader)."""
    from gnnbench.measure.stats.sequential import FUTILE
    from tests.project.test_readme import _compared

    rows = [r for r in _compared("sequential-aa-tiny-cpu").rows if r.label.startswith("A/A ")]
    futile = sum(r.stop is not None and r.stop.reason == FUTILE and r.stop.look == 3 for r in rows)
    assert (
        f"still calls {sum(r.significant for r in rows)} of {len(rows)} rows significant, and {futile} of the "
        f"{len(rows)} stop as futile after round 3" in _text("statistics.md")
    )


def test_the_clock_prose_quotes_its_table():
    """The epoch clock's paired noise, and what a step clock would narrow, as the noise table gives them."""
    rows = {r[0]: r for r in _rows("statistics.md", "| clock | paired noise")}
    epoch, step = float(rows["epoch (the verdicts' clock)"][1]), float(rows["step mean"][1])
    text = _text("statistics.md")
    assert f"the paired noise of the epoch clock, below, is {epoch:.2f} per round" in text
    assert round(5 * (1 - step / epoch)) == 1 and "would narrow the noise by a fifth" in text


def test_the_sd_floor_factors_are_the_quantiles():
    from gnnbench.measure.stats.sequential import sd_floor

    assert f"({sd_floor(1.0, 3):.2f} `s0` for 3 rounds, {sd_floor(1.0, 5):.2f} `s0` for 5)" in _text("statistics.md")


# ------------------------------------------------------------------ docs/statistics.md: the slow reruns


@pytest.mark.slow
def test_the_stopping_rule_tables_are_the_simulations_output():
    """Every row of ``python -m gnnbench.measure.stats.sequential_sim`` is a row of docs/statistics.md, and the
    paired floors' "before" cells are the rule before paired floors' power and processes saved."""
    from gnnbench.measure.stats.sequential import StoppingRule
    from gnnbench.measure.stats.sequential_sim import simulate, tables

    lines = set(_page("statistics.md").splitlines())
    missing = [row for row in _table_lines(tables()) if row not in lines]
    assert not missing, f"docs/statistics.md's simulated tables are stale: {missing}"
    for r in _rows("statistics.md", "| repeats | rows | A/A rate, rule before |"):
        if r[1] == "20":
            before = simulate(
                StoppingRule(max_rounds=int(r[0]), paired_floor=False),
                rows=20,
                effects=1,
                true_ratio=1.25,
                trials=20000,
                seed=0,
            )
            assert (r[4], r[6]) == (f"{before.power:.1%}", f"{before.saved:.1%}"), r


@pytest.mark.slow
def test_the_calibration_table_is_the_simulations_output():
    from gnnbench.measure.stats.intervals_sim import simulate_calibration

    rows = {r[0]: r[1:] for r in _rows("statistics.md", "| R | A/A (T=1) |")}
    for R in (3, 4, 5, 6):
        got = [
            simulate_calibration(rounds=R, true_ratio=t, trials=4000, seed=0, **worst)
            for worst in ({}, {"process_sd": (0.08, 0.08)})
            for t in (1.0, 1.25)
        ]
        assert rows[str(R)] == [f"{x:.1%}" for x in got], R
    small = [simulate_calibration(rounds=R, trials=400, seed=0) for R in (3, 4, 5, 6)]
    quoted = ", ".join(f"{100 * x:g}%" for x in small[:-1]) + f" and {100 * small[-1]:g}%"
    assert f"With `trials=400, seed=0` the A/A rates are {quoted}" in _text("statistics.md")


@pytest.mark.slow
def test_the_per_step_bootstrap_figure_is_the_simulations_output():
    import torch

    from gnnbench.measure.stats.intervals_sim import simulate_step_times
    from tests.measure.stats.test_stats import bootstrap_ratio

    x = simulate_step_times(rounds=5, trials=1000, seed=0)
    with torch.inference_mode():
        called = [
            bootstrap_ratio(t[:, 0].ravel().tolist(), t[:, 1].ravel().tolist(), resamples=1000)["significant"]
            for t in x
        ]
    rate = sum(called) / len(called)
    assert f"calls about {100 * rate:.0f}% of the simulated A/A comparisons significant" in _text("statistics.md")


@pytest.mark.slow
def test_the_reference_replay_is_the_scripts_output():
    """docs/statistics.md's replay table and the clock's paired noise it reads are ``scripts/verdict_replay.py``
    on the reference of ``0671164``."""
    out = load_script("verdict_replay").replay(PREVIOUS, 0.10)
    lines = set(_page("statistics.md").splitlines())
    rows = _table_lines(out)
    assert rows and not [r for r in rows if r not in lines], "docs/statistics.md's replay table is stale"
    sd = float(re.search(r"per-round log ratios\) (\d\.\d+)", out).group(1))
    text = _text("statistics.md")
    assert f"On the `small` reference of `0671164`: {sd:.3f}." in text
    assert f"the pooled sd of the epoch clock's per-round log ratios) is {sd:.3f}." in text


@pytest.mark.slow
def test_the_quantization_table_is_the_scripts_output():
    out = load_script("verdict_replay").quantization(PREVIOUS)
    first = re.search(r"first evaluation at or above: mean ([-+]\d+\.\d+) steps, rms (\d+\.\d+) \((\d+\.\d)%", out)
    interp = re.search(r"interpolated:\s+mean ([-+]\d+\.\d+) steps, rms (\d+\.\d+) \((\d+\.\d)%\)", out)
    rows = {r[0]: r[1:] for r in _rows("statistics.md", "| reading at cadence 12 |")}
    for label, m in (("first evaluation at or above (before)", first), ("interpolated", interp)):
        assert rows[label] == [f"{m.group(1)} steps", f"{m.group(2)} steps", f"{m.group(3)}%"], label
    curves = re.search(r"(\d+) curves that reach", out).group(1)
    median = re.search(r"median steps to the target (\d+\.\d)", out).group(1)
    assert f"({curves} curves, median {median} steps to the target.)" in _text("statistics.md")


def test_the_quantization_prose_quotes_its_table():
    rows = {r[0]: [_num(c) for c in r[1:]] for r in _rows("statistics.md", "| reading at cadence 12 |")}
    first, interp = rows["first evaluation at or above (before)"], rows["interpolated"]
    assert round(first[0] / 12 * 2) == 1  # late by half a cadence of 12 steps
    assert _rounded(first[1] / interp[1], 1) == "1.5"
    assert "its rms error is half as large again as the interpolated one's" in _text("statistics.md")


@pytest.mark.slow
def test_the_clock_noise_figures_are_the_scripts_output():
    """``verdict_replay.py --noise``: how neighbouring runs share the reference's noise, and what the clock of
    ``0671164`` allowed."""
    script = load_script("verdict_replay")
    lags = dict(re.findall(r"lag (\d+): ([-+]\d\.\d\d)", script.noise(REFERENCE / "compare-small-cpu-62e05ae", 0.10)))
    text = _text("statistics.md")
    assert f"at {lags['1']} (lag 1) and no more at lag 2 ({lags['2']}) or 10 ({lags['10']})" in text
    rows = {r.split(" | ")[0].strip("| "): r.split(" | ") for r in _table_lines(script.noise(PREVIOUS, 0.10))}
    epoch, step = rows["epoch (the verdicts' clock)"], rows["step mean"]
    assert (
        f"(a quieter machine, paired noise {epoch[1]}) the same command gives {epoch[2]} and "
        f"{epoch[3].strip(' |')} rounds for the epoch clock, {step[2]} and {step[3].strip(' |')} for the step mean"
        in text
    )
    before = {
        r.split(" | ")[0].strip("| "): r.split(" | ")
        for r in _table_lines(script.noise(REFERENCE / "compare-small-cpu-5c87221", 0.10))
    }
    sd = before["epoch (the verdicts' clock)"][1]
    assert f"an epoch clock whose paired sd was {_rounded(Decimal(sd), 3)} in the reference at `5c87221`" in text


# ------------------------------------------------------------------ docs/regression-gate.md


def _gate(name: str) -> dict:
    return json.loads((REFERENCE / name).read_text())


def _runs(doc: dict, kind: str) -> list[dict]:
    return [r for key, v in doc["results"].items() if key.startswith(kind) for r in v["detail"]]


def test_the_gate_prose_quotes_the_error_rate_files():
    """The measurements' settings and sizes as the three error-rate files record them."""
    text = _text("regression-gate.md")
    wall, busy, idle = (_gate(f"gate-error-rates{s}.json") for s in ("", "-work-busy", "-work-idle"))
    (measured,) = {r["measured"] for doc in (wall, busy, idle) for r in _runs(doc, "")}
    assert (
        f"({measured} benchmarks, 8 rounds, tiers, the 3% threshold; the first three with alternating rounds and a "
        "600 s budget, the last two in duet rounds at 300 s)"
    ) in text
    s = wall["shares"]
    assert (
        f"(sample {100 * s['sample']:.0f}%, gather {100 * s['gather']:.0f}%, aggregation "
        f"{100 * s['aggregation']:.0f}%, optimizer {100 * s['optimizer']:.0f}%)" in text
    )
    assert f"(the gather is about {100 * s['gather']:.0f}% of it on `tiny`)" in text
    assert {f"{100 * d['shares']['loss']:.0f}" for d in (busy, idle)} == {"1"}
    assert "(phase `forward`; about 1% of the step)" in text and "is about 1% of the step's time" in text
    assert f"against cfad32a, {wall['wall_seconds'] / 60:.0f} minutes on a 2-core VM" in text
    assert f"on a 2-core AMD EPYC VM, {busy['wall_seconds'] / 60:.0f} minutes" in text
    assert f"on a 2-core Intel Xeon VM, {idle['wall_seconds'] / 60:.0f} minutes" in text
    five = [idle["results"][f"slow-{p}-5"]["delivered"] for p in ("loss", "sample")]
    assert (
        f"The pilots delivered less than asked at 5%: {100 * five[0]['slowdown']:+.1f}% (loss) and "
        f"{100 * five[1]['slowdown']:+.1f}% (sample)" in text
    )
    half = max(100 * (d["high"] - d["low"]) / 2 for d in five)
    assert f"only loosely (up to +-{half:.1f} points)" in text


def test_the_gate_prose_quotes_what_the_runs_saw():
    """The section "What the files say" and the paragraph before the gate block, as the work-injection files
    record the runs: inconclusive benchmarks, which measure flagged what, the counts' ratios, the rounds and the
    time."""
    text = _text("regression-gate.md")
    busy, idle = _gate("gate-error-rates-work-busy.json"), _gate("gate-error-rates-work-idle.json")
    runs = _runs(busy, "")
    low, high = min(len(r["inconclusive"]) for r in runs), max(len(r["inconclusive"]) for r in runs)
    assert f"{low} to {high} of the {runs[0]['measured']} benchmarks stayed inconclusive at 10% in every run" in text
    slow = _runs(busy, "slow-")
    by_wall = sum(any(not f.endswith("(counts)") for f in r["flagged"]) for r in slow)
    assert f"the wall clock flagged {WORDS[by_wall]} slow run of {WORDS[len(slow)]}" in text

    def counts(doc, case):
        (run,) = doc["results"][case]["detail"]
        return run["counts"]

    sampler = [busy["results"][f"slow-sample-{k}"]["frac"] for k in (5, 10)]
    micro = [100 * (counts(busy, f"slow-sample-{k}")["micro:sampler"] - 1) for k in (5, 10)]
    base = [100 * (counts(busy, f"slow-sample-{k}")["baseline"] - 1) for k in (5, 10)]
    assert (
        f"(`frac` {sampler[0]:.2f} and {sampler[1]:.2f}) shows as {micro[0]:+.0f}% and {micro[1]:+.0f}% on "
        f"`micro:sampler` and {base[0]:+.1f}% and {base[1]:+.1f}% on the baseline's step" in text
    )
    loss = [100 * (counts(busy, f"slow-loss-{k}")["baseline"] - 1) for k in (5, 10)]
    assert f"slowdown of the step through the loss counted {loss[0]:+.1f}% ({loss[1]:+.1f}%)" in text
    assert f"which the counts saw as {loss[0]:+.1f}% on the baseline's step" in text

    def null_moves(doc):
        return max(abs(c - 1) for r in _runs(doc, "null") for c in r["counts"].values())

    assert f"null runs moved no count by more than {100 * null_moves(busy):.2f}%" in text
    assert f"Null runs moved no count by more than {100 * null_moves(idle):.2f}%" in text
    slow_idle = _runs(idle, "slow-")
    failed = sum(r["exit_status"] == 1 for r in slow_idle)
    assert failed == len(slow_idle) and not any(r["flagged"] for r in _runs(idle, "null"))
    assert f"failed every slow run ({failed} of {len(slow_idle)}, the right phase in each) and neither null run" in text
    by_wall_idle = sum(any(not f.endswith("(counts)") for f in r["flagged"]) for r in slow_idle)
    assert f"the wall clock caught {WORDS[by_wall_idle]}:" in text
    (loss5,) = idle["results"]["slow-loss-5"]["detail"]
    assert f"the loss's 5% at {100 * (loss5['counts']['baseline'] - 1):+.2f}% on the baseline's step" in text
    wall = [f"`{f}`" for f in loss5["flagged"] if not f.endswith("(counts)")]
    assert f"there only on two entries ({', '.join(wall)}), not on the baseline" in text and len(wall) == 2

    def span(doc, what):
        xs = [r[what] for r in _runs(doc, "")]
        return min(xs), max(xs)

    (b0, b1), (i0, i1) = span(busy, "seconds"), span(idle, "seconds")
    assert f"took {b0:.0f}-{b1:.0f} s; on the idle one {i0:.0f}-{i1:.0f} s, with" in text
    r0, r1 = span(idle, "rounds")
    assert f"with {r0} to {r1} rounds:" in text
    assert i1 < 600 and "every run stayed under 10 minutes" in text


def test_the_duet_prose_quotes_the_duet_files():
    """The baseline's spread in each round design, as the three duet A/A files give it."""
    from gnnbench.report.noise_md import DUET_FILES

    sds = []
    for name in DUET_FILES:
        row = _gate(name)["table"]["baseline"]
        sds.append((f"{row['duet']['sd_log_ratio']:.3f}", f"{row['alternating']['sd_log_ratio']:.3f}"))
    text = _text("regression-gate.md")
    assert f"(sd {sds[0][0]} in duet against {sds[0][1]} alternating)" in text
    assert f"the duet's spread fell to {sds[1][0]} against {sds[1][1]} alternating" in text
    assert f"measured so, {sds[2][0]} in duet against {sds[2][1]} alternating" in text


def test_the_gate_null_runs_rank_the_variable_work_entries_widest():
    wall = _gate("gate-error-rates.json")
    widths: dict[str, list[float]] = {}
    for run in _runs(wall, "null"):
        for name, (_ratio, low, high, *_rest) in run["per_bench"].items():
            widths.setdefault(name, []).append(math.log(high / low))
    widest = sorted(widths, key=lambda n: -statistics.fmean(widths[n]))[:3]
    assert widest == ["full_batch", "cluster_gcn", "graphsaint"]
    assert "their intervals are widest, on average over the null runs, for full batch, Cluster-GCN and GraphSAINT" in (
        _text("regression-gate.md")
    )


# ------------------------------------------------------------------ the quick local checks' A/A files

_VARIABLE = ("full_batch", "cluster_gcn", "graphsaint", "workers", "persistent_workers", "prefetch")


def _perf_aa() -> tuple[list[float], list[float], int, int]:
    """The two clean pytest-benchmark A/A pairs (``results/reference/aa/``): the log change of every steady and
    every variable-work benchmark's median, and how many of each one run holds."""
    steady, variable, counts = [], [], set()
    for name in ("perf-aa-pair1.json", "perf-aa-pair2.json"):
        marks = json.loads((REFERENCE / "aa" / name).read_text())["benchmarks"]
        v = [b for b in marks if re.fullmatch(r"test_step_optimized\[(%s)\]" % "|".join(_VARIABLE), b["name"])]
        s = [b for b in marks if b not in v]
        counts.add((len(s), len(s) + len(v)))
        variable += [math.log1p(b["median_change_pct"] / 100) for b in v]
        steady += [math.log1p(b["median_change_pct"] / 100) for b in s]
    ((n_steady, n_all),) = counts
    return steady, variable, n_steady, n_all


def test_the_pytest_benchmark_thresholds_quote_the_a_a_files():
    """docs/regression-gate.md's and docs/tracking.md's A/A figures for pytest-benchmark, and the false-alarm
    table: a normal model at each set's spread (root mean square of the log change), a false alarm being a
    slowdown beyond the gate in any benchmark."""
    from statistics import NormalDist

    steady, variable, n_steady, n_all = _perf_aa()

    def rms(xs):
        return math.sqrt(statistics.fmean(x * x for x in xs))

    def pct(xs, how):
        return 100 * math.expm1(how(xs))

    s, v = rms(steady), rms(variable)
    gate, tracking = _text("regression-gate.md"), _text("tracking.md")
    assert (
        f"Two clean A/A pairs, {len(steady)} comparisons: the sd of the log change (around 0) was {100 * s:.1f}%; "
        f"the median's change ranged from {pct(steady, min):+.1f}% to {pct(steady, max):+.1f}%." in gate
    )
    assert (
        f"{len(variable)} comparisons, sd {100 * v:.1f}%, changes from {pct(variable, min):+.1f}% to "
        f"{pct(variable, max):+.1f}%." in gate
    )
    assert (
        f"{len(steady)} comparisons: the median's change had an sd of {100 * s:.1f}%, with the largest slowdown "
        f"{pct(steady, max):+.1f}%." in tracking
    )
    assert f"{len(variable)} comparisons, sd {100 * v:.1f}%, changes down to {pct(variable, min):.0f}%." in tracking
    rows = {r[0]: r[1:] for r in _rows("regression-gate.md", "| gate on the median |")}
    assert f"| gate on the median | steady set ({n_steady}) | whole suite ({n_all}) |" in _page("regression-gate.md")
    normal = NormalDist()
    rates = {}
    for g in (10, 15, 25):
        p_s, p_v = (1 - normal.cdf(math.log1p(g / 100) / sd) for sd in (s, v))
        rates[g] = (
            1 - (1 - p_s) ** n_steady,
            1 - (1 - p_s) ** n_steady * (1 - p_v) ** (n_all - n_steady),
            1 - (1 - p_v) ** (n_all - n_steady),
        )
        steady_cell = "< 0.1%" if rates[g][0] < 0.001 else f"{rates[g][0]:.1%}"
        whole_cell = f"{rates[g][1]:.0%}" if rates[g][1] >= 0.1 else f"{rates[g][1]:.1%}"
        assert rows[f"{g}%"] == [steady_cell, whole_cell], g
    assert f"the steady set at `median:10%`, about {rates[10][0]:.0%} false alarms per check" in gate
    assert f"the variable-work set at `median:25%`, about {rates[25][2]:.0%}." in gate
    assert f"A 10% gate expects about {rates[10][0]:.0%} false alarms per check." in tracking
    assert f"These need 25% for about {rates[25][2]:.0%} false alarms." in tracking
    assert rates[10][1] > 0.5 and "a single 10% gate fails more than half of A/A checks" in tracking


def test_the_asv_a_a_figures_quote_its_files():
    """The one asv A/A (``results/reference/aa/asv/``): how many benchmarks have a result in both files, and the
    range of their raw ratios."""
    import itertools

    first, second = (
        json.loads((REFERENCE / "aa" / "asv" / f"{h}-existing-py_venv.json").read_text())
        for h in ("eef92f6c", "0e597b2e")
    )
    cols = first["result_columns"]
    ratios = {}
    for key, row in first["results"].items():
        params = row[cols.index("params")] or []
        names = [", ".join(p) for p in itertools.product(*params)] or [""]
        a, b = row[cols.index("result")], second["results"][key][cols.index("result")]
        a, b = (a if isinstance(a, list) else [a]), (b if isinstance(b, list) else [b])
        for name, x, y in zip(names, a, b):
            if x is not None and y is not None and x == x and y == y:
                ratios[f"{key.rsplit('.', 1)[-1]}({name})"] = y / x
    low, high = min(ratios.values()), max(ratios.values())
    int32, sparse_sort = ratios["time_step('int32')"], ratios["time_aggregate('sparse_sort')"]
    subgraphs = {f"{ratios[name]:.2f}" for name in ("time_step('cluster_gcn')", "time_step('graphsaint')")}
    gate, tracking = _text("regression-gate.md"), _text("tracking.md")
    assert f"asv called none of the {len(ratios)} benchmarks with a result in both changed" in gate
    assert f"raw ratios ranged from {low:.2f} to {high:.2f} (int32's step {int32:.2f}, " in gate
    assert f"`sparse_sort` aggregation {sparse_sort:.2f}, Cluster-GCN and GraphSAINT {low:.2f})" in gate
    assert subgraphs == {f"{low:.2f}"}
    assert f"asv's own test called none of {len(ratios)} benchmarks changed; raw ratios were {low:.2f}-{high:.2f}" in (
        tracking
    )


# ------------------------------------------------------------------ docs/tracking.md: what asv's history cost


def _asv_runs(machine: str) -> list[dict]:
    """One row per committed asv result file of ``machine``, in the order they ran: its commit, when its first
    benchmark started and its last ended (seconds), the benchmarks' summed durations and asv's other durations."""
    out = []
    for path in (ROOT / "results" / "asv" / machine).glob("*.json"):
        if path.name == "machine.json":
            continue
        doc = json.loads(path.read_text())
        cols = doc["result_columns"]
        at, took = cols.index("started_at"), cols.index("duration")
        ran = [v for v in doc["results"].values() if len(v) > took and v[at] is not None and v[took] is not None]
        out.append(
            {
                "commit": doc["commit_hash"][:8],
                "start": min(v[at] for v in ran) / 1000,
                "end": max(v[at] / 1000 + v[took] for v in ran),
                "seconds": sum(v[took] for v in ran),
                "other": sum(doc.get("durations", {}).values()),
            }
        )
    return sorted(out, key=lambda r: r["start"])


def _sittings(runs: list[dict], gap: float = 600.0) -> list[list[dict]]:
    """Runs split where more than ``gap`` seconds pass between two commits' first benchmarks."""
    out = [[runs[0]]]
    for before, after in zip(runs, runs[1:]):
        if after["start"] - before["start"] > gap:
            out.append([])
        out[-1].append(after)
    return out


def test_the_asv_costs_quote_the_committed_results():
    """docs/tracking.md's cost of a commit: the whole suite (the durations asv recorded at the first commit of
    ``ci-2core``, its setup cache included) and the set (the median time from one commit's first benchmark to
    the next commit's in one sitting, build included), and the Xeon sitting's length."""
    text = _text("tracking.md")
    amd = _asv_runs("ci-2core")
    whole = amd[0]
    assert whole["commit"] == "4df31f6a"
    assert f"the whole suite costs about {(whole['seconds'] + whole['other']) / 60:.0f} minutes a commit" in text
    assert f"(the durations asv recorded at `{whole['commit']}`, its setup cache included;" in text

    def per_commit(runs):
        return statistics.median(b["start"] - a["start"] for s in _sittings(runs) for a, b in zip(s, s[1:])) / 60

    xeon = _asv_runs("ci-2core-xeon")
    assert (
        f"the set below {per_commit(amd):.1f} minutes on the AMD machine and {per_commit(xeon):.1f} on the Xeon" in text
    )
    sitting = max(_sittings(xeon), key=len)
    minutes = (sitting[-1]["end"] - sitting[0]["start"]) / 60
    assert f"the Xeon sitting: {minutes:.0f} minutes for its {len(sitting)} commits" in text


# ------------------------------------------------------------------ the other pages


def test_the_watch_cost_table_quotes_its_files():
    """docs/advice.md's table of the watch's cost and the words around it, and docs/your-own.md's steps, as
    ``results/reference/watch-overhead/`` gives them."""
    rows = {r[0]: r for r in _rows("advice.md", "| graph | median step unwatched |")}
    advice, own = _text("advice.md"), _text("your-own.md")
    for preset in ("tiny", "small"):
        doc = json.loads((REFERENCE / "watch-overhead" / f"{preset}.json").read_text())
        step = statistics.median(doc["unwatched"])
        row = rows[f"`{preset}`"]
        assert row[1] == f"{1000 * step:.2f} ms", row
        assert row[2] == (
            f"{doc['ratio']:.3f}x [{doc['low']:.3f}, {doc['high']:.3f}] ({doc['rounds']} processes x "
            f"{doc['blocks']} blocks)"
        ), row
        assert row[3].startswith(f"{100 * doc['estimate']:.2f}%"), row
        assert row[5].startswith(f"`--rounds {doc['rounds']} --blocks {doc['blocks']} --steps {doc['steps']}"), row
        assert f"on `{preset}`'s {1000 * step:.2g} ms step" in own
    tiny = json.loads((REFERENCE / "watch-overhead" / "tiny.json").read_text())
    assert tiny["ratio"] - 1 < tiny["goal"] < tiny["high"] - 1
    assert (
        f"Its point estimate meets the goal (under {tiny['goal']:.0%}) and its interval reaches "
        f'{tiny["high"] - 1:.1%}: the file\'s verdict is "{tiny["verdict"]}".' in advice
    )
    small = json.loads((REFERENCE / "watch-overhead" / "small.json").read_text())
    assert small["low"] < 1 < small["high"]
    assert (
        f"below what {small['rounds']} processes resolve (+-{max(1 - small['low'], small['high'] - 1):.0%})" in advice
    )


def test_the_sampler_table_is_its_file():
    """docs/data-pipeline.md's table of one hop per sampled edge: the median of each tree's 3 processes
    (``results/reference/aa/sampler-fanout-three-trees.jsonl``), the trees in the table's order."""
    by: dict[str, dict[int, list[float]]] = {}
    for line in (REFERENCE / "aa" / "sampler-fanout-three-trees.jsonl").read_text().splitlines():
        tree, payload = line.split(" ", 1)
        for point in json.loads(payload):
            by.setdefault(tree, {}).setdefault(point["fanout"], []).append(point["ns_per_edge"])
    header = "| fanout | 5 | 15 | 40 | 100 |"
    fanouts = [int(c) for c in header.strip("| ").split(" | ")[1:]]
    rows = _rows("data-pipeline.md", header)
    assert len(rows) == 3
    for row, tree in zip(rows, ("original", "head", "after")):
        assert row[1:] == [f"{statistics.median(by[tree][f]):.1f}" for f in fanouts], (tree, row)


def test_the_graph_docs_quote_the_calibration_and_the_generator():
    """docs/graphs.md: where the baseline's validation accuracy levels off on ``small`` (the reference's
    calibration plateaus) and the realized statistics of ``tiny`` on seeds 0-2 (generated here)."""
    import dataclasses

    from gnnbench.graphs import PRESETS, generate
    from gnnbench.graphs.stats import edge_homophily, hill_exponent

    text = _text("graphs.md")
    plateaus = json.loads((REFERENCE / "compare-small-cpu" / "sweep.json").read_text())["calibration"]["plateaus"]
    assert f"levels off near {100 * statistics.median(plateaus):.0f}% on `small`" in text
    spec = PRESETS["tiny"]
    hill, homophily = [], []
    for seed in (0, 1, 2):
        graph = generate(dataclasses.replace(spec, seed=seed))
        hill.append(hill_exponent(graph.deg))
        homophily.append(edge_homophily(graph))
    assert (
        f"on `tiny` (seeds 0-2) the Hill estimate is {min(hill):.2f}-{max(hill):.2f} against the spec's "
        f"{spec.exponent:g} and the homophily {min(homophily):.3f}-{max(homophily):.3f} against {spec.homophily:g}, "
        f"about {statistics.fmean(hill) - spec.exponent:+.1f} and {statistics.fmean(homophily) - spec.homophily:+.2f}"
        in text
    )


def test_the_coverage_of_a_batch_quotes_the_reference_runs():
    """docs/rules.md and docs/process.md: the share of ``small`` a batch covers, as the reference's baseline and
    ``fanout`` runs record it (``sampled.coverage``)."""

    def coverage(label):
        runs = [json.loads(p.read_text()) for p in (REFERENCE / "compare-small-cpu").glob(f"{label}-r*.json")]
        return statistics.fmean(r["sampled"]["coverage"] for r in runs), {
            tuple(r["config"]["flags"]["fanout"]) for r in runs
        }

    (base, base_fanout), (fan, fan_fanout) = coverage("baseline"), coverage("fanout")
    assert base_fanout == {(15, 10, 5)} and fan_fanout == {(15, 10)}
    assert (
        f"a batch of the default fanout [15, 10, 5] covers {base:.0%} of the graph and one of [15, 10] {fan:.0%}"
        in _text("rules.md")
    )
    assert f"(a batch's neighbourhood holds about {base:.0%} of the graph)" in _text("process.md")


def test_the_pages_read_the_reference_rows_as_its_block_gives_them():
    """docs/process.md's and docs/best-set.md's words on rows of the reference quote its generated block, and
    docs/best-set.md's cost of the set is the sweep's log."""
    from gnnbench.report.reference_md import sweep_minutes

    rows = {r[0]: r for r in _rows("reference.md", "| row | verdict |")}
    assert _num(rows["`workers`"][5]) < 1 and "`workers` steps no faster than the baseline" in _text("process.md")
    best = _text("best-set.md")
    held = re.search(r"Holm holds back rows such as `(\w+)`", best).group(1)
    assert rows[f"`{held}`"][1] == "not resolved (significant alone, not family-wise)", held
    alone = re.search(r"still pay on its own test, as `(\w+)` and `(\w+)` do there", best).groups()
    chosen = re.search(r"chosen on their own test, not family-wise: ([\w, ]+)\.", _page("reference.md")).group(1)
    for name in alone:
        assert rows[f"`{name}`"][1].startswith("no effect beyond") and name in chosen.split(", "), name
        assert f"as `{alone[0]}` and `{alone[1]}` do there ({_rounded(_num(rows[f'`{name}`'][2]), 2)}x each" in best
    family = re.search(r"Verdicts for \d+ of (\d+) rows", _page("reference.md")).group(1)
    assert f"in the {family}-row reference sweep" in best
    log = REFERENCE / "compare-small-cpu" / "compare.log"
    stamps = []
    for line in log.read_text().splitlines():
        m = re.match(r"(\d\d):(\d\d):(\d\d) (.*)", line)
        if m:
            stamps.append((int(m.group(1)) * 3600 + int(m.group(2)) * 60 + int(m.group(3)), m.group(4)))
    at = next(i for i, (_, what) in enumerate(stamps) if what.startswith("best set:"))
    set_minutes = (stamps[-1][0] - stamps[at - 1][0]) / 60
    runs = [p.name for p in (log.parent / "best-set").glob("*-r*.json")]
    rounds = sum(not name.startswith("baseline") for name in runs)  # the set's own runs, one a round
    assert (
        f"the set's {rounds} rounds and their baselines took {set_minutes:.0f} minutes of the sweep's "
        f"{sweep_minutes(log):.0f}" in best
    )


def test_the_reference_folders_readme_quotes_its_generated_block():
    """``results/reference/compare-small-cpu/README.md``'s findings, as the generated block gives them: every
    ``name`` ratio [interval] it quotes is that row's time to accuracy, the verdict count and the minutes are the
    block's, the best set's reading is the block's, and the A/A spreads are the headline's."""
    from gnnbench.report.reference_md import headline_markdown, reference_markdown

    folder = REFERENCE / "compare-small-cpu"
    readme = " ".join((folder / "README.md").read_text().split())
    block = reference_markdown(folder)
    rows = {r[0].strip("`"): r for r in _table_lines_rows(block)}
    quoted = re.findall(r"`(\w+)` \(?(\d\.\d\dx \[\d\.\d\d, \d\.\d\d\])", readme)
    assert len(quoted) >= 8
    for name, reading in quoted:
        assert rows[name][2].startswith(reading), (name, reading, rows[name][2])
    share = re.search(r"Verdicts for (\d+) of (\d+) rows", block).groups()
    minutes = re.search(r"Wall time from its log: (\d+) minutes", block).group(1)
    assert (
        readme.startswith("# The reference on `small` at `")
        and f"{share[0]} of {share[1]} verdicts in {minutes} minutes" in readme
    )
    assert f"Verdicts for {share[0]} of {share[1]} measured rows" in readme
    best = re.search(r"Measured best set here: (\S+): (\d\.\d\dx \[\d\.\d\d, \d\.\d\d\])", block).groups()
    assert f"`{best[0]}` {best[1]}" in readme
    headline = headline_markdown(folder)
    for design, word in (
        ("one process", "in one process"),
        ("duet", "in duet"),
        ("across processes", "across processes"),
    ):
        sd, mean = re.search(rf"{design} sd (\d\.\d+) \(mean ([-+]\d\.\d+)", headline).groups()
        assert f"{word} sd {sd} (mean {mean}" in readme, design


def _table_lines_rows(text: str) -> list[list[str]]:
    """The body rows of a Markdown table in ``text``, as stripped cells (its header and rule lines left out)."""
    return [[c.strip() for c in line.strip().strip("|").split("|")] for line in _table_lines(text)]


def test_the_floors_stops_quote_the_sweep_that_made_them():
    """docs/statistics.md's example of rows that stopped below the floor before an equivalence test could call
    them: the rounds after which ``compare-small-cpu-next`` stopped them, as its manifest records."""
    stopped = json.loads((REFERENCE / "compare-small-cpu-next" / "sweep.json").read_text())["stopped_after_round"]
    after = {row: int(k) for k, rows in stopped.items() for row in rows}
    assert (after["csr"], after["int32"], after["cached_norm"]) == (3, 4, 4)
    assert "`csr` (after 3 rounds), `int32` and `cached_norm` (after 4) stopped below the floor" in _text(
        "statistics.md"
    )


def test_the_gate_docs_say_which_recorded_exits_predate_time_blind():
    """The busy error-rate file's null runs: their baseline stayed inconclusive by wall time and they exited 0,
    which docs/regression-gate.md says they would not now."""
    data = json.loads((REFERENCE / "gate-error-rates-work-busy.json").read_text())
    nulls = [d for name, r in data["results"].items() if name.startswith("null") for d in r["detail"]]
    assert nulls and all(d["exit_status"] == 0 and "baseline" in d["inconclusive"] for d in nulls)
    assert (
        "the null runs of the busy file, whose baseline stayed inconclusive by wall time, exited 0 then and would exit 3 now"
        in _text("regression-gate.md")
    )


def test_the_smoothing_table_is_the_scripts_output():
    """docs/statistics.md's trailing-mean table is ``verdict_replay.py --smoothing`` on the in-process reference."""
    out = load_script("verdict_replay").smoothing(REFERENCE / "compare-small-cpu-inprocess")
    rows = {r.split(" | ")[0].strip("| `"): [c.strip(" |") for c in r.split(" | ")[2:]] for r in _table_lines(out)}
    docs = {r[0].strip("`"): r[1:] for r in _rows("statistics.md", "| window | 1 (each point) |")}
    for label in ("compile", "fast_dropout", "baseline (A/A)"):
        assert docs[label] == rows[label], label
    assert docs["pooled sd (39 row-rounds)"] == rows["pooled"]
    later = "the baseline's crossing later than the curve's, median steps"
    assert docs["the baseline's crossing later, median steps"] == rows[later]


def test_the_clock_section_quotes_the_in_process_reference():
    """docs/statistics.md's word on the reference after the per-process design: its A/A spreads and its verdict
    share, as the generated headline gives them."""
    from gnnbench.report.reference_md import headline_markdown

    headline = headline_markdown(REFERENCE / "compare-small-cpu")
    one, across = re.search(r"one process sd (\d\.\d+) .*?across processes sd (\d\.\d+)", headline).groups()
    share = re.search(r"Verdicts for (\d+ of \d+) rows", headline).group(1)
    minutes = re.search(r"Wall time from its log: (\d+) minutes", headline).group(1)
    duet = re.search(r"duet sd (\d\.\d+)", headline).group(1)
    text = " ".join(_text("statistics.md").split())
    assert f"of {one} in one process against {across} across processes ({duet} in duet)" in text
    assert f"and {share.replace(' of ', ' of its ')} rows end with a verdict in {minutes} minutes" in text
    before = headline_markdown(REFERENCE / "compare-small-cpu-5c87221")
    one, across = re.search(r"one process sd (\d\.\d+) .*?across processes sd (\d\.\d+)", before).groups()
    share = re.search(r"Verdicts for (\d+ of \d+) rows", before).group(1)
    old_minutes = re.search(r"Wall time from its log: (\d+) minutes", before).group(1)
    assert f"read {one} against {across} and gave {share} verdicts in {old_minutes} minutes" in text


def test_the_minutes_the_reference_cannot_go_below_are_its_logs():
    """docs/statistics.md's floor of the reference's wall time: its runs to the target, and the calibration with
    the rounds 0-2 of the rows trained to their plateau, as the sweep's log times them."""
    from gnnbench.report.sweep_time import logged_runs, run_kind, sweep_time

    log = REFERENCE / "compare-small-cpu" / "compare.log"
    trained = ("trained to the target: numerics change", "trained to the target: work per step changes")
    runs, _ = logged_runs(log.read_text())
    timed = [r for r in runs if r.seconds is not None and not r.best_set]
    to_target = sum(r.seconds for r in timed if run_kind(r) in trained)
    floor = sum(r.seconds for r in timed if run_kind(r) == "calibration") + sum(
        r.seconds for r in timed if run_kind(r) in trained and r.round is not None and r.round < 3
    )
    total = sweep_time(log).seconds
    text = _text("statistics.md")
    assert f"its runs to the target ({to_target / 60:.0f} of its {total / 60:.0f} minutes)" in text
    assert f"plateau come to {floor / 60:.0f} minutes before any short run" in text
    readme = " ".join((REFERENCE / "compare-small-cpu" / "README.md").read_text().split())
    assert f"already come to {floor / 60:.0f} minutes before any short run" in readme


def test_the_sleep_duet_bullet_quotes_its_file():
    """docs/regression-gate.md's words on ``gate-error-rates-sleep-duet.json``: each slow commit's baseline
    ratios and the highest upper bound, the counts' reading, and the run times, as the file records them."""
    data = json.loads((REFERENCE / "gate-error-rates-sleep-duet.json").read_text())
    text = _text("regression-gate.md")
    for name in ("slow-loss-10", "slow-loss-5"):
        runs = data["results"][name]["detail"]
        ratios = [r["ratio"] for r in runs]
        assert all(r["flagged"] and not r["count_flagged"] for r in runs), name
        assert (
            f"read {min(ratios):.3f}-{max(ratios):.3f} with upper bounds at most {max(r['high'] for r in runs):.3f}"
            in text
        )
    assert f"delivered {100 * data['results']['slow-loss-5']['delivered']['slowdown']:+.1f}%" in text
    slow = [r for name, res in data["results"].items() if name.startswith("slow") for r in res["detail"]]
    nulls = [r for name, res in data["results"].items() if name.startswith("null") for r in res["detail"]]
    counts = [r["counts"]["baseline"] for r in slow]
    assert f"the counts read {100 * (statistics.median(counts) - 1):+.1f}% on the baseline in every slow run" in text
    assert all(round(100 * (c - 1), 1) == round(100 * (statistics.median(counts) - 1), 1) for c in counts)
    null_counts = sorted(100 * (r["counts"]["baseline"] - 1) for r in nulls)
    assert f"in the null runs ({null_counts[-1]:.2f} to {null_counts[0]:.2f}%" in text
    seconds = [r["seconds"] for r in slow]
    assert f"every slow run in {min(seconds):.0f}-{max(seconds):.0f} s" in text
    commits = [name for name in data["results"] if name.startswith("null")]
    assert len(commits) == 2 and "The two null commits (a comment, a rename)" in text and data["complete"]
    ratios = [r["ratio"] for r in nulls]
    assert f"{len(nulls)} runs: {sum(bool(r['flagged']) for r in nulls)} failed the gate" in text
    assert f"the baseline read {min(ratios):.3f}-{max(ratios):.3f}" in text
    lows, highs = [r["low"] for r in nulls], [r["high"] for r in nulls]
    assert f"its intervals within [{min(lows):.3f}, {max(highs):.3f}]" in text
    assert f"{sum(r['exit_status'] == 3 for r in nulls)} exited 3" in text
    null_seconds = [r["seconds"] for r in nulls]
    assert f"runs took {min(null_seconds):.0f}-{max(null_seconds):.0f} s" in text


def test_the_duet_entries_table_quotes_its_file():
    """docs/statistics.md's table of the allocator entries timed in duet, as
    ``results/reference/duet-entries-small-cpu.json`` records them (ratio, interval, sd, rounds)."""
    data = json.loads((REFERENCE / "duet-entries-small-cpu.json").read_text())
    text = _text("statistics.md")
    rounds = {row["rounds"] for row in data["table"].values()}
    assert rounds == {data["rounds"]} and f"{data['rounds']} rounds gave" in text
    for name, row in data["table"].items():
        label = "baseline (A/A)" if name == "baseline" else f"`{name}`"
        cells = f"| {label} | {row['ratio']:.3f}x [{row['low']:.3f}, {row['high']:.3f}] | {row['sd_log_ratio']:.3f} |"
        assert cells in text, cells
    assert f"{data['seconds'] / 60:.0f} minutes" in text
    table = (REFERENCE / "compare-small-cpu-5c87221" / "compare-table.txt").read_text().splitlines()
    for name, quoted in re.findall(r"\| `(\w+)` \| [^|]+ \| [^|]+ \| (\d\.\d\dx \[\d\.\d\d, \d\.\d\d\]) \|", text):
        (line,) = [t for t in table if t.startswith(f"{name} ")]
        assert quoted in line, (name, quoted)  # its per-step ratio across processes, as the reference printed it


def test_the_work_duet_bullet_quotes_its_file():
    """docs/regression-gate.md's words on ``gate-error-rates-work-duet.json``: what each slow commit delivered,
    what the counts read, the null runs' baseline and every run's time, as the file records them."""
    data = json.loads((REFERENCE / "gate-error-rates-work-duet.json").read_text())
    text = _text("regression-gate.md")
    res = data["results"]
    slow = [r for name, x in res.items() if name.startswith("slow") for r in x["detail"]]
    nulls = [r for name, x in res.items() if name.startswith("null") for r in x["detail"]]
    assert len(slow) == 8 and all(r["flagged"] and r["count_flagged"] and r["right_phase"] for r in slow)
    assert len(nulls) == 4 and all(r["exit_status"] == 0 for r in nulls) and data["complete"]
    loss = sorted(100 * res[f"slow-loss-{n}"]["delivered"]["slowdown"] for n in (10, 5))
    sample = sorted(100 * res[f"slow-sample-{n}"]["delivered"]["slowdown"] for n in (10, 5))
    assert f"+{loss[1]:.1f}% and +{sample[1]:.1f}% at 10%, +{loss[0]:.1f}% and +{sample[0]:.1f}% at 5%" in text

    def counted(name: str, bench: str) -> float:
        return statistics.median(100 * (r["counts"][bench] - 1) for r in res[name]["detail"])

    assert (
        f"+{counted('slow-loss-5', 'baseline'):.1f}% (5%) and +{counted('slow-loss-10', 'baseline'):.1f}% (10%) on "
        f"the baseline, the sampler's at +{counted('slow-sample-5', 'baseline'):.1f}% and "
        f"+{counted('slow-sample-10', 'baseline'):.1f}% (+{counted('slow-sample-5', 'micro:sampler'):.0f}% and "
        f"+{counted('slow-sample-10', 'micro:sampler'):.0f}%"
    ) in text
    ratios = [r["ratio"] for r in nulls]
    assert f"the baseline at {min(ratios):.3f}-{max(ratios):.3f}" in text
    seconds = [r["seconds"] for r in [*slow, *nulls]]
    assert f"runs took {min(seconds):.0f}-{max(seconds):.0f} s" in text
    assert f"{data['wall_seconds'] / 60:.0f} minutes" in text


def test_the_duet_designs_paragraph_quotes_the_sleep_duet_file():
    """The "Whether the duet pays" paragraph's figures: slow runs caught and null runs, from the sleep duet file."""
    data = json.loads((REFERENCE / "gate-error-rates-sleep-duet.json").read_text())
    res = data["results"]
    slow = [r for name, x in res.items() if name.startswith("slow") for r in x["detail"]]
    nulls = [r for name, x in res.items() if name.startswith("null") for r in x["detail"]]
    caught = sum(bool(r["flagged"]) for r in slow)
    alarms = sum(bool(r["flagged"]) for r in nulls)
    assert alarms == 0 and data["settings"]["budget"] == 300
    assert (
        f"ran in duet at a 300 s budget and caught {caught} of {len(slow)} non-work slowdowns of 5% and 10% with no "
        f"false alarm in {len(nulls)} null runs"
    ) in _text("regression-gate.md")


DUET_SWEEPS = ("compare-small-allocators-duet-oneway-cpu", "compare-small-allocators-duet-cpu")
DUET_ROWS = (
    "baseline (A/A, duet)",
    "tcmalloc",
    "jemalloc",
    "glibc_tuned",
    "jemalloc_pyg",
    "baseline (A/A, one process)",
)


def test_the_duet_sweeps_table_quotes_its_sweeps():
    """docs/statistics.md's table of the allocator rows timed in duet inside the sweep: per row and sweep, the step
    ratio over rounds with its interval and the sd of the per-round log ratio, as the report's own loader reads
    the two committed folders; and each sweep's verdicts."""
    from tests.project.test_readme import _compared

    text = _text("statistics.md")
    compared = [_compared(folder) for folder in DUET_SWEEPS]
    for label in DUET_ROWS:
        cells = []
        for c in compared:
            (row,) = [r for r in c.rows if r.label == label]
            s = row.step_speedup
            xs = [x for x in s.log_ratios if x == x]
            cells.append(f"{s.ratio:.3f}x [{s.low:.3f}, {s.high:.3f}] ({len(xs)}) | {statistics.stdev(xs):.3f}")
        shown = label if label.startswith("baseline") else f"`{label}`"
        line = f"| {shown} | {cells[0]} | {cells[1]} |"
        assert line in text, line
    for folder, c in zip(DUET_SWEEPS, compared):
        family = [r for r in c.rows if r.label in DUET_ROWS[1:5]]
        decided = sum(bool(r.significant) or bool((r.no_effect or {}).get("equivalent")) for r in family)
        assert f"`{folder}`: verdicts for {decided} of {len(family)} rows" in text, folder


def test_the_trajectory_threads_table_quotes_its_file():
    """docs/statistics.md's table of the reference's baseline rounds rerun at one thread, two at once, as
    ``results/reference/trajectory-threads-small-cpu.json`` records them."""
    data = json.loads((REFERENCE / "trajectory-threads-small-cpu.json").read_text())
    text = _text("statistics.md")
    rows = [(f"round {r}, one thread, both at once", x) for r, x in data["one_thread"].items()]
    rows.append((f"round {next(iter(data['one_thread']))}, two threads, alone (control)", data["control"]))
    for name, x in rows:
        line = (
            f"| {name} | {x['steps']} ({x['stored_steps']}) | {x['max_val_difference']:.4f} | "
            f"{x['test']:.4f} ({x['stored_test']:.4f}) | {x['step_ms']:.0f} ms |"
        )
        assert line in text, line
    assert data["control"]["max_val_difference"] == 0.0 and data["control"]["steps"] == data["control"]["stored_steps"]
    assert all(x["steps"] == x["stored_steps"] for x in data["one_thread"].values())
    seconds = (
        f"Both runs at once took {data['two_at_once_seconds']:.0f} s, against {data['control_alone_seconds']:.0f} s"
    )
    assert seconds in text


def test_the_trajectory_threads_file_names_the_reference_its_runs_came_from():
    """The stored runs the file compared with are the baseline rounds of the reference folder it names (kept
    under its commit once a newer reference took ``compare-small-cpu``): their steps and test accuracy."""
    data = json.loads((REFERENCE / "trajectory-threads-small-cpu.json").read_text())
    folder = ROOT / data["reference"]
    for r, x in data["one_thread"].items():
        run = json.loads(next(folder.glob(f"baseline-r{r}-*.json")).read_text())
        assert (run["steps"]["total"], run["accuracy"]["test"]) == (x["stored_steps"], x["stored_test"]), r
    assert f"--reference {data['reference']}" in _text("statistics.md")


def test_the_pipelined_hold_prose_quotes_its_file():
    """docs/statistics.md's words on the held pipelined thread: the drains and what they found, and each design's
    interval and spread for the entry and the A/A beside it, as ``inprocess-aa-pipelined-small-cpu.json`` has
    them."""
    data = json.loads((REFERENCE / "inprocess-aa-pipelined-small-cpu.json").read_text())
    text = _text("statistics.md")
    drains = data["held_thread_drains"]["pipelined_loader"]
    assert data["command"].split(" --condition")[0] in text
    assert f"{data['rounds']} rounds" in text
    found = "none" if drains["items_in_progress"] == 0 else str(drains["items_in_progress"])
    assert f"{found} of the {drains['drains']} drains" in text
    assert f"({drains['wait_seconds'] * 1000:.1f} ms waited in all)" in text

    def reading(row: dict) -> str:
        return f"{row['ratio']:.3f}x [{row['low']:.3f}, {row['high']:.3f}]"

    entry, aa = data["table"]["pipelined_loader"], data["table"]["baseline"]
    one, across = entry["one process"], entry["separate processes"]
    assert f"{reading(one)} per step in one process (sd {one['sd_log_ratio']:.4f}" in text
    assert f"the A/A beside it {reading(aa['one process'])}, sd {aa['one process']['sd_log_ratio']:.4f})" in text
    assert f"{reading(across)} in separate processes (sd {across['sd_log_ratio']:.3f})" in text
