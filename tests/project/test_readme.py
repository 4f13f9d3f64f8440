"""README is a front door: its first two commands stay put, it stays short, and its figures are generated. The
docs pages it links to hold the rest, and every figure they quote about a committed result is a block generated
from the file or checked against it here: the registry table, the reference and its headline, the LABOR and
compression tables, the gate's error rates, and the excerpts of committed logs."""

import json
import re

import pytest

from gnnbench.cli.tables import registry_markdown
from tests.helpers import ROOT

README = (ROOT / "README.md").read_text()
DOCS = ROOT / "docs"
REFERENCE = ROOT / "results" / "reference"
MAX_README_LINES = 250
DIAGNOSE_FILE = REFERENCE / "diagnose-small-cpu.txt"  # the main job's output README opens with
DIAGNOSE_LINES = 11  # how many of its first lines README shows


def _page(name: str) -> str:
    return (DOCS / name).read_text()


def _block(text: str, markers: tuple[str, str], where: str) -> str:
    start, end = markers
    assert start in text and end in text, f"{where} lost its markers {markers}"
    return text[text.index(start) + len(start) : text.index(end)]


def test_readme_opens_with_setup_and_test_commands():
    blocks = README.split("```bash\n")[1:3]
    assert "pip install torch==2.13.0" in blocks[0] and ".venv/bin/gnnbench" in blocks[0]
    assert blocks[1].startswith(".venv/bin/python -m pytest -q")


def test_readme_says_how_to_install_from_the_public_index():
    """A Linux ``torch==2.13.0`` from PyPI is the CUDA build: README names the CPU index."""
    assert "pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu" in README
    assert "pip install -e '.[test]'" in README


def test_readme_is_a_front_door():
    lines = README.count("\n") + (not README.endswith("\n"))
    assert lines <= MAX_README_LINES, f"README has {lines} lines: move a section to a docs page"


def test_readme_keeps_the_slow_test_command():
    assert "## Tests" in README and ".venv/bin/python -m pytest -q -m slow" in README


def test_readme_opens_with_the_committed_output_of_the_main_job():
    """The diagnose block is the first lines of the committed output of ``gnnbench diagnose``."""
    block = _block(README, ("<!-- diagnose:start -->\n", "\n<!-- diagnose:end -->"), "README")
    if not DIAGNOSE_FILE.is_file():
        pytest.skip("results/reference/diagnose-small-cpu.txt not committed yet")
    lines = DIAGNOSE_FILE.read_text().splitlines()[:DIAGNOSE_LINES]
    assert block == "```\n" + "\n".join(lines) + "\n```", (
        f"README's diagnose block is stale: paste the first {DIAGNOSE_LINES} lines of {DIAGNOSE_FILE.name} into it"
    )


def test_readme_headline_is_generated_from_the_committed_reference():
    from gnnbench.report.reference_md import HEADLINE_MARKERS, headline_markdown

    block = _block(README, HEADLINE_MARKERS, "README")
    assert 3 <= block.count("\n") + 1 <= 6
    assert block == headline_markdown(REFERENCE / "compare-small-cpu"), (
        "README's headline is stale: paste `python -m gnnbench.report.reference_md --headline "
        "results/reference/compare-small-cpu` into it"
    )


def test_the_optimization_table_equals_the_registry():
    table = _block(_page("optimizations.md"), ("<!-- registry:start -->\n", "\n<!-- registry:end -->"), "docs")
    assert table == registry_markdown(), (
        "docs/optimizations.md's table is stale: paste `gnnbench flags --markdown` into it"
    )


def test_the_reference_block_is_generated_from_the_committed_reference():
    """The reference's published figures are `python -m gnnbench.report.reference_md` of the committed folder:
    a changed result file or a hand-edited figure fails here."""
    from gnnbench.report.reference_md import MARKERS, reference_markdown

    block = _block(_page("reference.md"), MARKERS, "docs/reference.md")
    assert block == reference_markdown(REFERENCE / "compare-small-cpu"), (
        "docs/reference.md's reference block is stale: paste `python -m gnnbench.report.reference_md "
        "results/reference/compare-small-cpu` into it"
    )


