"""README's optimization table is exactly ``gnnbench flags --markdown``, and its first two commands stay put."""


from gnnbench.cli.tables import registry_markdown
from tests.helpers import ROOT

README = (ROOT / "README.md").read_text()


def test_readme_optimization_table_equals_the_registry():
    start, end = "<!-- registry:start -->\n", "\n<!-- registry:end -->"
    assert start in README and end in README, "README lost its registry markers"
    table = README[README.index(start) + len(start):README.index(end)]
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
    block = README[README.index(start) + len(start):README.index(end)]
    assert block == reference_markdown(ROOT / "results" / "reference" / "compare-small-cpu"), (
        "README's reference block is stale: paste `python -m gnnbench.report.reference_md "
        "results/reference/compare-small-cpu` into it")
