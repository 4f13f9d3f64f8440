"""The gate's trees: two commits checked out side by side, what they declare differently, and bisection.

:func:`trees_for` checks BASE and HEAD out in temporary ``git worktree`` folders (``"."``: the working tree as it
is; the user's checkout is never touched); :func:`dependency_difference` names what their ``pyproject.toml``
files declare differently (one environment cannot serve both); :func:`bisect` finds the first bad commit on a
first-parent line with a test it is given (``regress --bisect`` gives it the gate).
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

import tomllib

__all__ = ["trees_for", "commit_of", "dependency_difference", "bisect", "WORKING_TREE"]

WORKING_TREE = "."


def _git(args: list[str], cwd: Path | str) -> str:
    out = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True)
    if out.returncode != 0:
        raise ValueError(f"git {' '.join(args)} failed in {cwd}: {out.stderr.strip() or out.stdout.strip()}")
    return out.stdout.strip()


@contextmanager
def trees_for(base: str, head: str = WORKING_TREE, *, repo: str | Path = ".") -> Iterator[dict[str, Path]]:
    """``{"base": path, "head": path}``: each commit checked out in a temporary worktree (``"."``: the working
    tree itself, as it is), removed afterwards; the user's checkout is never touched."""
    repo = Path(_git(["rev-parse", "--show-toplevel"], repo))
    tmp = Path(tempfile.mkdtemp(prefix="gnnbench-regress-"))
    made: list[Path] = []
    try:
        trees = {}
        for role, rev in (("base", base), ("head", head)):
            if rev == WORKING_TREE:
                trees[role] = repo
                continue
            commit = _git(["rev-parse", "--verify", f"{rev}^{{commit}}"], repo)
            path = tmp / role
            _git(["worktree", "add", "--detach", str(path), commit], repo)
            made.append(path)
            trees[role] = path
        for role, path in trees.items():
            if not (path / "gnnbench" / "__init__.py").is_file():
                raise ValueError(f"{role} ({base if role == 'base' else head}) has no gnnbench package at its root")
        yield trees
    finally:
        for path in made:
            subprocess.run(["git", "worktree", "remove", "--force", str(path)], cwd=repo, capture_output=True)
        shutil.rmtree(tmp, ignore_errors=True)


def commit_of(tree: Path) -> str | None:
    """The commit checked out in ``tree``, ``+dirty`` when it has uncommitted changes (``None`` outside git)."""
    try:
        sha = _git(["rev-parse", "HEAD"], tree)
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"], cwd=tree, capture_output=True, text=True
        ).stdout.strip()
    except (OSError, ValueError, RuntimeError):
        return None
    return sha + ("+dirty" if dirty else "")


def _dependencies(tree: Path) -> dict[str, Any]:
    try:
        project = tomllib.loads((tree / "pyproject.toml").read_text()).get("project", {})
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ValueError(f"{tree / 'pyproject.toml'} cannot be read: {exc}") from None
    return {
        "dependencies": sorted(project.get("dependencies", [])),
        "requires-python": project.get("requires-python"),
        **{f"optional {k}": sorted(v) for k, v in sorted(project.get("optional-dependencies", {}).items())},
    }


def dependency_difference(base: Path, head: Path) -> str | None:
    """What the two trees declare differently in ``pyproject.toml`` (dependencies, optional groups, Python), or
    ``None``: one environment cannot serve two trees that need different packages."""
    a, b = _dependencies(base), _dependencies(head)
    diffs = []
    for key in sorted(set(a) | set(b)):
        if a.get(key) != b.get(key):
            only_a = sorted(set(a.get(key) or []) - set(b.get(key) or [])) if key != "requires-python" else a.get(key)
            only_b = sorted(set(b.get(key) or []) - set(a.get(key) or [])) if key != "requires-python" else b.get(key)
            diffs.append(f"{key}: base {only_a}, head {only_b}")
    return "; ".join(diffs) or None


def bisect(
    good: str,
    bad: str,
    is_bad: Callable[[str], bool],
    *,
    repo: str | Path = ".",
    log: Callable[[str], None] = lambda line: None,
) -> tuple[str, int]:
    """The first bad commit between ``good`` (known good) and ``bad`` (known bad) on ``bad``'s first-parent
    line, by binary search with ``is_bad(commit)`` (the gate against the good end, for ``regress --bisect``);
    returns ``(commit, tests run)``.

    Raises:
        ValueError: when ``good`` is not an ancestor of ``bad``.
    """
    repo = Path(_git(["rev-parse", "--show-toplevel"], repo))
    good_c = _git(["rev-parse", "--verify", f"{good}^{{commit}}"], repo)
    bad_c = _git(["rev-parse", "--verify", f"{bad}^{{commit}}"], repo)
    if subprocess.run(["git", "merge-base", "--is-ancestor", good_c, bad_c], cwd=repo).returncode != 0:
        raise ValueError(f"{good} is not an ancestor of {bad}: nothing to bisect")
    line = _git(["rev-list", "--first-parent", "--reverse", f"{good_c}..{bad_c}"], repo).split()
    lo, hi, tests = 0, len(line) - 1, 0  # line[hi] is bad; everything before lo is good
    while lo < hi:
        mid = (lo + hi) // 2
        tests += 1
        verdict = is_bad(line[mid])
        log(f"{line[mid][:10]}: {'bad' if verdict else 'good'}")
        if verdict:
            hi = mid
        else:
            lo = mid + 1
    return line[hi], tests