# the published error-rate files, in the block's order: wall clock with timed busy-waits; both measures with work
# injected, the other core busy, then idle; both measures in duet rounds with timed sleeps (what counts cannot see)
GATE_RATES = (
    "gate-error-rates.json",
    "gate-error-rates-work-busy.json",
    "gate-error-rates-work-idle.json",
    "gate-error-rates-sleep-duet.json",
    "gate-error-rates-work-duet.json",
)


def test_the_gate_block_is_generated_from_the_published_gate_files():
    """The gate's published figures (error rates, every run's exit and time, the counted instructions) are
    `python -m gnnbench.report.gate_md` of the committed files: a changed file or a hand-edited figure fails."""
    from gnnbench.report.gate_md import MARKERS, gate_markdown

    block = _block(_page("regression-gate.md"), MARKERS, "docs/regression-gate.md")
    rates = [REFERENCE / name for name in GATE_RATES]
    assert all(p.is_file() for p in rates), [p.name for p in rates if not p.is_file()]
    assert block == gate_markdown(rates, REFERENCE / "gate-counts.json"), (
        "docs/regression-gate.md's gate block is stale: paste `python -m gnnbench.report.gate_md "
        + " ".join(f"results/reference/{p.name}" for p in rates)
        + " results/reference/gate-counts.json` into it"
    )


def test_the_gate_docs_goal_table_is_generated_from_the_published_gate_files():
    """docs/regression-gate.md's measured-against-goal table is ``gate_md.goals_markdown`` of the published
    error-rate files: a rerun, or a figure typed by hand, fails here."""
    from gnnbench.report.gate_md import GOALS_MARKERS, goals_markdown

    rates = [REFERENCE / name for name in GATE_RATES]
    assert all(p.is_file() for p in rates), [p.name for p in rates if not p.is_file()]
    assert _block(_page("regression-gate.md"), GOALS_MARKERS, "docs/regression-gate.md") == goals_markdown(rates), (
        "docs/regression-gate.md's goal table is stale: paste `gnnbench.report.gate_md.goals_markdown` of "
        + ", ".join(p.name for p in rates)
    )


def _compared(folder: str):
    """A committed sweep folder compared as the report compares it."""
    from gnnbench.measure.compare import compare
    from gnnbench.report.inputs import load_inputs, sweep_equivalence_margin, sweep_rule

    sweep = REFERENCE / folder
    runs = load_inputs(runs=[sweep]).runs_of(sweep)
    return compare(runs, rule=sweep_rule(sweep), equivalence_margin=sweep_equivalence_margin(sweep))


def test_the_labor_section_matches_its_sweep():
    """The LABOR table is generated from the committed LABOR sweep; the paragraph's target, its calibration, the
    round that settled ``fanout`` and the floors are those the sweep gives (the report's own loader)."""
    from gnnbench.report.reference_md import SAMPLING_MARKERS, sampling_markdown

    docs = _page("reference.md")
    sweep = REFERENCE / "compare-small-labor-cpu"
    assert _block(docs, SAMPLING_MARKERS, "docs/reference.md") == sampling_markdown(sweep), (
        "docs/reference.md's LABOR table is stale: paste `python -m gnnbench.report.reference_md --sampling "
        "results/reference/compare-small-labor-cpu` into it"
    )
    at = docs.index("**LABOR against fanout on `small`**")
    text = docs[at : docs.index("<!-- sampling:start -->", at)].replace("\n", " ")
    cal = json.loads((sweep / "sweep.json").read_text())["calibration"]
    assert f"target validation {cal['target']:.4f}, calibrated by its own {len(cal['seeds'])} calibration runs" in text
    c = _compared("compare-small-labor-cpu")
    fanout = next(r for r in c.rows if r.label == "fanout")
    assert f"settled `fanout` after round {fanout.rounds}" in text
    floors = {k: f"+-{100 * (v - 1):.1f}%" for k, v in c.floors.items()}
    assert (
        f"floors step {floors['step']}, epoch {floors['epoch']}, time to accuracy {floors['time_to_accuracy']}" in text
    )


