"""The CI recipe in docs/ci/regression-gate.yml runs commands that exist: every ``gnnbench`` invocation in its
``run:`` steps parses with the CLI's own parser (GitHub expressions stand in as plain revisions)."""

import re
import shlex

import pytest

from gnnbench.cli.parser import build_parser
from tests.helpers import ROOT

RECIPE = ROOT / "docs" / "ci" / "regression-gate.yml"


def _gnnbench_commands(text: str) -> list[list[str]]:
    commands = []
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if "gnnbench " not in line:
            continue
        line = re.sub(r"\$\{\{[^}]*\}\}", "main", line)  # ${{ github.base_ref }} -> a revision
        argv = shlex.split(line)
        start = next(i for i, a in enumerate(argv) if a.endswith("gnnbench"))
        commands.append(argv[start + 1 :])
    return commands


def test_every_gnnbench_command_of_the_ci_recipe_parses():
    commands = _gnnbench_commands(RECIPE.read_text())
    assert commands, "the recipe runs the gate"
    parser = build_parser()
    for argv in commands:
        args = parser.parse_args(argv)
        assert callable(args.func), argv
    gate = next(a for a in commands if a[0] == "regress")
    args = parser.parse_args(gate)
    assert args.rounds >= 8 and args.budget > 0 and args.out, "enough rounds to see 10%, extra rounds allowed"
    assert args.counts >= 1 and "apt-get install -y valgrind" in RECIPE.read_text(), "instructions counted too"


def test_the_recipe_checks_out_the_history_the_gate_needs():
    text = RECIPE.read_text()
    assert "fetch-depth: 0" in text and "torch==2.13.0" in text


def test_an_unknown_option_would_be_caught():
    with pytest.raises(SystemExit):
        build_parser().parse_args(["regress", "main", "--no-such-option"])
