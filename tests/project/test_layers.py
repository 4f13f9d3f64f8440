"""The package's layering: each band of the pipeline is one folder, and imports only point down.

``BANDS`` is the picture in CONTRIBUTING.md, top to bottom. A module may import from its own band or from a
band listed before it; an import that runs back up (a layer that reaches into the code that uses it) fails here,
naming the module, the line and both bands. Imports under ``if TYPE_CHECKING:`` are annotations only and are
not counted.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.helpers import ROOT

PACKAGE = ROOT / "gnnbench"

BANDS = (
    ("shared", ("flags", "env", "atomic", "timing", "background", "host_memory", "text", "lazy")),
    ("process", ("process",)),
    ("graphs", ("graphs",)),
    ("sampling", ("sampling",)),
    ("features", ("features",)),
    ("models", ("models",)),
    ("parallel", ("parallel",)),
    ("training", ("training",)),
    ("registry", ("registry",)),
    ("measure", ("measure",)),
    ("advice", ("advice", "microbench")),
    ("report", ("report",)),
    ("cli", ("cli",)),
)
_BAND_OF = {top: i for i, (_, tops) in enumerate(BANDS) for top in tops}


def _modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if p.name != "__init__.py" or p.parent != PACKAGE)


def _top(path: Path) -> str:
    rel = path.relative_to(PACKAGE)
    return rel.parts[0] if len(rel.parts) > 1 else rel.stem


def _imports(path: Path) -> list[tuple[int, str]]:
    """``(line, top-level gnnbench name)`` of every runtime import of a gnnbench module in ``path``."""
    tree = ast.parse(path.read_text())
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            skipped.update(id(n) for n in ast.walk(node))
    out = []
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module] + (
                [f"{node.module}.{a.name}" for a in node.names] if node.module == "gnnbench" else []
            )
        else:
            continue
        for name in names:
            parts = name.split(".")
            if parts[0] == "gnnbench" and len(parts) > 1:
                out.append((node.lineno, parts[1]))
    return out


def test_every_module_belongs_to_a_band():
    tops = {_top(p) for p in _modules()}
    assert not tops - set(_BAND_OF), (
        f"modules or folders not placed in tests/project/test_layers.py BANDS (and the "
        f"layout in CONTRIBUTING.md): {sorted(tops - set(_BAND_OF))}"
    )


def test_top_level_holds_only_shared_modules():
    top_files = sorted(p.stem for p in PACKAGE.glob("*.py") if p.name != "__init__.py")
    assert len(top_files) <= 12, f"the top level of gnnbench/ should hold only shared modules (got {top_files})"


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(PACKAGE.parent)))
def test_imports_only_point_down(path):
    band = _BAND_OF[_top(path)]
    upward = [
        f"line {line}: imports gnnbench.{top} ({BANDS[_BAND_OF[top]][0]}), above its own band {BANDS[band][0]}"
        for line, top in _imports(path)
        if top in _BAND_OF and _BAND_OF[top] > band
    ]
    assert not upward, f"{path.relative_to(PACKAGE.parent)}: " + "; ".join(upward)


def test_no_module_imports_a_private_name_of_another():
    """A name that starts with ``_`` is its module's own: another module that needs it needs a public name, so
    what a module offers is what its public names say."""
    crossing = []
    for path in _modules():
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("gnnbench"):
                crossing += [
                    f"{path.relative_to(PACKAGE.parent)}:{node.lineno} imports {node.module}.{a.name}"
                    for a in node.names
                    if a.name.startswith("_") and not a.name.startswith("__")
                ]
    assert not crossing, "private names imported across modules: " + "; ".join(crossing)


# gnnbench/measure/'s rooms, bottom to top: a room imports from itself or a room listed before it (the gate's duet
# rounds serve the sweep's entries that set the process, gnnbench/measure/sweep/duet.py)
MEASURE_ROOMS = ("stats", "run", "compare", "gate", "sweep")


@pytest.mark.parametrize("room", MEASURE_ROOMS)
def test_measure_rooms_import_only_down(room):
    order = {r: i for i, r in enumerate(MEASURE_ROOMS)}
    upward = []
    for path in sorted((PACKAGE / "measure" / room).rglob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            for name in names:
                parts = name.split(".")
                if parts[:2] == ["gnnbench", "measure"] and len(parts) > 2 and order.get(parts[2], -1) > order[room]:
                    upward.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno} imports {name}")
    assert not upward, f"measure/{room} reaches up: " + "; ".join(upward)


def test_measure_is_its_rooms():
    loose = sorted(p.name for p in (PACKAGE / "measure").glob("*.py") if p.name != "__init__.py")
    rooms = sorted(p.name for p in (PACKAGE / "measure").iterdir() if p.is_dir() and p.name != "__pycache__")
    assert not loose and rooms == sorted(MEASURE_ROOMS), (loose, rooms)