def test_the_compression_table_is_generated_from_its_sweep():
    """docs/distributed.md's compression table reads the accuracy at the best validation point, as the report."""
    from gnnbench.report.reference_md import COMPRESSION_MARKERS, compression_markdown

    block = _block(_page("distributed.md"), COMPRESSION_MARKERS, "docs/distributed.md")
    assert block == compression_markdown(REFERENCE / "compression-small-cpu"), (
        "docs/distributed.md's compression table is stale: paste `python -m gnnbench.report.reference_md "
        "--compression results/reference/compression-small-cpu` into it"
    )


def test_the_derived_check_figures_match_their_sweep():
    """Derived against measured: each interval docs/reference.md quotes, and the rounds, are the sweep's."""
    from gnnbench.text import ratio_of

    text = " ".join(_page("reference.md").split())
    rows = {r.label: r for r in _compared("derived-check-tiny-cpu").rows}
    for name in ("sparse_agg", "workers"):
        derived, measured = rows[name], rows[f"{name} (measured)"]
        assert (
            f"`{name}` {ratio_of(derived.primary_ratio)} derived against {ratio_of(measured.primary_ratio)} measured"
            in text
            or f"`{name}` {ratio_of(derived.primary_ratio)} against {ratio_of(measured.primary_ratio)}" in text
        ), name
    rounds = (rows["sparse_agg"].tta_speedup.rounds, rows["workers (measured)"].tta_speedup.rounds)
    assert f"({rounds[0]} and {rounds[1]} rounds: `workers (measured)` settled after {rounds[1]})" in text


def test_the_sequential_a_a_figures_match_their_sweep():
    folder = REFERENCE / "sequential-aa-tiny-cpu"
    text = " ".join(_page("reference.md").split())
    rows = [r for r in _compared("sequential-aa-tiny-cpu").rows if r.label.startswith("A/A ")]
    ran = [p for p in folder.glob("*-r*.json") if not p.name.startswith("calibration")]
    rounds = json.loads((folder / "sweep.json").read_text())["rule"]["max_rounds"]
    assert f"{len(rows)} copies of the baseline as {len(rows)} rows" in text
    assert f"{len(ran)} of {(len(rows) + 1) * rounds} runs ran" in text
    assert f"{sum(r.significant for r in rows)} of the {len(rows)} are significant" in text
    stopped = sum(r.stop is not None and r.stop.rounds == 3 for r in rows)
    assert f"{stopped} of the {len(rows)} stop after round 3" in text


def test_the_watch_overhead_figures_match_their_files():
    """docs/your-own.md and docs/advice.md quote the watch's measured end-to-end cost as the committed files
    give it."""
    for page in ("your-own.md", "advice.md"):
        text = " ".join(_page(page).split())
        for preset in ("tiny", "small"):
            doc = json.loads((REFERENCE / "watch-overhead" / f"{preset}.json").read_text())
            assert f"{doc['ratio']:.3f}x [{doc['low']:.3f}, {doc['high']:.3f}]" in text, (page, preset)


_EXCERPT = re.compile(r"<!-- excerpt: (\S+) -->\n```\n(.*?)\n```", re.S)


def _quoted(line: str, source: list[str]) -> bool:
    """Whether ``line`` is a line of ``source``, whitespace aside, or one abridged with ``...``: its pieces in
    order within one line."""
    pieces = [" ".join(p.split()) for p in line.split("...") if p.strip()]
    for s in source:
        s, at = " ".join(s.split()), 0
        for piece in pieces:
            at = s.find(piece, at)
            if at < 0:
                break
            at += len(piece)
        else:
            return True
    return False


