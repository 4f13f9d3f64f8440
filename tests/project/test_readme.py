"""README's optimization table is exactly ``gnnbench flags --markdown``, and its first two commands stay put."""

from gnnbench.cli.tables import registry_markdown
from tests.helpers import ROOT

README = (ROOT / "README.md").read_text()


def test_readme_optimization_table_equals_the_registry():
    start, end = "<!-- registry:start -->\n", "\n<!-- registry:end -->"
    assert start in README and end in README, "README lost its registry markers"
    table = README[README.index(start) + len(start) : README.index(end)]
    assert table == registry_markdown(), "README's table is stale: paste `gnnbench flags --markdown` into it"


def test_readme_opens_with_setup_and_test_commands():
    blocks = README.split("```bash\n")[1:3]
    assert "pip install torch==2.13.0" in blocks[0] and ".venv/bin/gnnbench" in blocks[0]
    assert blocks[1].startswith(".venv/bin/python -m pytest -q")


def test_readme_reference_block_is_generated_from_the_committed_reference():
    """The reference's published figures are `python -m gnnbench.report.reference_md` of the committed folder:
    a changed result file or a hand-edited figure fails here."""
    from gnnbench.report.reference_md import MARKERS, reference_markdown

    start, end = MARKERS
    assert start in README and end in README, "README lost its reference markers"
    block = README[README.index(start) + len(start) : README.index(end)]
    assert block == reference_markdown(ROOT / "results" / "reference" / "compare-small-cpu"), (
        "README's reference block is stale: paste `python -m gnnbench.report.reference_md "
        "results/reference/compare-small-cpu` into it"
    )


# the published error-rate files, in README's order: wall clock with timed busy-waits; both measures with work
# injected, the other core busy, then idle
GATE_RATES = ("gate-error-rates.json", "gate-error-rates-work-busy.json", "gate-error-rates-work-idle.json")


def test_readme_gate_block_is_generated_from_the_published_gate_files():
    """The gate's published figures (error rates, every run's exit and time, the counted instructions) are
    `python -m gnnbench.report.gate_md` of the committed files: a changed file or a hand-edited figure fails."""
    from gnnbench.report.gate_md import MARKERS, gate_markdown

    start, end = MARKERS
    assert start in README and end in README, "README lost its gate markers"
    block = README[README.index(start) + len(start) : README.index(end)]
    ref = ROOT / "results" / "reference"
    rates = [ref / name for name in GATE_RATES]
    assert all(p.is_file() for p in rates), [p.name for p in rates if not p.is_file()]
    assert block == gate_markdown(rates, ref / "gate-counts.json"), (
        "README's gate block is stale: paste `python -m gnnbench.report.gate_md "
        + " ".join(f"results/reference/{p.name}" for p in rates)
        + " results/reference/gate-counts.json` into it"
    )


def test_the_gate_docs_goal_table_is_generated_from_the_published_gate_files():
    """docs/regression-gate.md's measured-against-goal table is ``gate_md.goals_markdown`` of the published
    error-rate files: a rerun, or a figure typed by hand, fails here."""
    from gnnbench.report.gate_md import GOALS_MARKERS, goals_markdown

    docs = (ROOT / "docs" / "regression-gate.md").read_text()
    start, end = GOALS_MARKERS
    assert start in docs and end in docs, "docs/regression-gate.md lost its goal-table markers"
    ref = ROOT / "results" / "reference"
    rates = [ref / name for name in GATE_RATES]
    assert all(p.is_file() for p in rates), [p.name for p in rates if not p.is_file()]
    assert docs[docs.index(start) + len(start) : docs.index(end)] == goals_markdown(rates), (
        "docs/regression-gate.md's goal table is stale: paste `gnnbench.report.gate_md.goals_markdown` of "
        + ", ".join(p.name for p in rates)
    )


