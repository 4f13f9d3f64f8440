"""The ``gnnbench`` command line: :mod:`.parser` and :mod:`.inspect_parser` (arguments), :mod:`.commands` and
:mod:`.inspect_commands` (what each command does), :mod:`.progress` (what runs show meanwhile) and :mod:`.tables`
(terminal formatting)."""

from __future__ import annotations

import sys
from typing import Sequence

from gnnbench.cli.parser import build_parser
from gnnbench.flags import UnavailableError
from gnnbench.graphs import GraphError

__all__ = ["main", "build_parser"]


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    try:
        return args.func(args)
    except (GraphError, UnavailableError, ValueError) as exc:  # IndexOverflowError is a ValueError
        print(f"gnnbench: error: {exc}", file=sys.stderr)
        return 2