def test_every_excerpt_quotes_its_committed_file():
    """A block marked ``<!-- excerpt: FILE -->`` copies lines of the committed FILE (``...`` marks a cut)."""
    found = 0
    for page in sorted(DOCS.glob("*.md")):
        for path, body in _EXCERPT.findall(page.read_text()):
            source = (ROOT / path).read_text().splitlines()
            for line in body.splitlines():
                if line.strip() and line.strip() != "...":
                    assert _quoted(line, source), f"{page.name}: not in {path}: {line}"
            found += 1
    assert found, "no excerpt of a committed output is marked"


_LINK = re.compile(r"\]\(([^)\s]+)\)")
_FENCE = re.compile(r"^```.*?^```", re.S | re.M)


def _anchors(text: str) -> set[str]:
    """The anchors GitHub gives a page's headings."""
    out = set()
    for line in _FENCE.sub("", text).splitlines():
        if line.startswith("#"):
            out.add(re.sub(r"[^\w\- ]", "", line.lstrip("#").strip().lower()).replace(" ", "-"))
    return out


@pytest.mark.parametrize("page", ["README.md"] + sorted(f"docs/{p.name}" for p in DOCS.glob("*.md")))
def test_relative_links_resolve(page):
    """Every relative link of README and the docs pages names an existing file, and a heading where it names one."""
    path = ROOT / page
    text = path.read_text()
    broken = []
    for target in _LINK.findall(_FENCE.sub("", text)):
        if re.match(r"[a-z]+:", target):
            continue
        file, _, anchor = target.partition("#")
        dest = (path.parent / file).resolve() if file else path
        if not dest.exists():
            broken.append(target)
        elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest.read_text()):
            broken.append(target)
    assert not broken, f"{page}: links that do not resolve: {broken}"


def test_the_statistics_docs_noise_table_is_generated_from_its_file():
    """docs/statistics.md's tables of the two timing designs are ``noise_md.noise_tables`` of the committed
    ``scripts/inprocess_aa.py`` files."""
    from gnnbench.report.noise_md import NOISE_FILES, NOISE_MARKERS, noise_tables

    docs = _page("statistics.md")
    assert _block(docs, NOISE_MARKERS, "docs/statistics.md") == noise_tables(REFERENCE), (
        "docs/statistics.md's noise tables are stale: paste `gnnbench.report.noise_md.noise_tables` of "
        + ", ".join(NOISE_FILES)
    )


def test_the_gate_docs_duet_table_is_generated_from_its_files():
    """docs/regression-gate.md's A/A table of the round designs is ``noise_md.duet_tables`` of the committed
    ``scripts/duet_aa.py`` files."""
    from gnnbench.report.noise_md import DUET_FILES, DUET_MARKERS, duet_tables

    docs = _page("regression-gate.md")
    assert (REFERENCE / DUET_FILES[0]).is_file(), "the duet A/A file is not committed"
    assert _block(docs, DUET_MARKERS, "docs/regression-gate.md") == duet_tables(REFERENCE), (
        "docs/regression-gate.md's duet tables are stale: paste `gnnbench.report.noise_md.duet_tables` of "
        + ", ".join(DUET_FILES)
    )


def test_the_statistics_docs_in_process_error_rates_are_generated_from_the_a_a_files():
    """docs/statistics.md's error rates at the in-process spread are ``noise_md.inprocess_rates`` of the committed
    A/A files (the stopping rule's simulation, seeded: the same figures every run)."""
    from gnnbench.report.noise_md import RATES_MARKERS, inprocess_rates

    docs = _page("statistics.md")
    assert _block(docs, RATES_MARKERS, "docs/statistics.md") == inprocess_rates(REFERENCE), (
        "docs/statistics.md's in-process error rates are stale: paste `gnnbench.report.noise_md.inprocess_rates`"
    )