def test_readme_labor_paragraph_matches_its_sweep():
    """The LABOR paragraph's target, its calibration and the labor row's time-to-accuracy interval are those the
    committed LABOR sweep gives (the report's own loader and comparison)."""
    import json
    import re

    from gnnbench.measure.compare import compare
    from gnnbench.report.inputs import load_inputs, sweep_equivalence_margin, sweep_rule

    sweep = ROOT / "results" / "reference" / "compare-small-labor-cpu"
    at = README.index("**LABOR against fanout on `small`**")
    text = README[at : README.index("The claim is", at)]
    cal = json.loads((sweep / "sweep.json").read_text())["calibration"]
    assert f"target\nvalidation {cal['target']:.4f}, calibrated by its own {len(cal['seeds'])} calibration runs" in text
    runs = load_inputs(runs=[sweep]).runs_of(sweep)
    c = compare(runs, rule=sweep_rule(sweep), equivalence_margin=sweep_equivalence_margin(sweep))
    labor = next(r for r in c.rows if r.label == "labor")
    shown = re.search(r"\| `labor` [^|]*\| \*\*([0-9.]+)x \[([0-9.]+), ([0-9.]+)\]\*\*, reached (\d)/(\d)", text)
    assert shown, "README's LABOR table lost its labor row"
    assert tuple(float(x) for x in shown.group(1, 2, 3)) == tuple(
        round(v, 2) for v in (labor.speedup, labor.speedup_low, labor.speedup_high)
    )
    assert int(shown.group(5)) == labor.rounds
    fanout = next(r for r in c.rows if r.label == "fanout")
    assert (
        f"| <= {fanout.speedup:.2f}x [{fanout.speedup_low:.2f}, {fanout.speedup_high:.2f}], reached 0/{fanout.rounds}"
        in text
    )
    floors = {k: f"+-{100 * (v - 1):.1f}%" for k, v in c.floors.items()}
    assert (
        f"floors step {floors['step']}, epoch {floors['epoch']}, time to accuracy {floors['time_to_accuracy']}"
        in text.replace("\n", " ")
    )


def test_the_statistics_docs_noise_table_is_generated_from_its_file():
    """docs/statistics.md's tables of the two timing designs are ``noise_md.noise_tables`` of the committed
    ``scripts/inprocess_aa.py`` files."""
    from gnnbench.report.noise_md import NOISE_FILES, NOISE_MARKERS, noise_tables

    docs = (ROOT / "docs" / "statistics.md").read_text()
    start, end = NOISE_MARKERS
    assert start in docs and end in docs, "docs/statistics.md lost its noise-table markers"
    folder = ROOT / "results" / "reference"
    assert docs[docs.index(start) + len(start) : docs.index(end)] == noise_tables(folder), (
        "docs/statistics.md's noise tables are stale: paste `gnnbench.report.noise_md.noise_tables` of "
        + ", ".join(NOISE_FILES)
    )


def test_the_gate_docs_duet_table_is_generated_from_its_files():
    """docs/regression-gate.md's A/A table of the round designs is ``noise_md.duet_tables`` of the committed
    ``scripts/duet_aa.py`` files."""
    from gnnbench.report.noise_md import DUET_FILES, DUET_MARKERS, duet_tables

    docs = (ROOT / "docs" / "regression-gate.md").read_text()
    start, end = DUET_MARKERS
    assert start in docs and end in docs, "docs/regression-gate.md lost its duet-table markers"
    folder = ROOT / "results" / "reference"
    assert (folder / DUET_FILES[0]).is_file(), "the duet A/A file is not committed"
    assert docs[docs.index(start) + len(start) : docs.index(end)] == duet_tables(folder), (
        "docs/regression-gate.md's duet tables are stale: paste `gnnbench.report.noise_md.duet_tables` of "
        + ", ".join(DUET_FILES)
    )


def test_the_statistics_docs_in_process_error_rates_are_generated_from_the_a_a_files():
    """docs/statistics.md's error rates at the in-process spread are ``noise_md.inprocess_rates`` of the committed
    A/A files (the stopping rule's simulation, seeded: the same figures every run)."""
    from gnnbench.report.noise_md import RATES_MARKERS, inprocess_rates

    docs = (ROOT / "docs" / "statistics.md").read_text()
    start, end = RATES_MARKERS
    assert start in docs and end in docs, "docs/statistics.md lost its in-process error-rate markers"
    assert docs[docs.index(start) + len(start) : docs.index(end)] == inprocess_rates(ROOT / "results" / "reference"), (
        "docs/statistics.md's in-process error rates are stale: paste `gnnbench.report.noise_md.inprocess_rates`"
    )
