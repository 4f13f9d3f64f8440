import json
import subprocess
import sys

import pytest

from gnnbench.cli import main
from gnnbench.graphs.io import save_npz


def test_graph_command_prints_statistics(capsys):
    assert main(["graph", "--preset", "tiny"]) == 0
    out = capsys.readouterr().out
    for label in ("nodes", "10,000", "edges (directed)", "degree quantiles", "p99", "max degree",
                  "tail exponent (Hill)", "index bytes int64", "index bytes int32", "generation time",
                  "preparation (baseline)", "preparation (int32,cached_norm,csr)"):
        assert label in out, label


def test_graph_command_json_and_overrides(capsys):
    assert main(["graph", "--preset", "tiny", "--nodes", "2000", "--avg-degree", "8", "--exponent", "2.5",
                 "--flags", "int32", "--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert r["stats"]["num_nodes"] == 2000
    assert r["stats"]["num_edges"] == 16_000
    assert r["spec"]["exponent"] == 2.5
    assert r["prepare"]["index_bytes_after"] * 2 == r["prepare"]["index_bytes_before"]
    assert r["stats"]["index_bytes"]["int32"]["total"] * 2 == r["stats"]["index_bytes"]["int64"]["total"]


def test_graph_command_loads_a_file(tmp_path, tiny_graph, capsys):
    path = tmp_path / "mine.npz"
    save_npz(tiny_graph, path)
    assert main(["graph", "--load", str(path), "--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert r["source"] == str(path) and r["stats"]["num_edges"] == tiny_graph.num_edges


def test_bad_input_gives_clear_errors(tmp_path, capsys):
    assert main(["graph", "--preset", "tiny", "--exponent", "1.5"]) == 2
    assert "exponent must be a number in (2, 5] (got 1.5)" in capsys.readouterr().err
    assert main(["graph", "--load", str(tmp_path / "nope.npz")]) == 2
    assert "does not exist" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["graph", "--flags", "int32,warp"])
    assert "unknown optimization 'warp'; accepted: int32, cached_norm, csr, fanout" in capsys.readouterr().err


def test_console_script_entry_point():
    out = subprocess.run([sys.executable, "-m", "gnnbench.cli", "flags"], capture_output=True, text=True, check=True)
    assert "cached_norm" in out.stdout and "expected:" in out.stdout
