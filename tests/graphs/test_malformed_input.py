"""Every malformed graph file is refused with a one-line GraphError naming the file, never another exception.

The property tests draw a valid small graph, apply one corruption, write it (``.npz`` or an edge list
with ``.npy`` files beside it) and load it. The explicit cases below pin the message of each class.
"""

import tempfile
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch_geometric.data import Data

from gnnbench.graphs import GraphError
from gnnbench.graphs.io import load_graph


@st.composite
def small_graphs(draw):
    """A valid graph as numpy arrays: ``[E, 2]`` int64 edges, float32 ``x``, int64 ``y``, disjoint masks."""
    n = draw(st.integers(3, 12))
    m = draw(st.integers(1, 30))
    f = draw(st.integers(1, 4))
    rng = np.random.default_rng(draw(st.integers(0, 2**31 - 1)))
    edges = rng.integers(0, n, (m, 2))
    x = rng.standard_normal((n, f)).astype(np.float32)
    y = rng.integers(0, 3, n)
    split = np.arange(n) % 3
    masks = {name: split == i for i, name in enumerate(("train_mask", "val_mask", "test_mask"))}
    return {"edges": edges, "x": x, "y": y, "masks": masks, "n": n, "rng": rng}


def _expect_refusal(path: Path, *fragments: str) -> str:
    with pytest.raises(GraphError) as info:
        load_graph(path)
    msg = str(info.value)
    assert path.name in msg, msg
    assert "\n" not in msg, msg
    for fragment in fragments:
        assert fragment in msg, (fragment, msg)
    return msg


# ------------------------------------------------------------------ .npz
def _corrupt_npz(g, corruption, data):
    """Arrays for ``np.savez`` after one corruption (or ``bytes`` for a raw file)."""
    n, rng = g["n"], g["rng"]
    arrays = {"edge_index": g["edges"].T.copy(), "x": g["x"], "y": g["y"], **g["masks"]}
    e = arrays["edge_index"]
    i = data.draw(st.integers(0, e.shape[1] - 1))
    if corruption == "id_out_of_range":
        e[data.draw(st.integers(0, 1)), i] = n + data.draw(st.integers(0, 5))
    elif corruption == "negative_id":
        e[data.draw(st.integers(0, 1)), i] = -data.draw(st.integers(1, 5))
    elif corruption == "float_ids":
        arrays["edge_index"] = e + 0.5
    elif corruption == "float_labels":
        arrays["y"] = g["y"] + 0.5
    elif corruption == "nan_feature":
        x = g["x"].copy()
        x[rng.integers(0, n), rng.integers(0, x.shape[1])] = data.draw(st.sampled_from([np.nan, np.inf, -np.inf]))
        arrays["x"] = x
    elif corruption == "labels_length":
        arrays["y"] = np.resize(g["y"], n + data.draw(st.sampled_from([-2, -1, 1, 3])))
    elif corruption == "mask_length":
        arrays["val_mask"] = np.resize(g["masks"]["val_mask"], n + 1)
    elif corruption == "masks_overlap":
        arrays["test_mask"] = g["masks"]["test_mask"] | g["masks"]["train_mask"]
    elif corruption == "train_mask_empty":
        arrays["train_mask"] = np.zeros(n, dtype=bool)
    elif corruption == "partial_masks":
        del arrays["test_mask"]
    elif corruption == "empty_edges":
        arrays["edge_index"] = np.zeros((2, 0), dtype=np.int64)
    elif corruption == "edge_dims":
        three_rows = np.stack([e[0], e[1], e[0]])  # [3, E]; with E == 2 it would be a valid [E, 2] list
        arrays["edge_index"] = data.draw(
            st.sampled_from([e.reshape(-1), e[None]] + ([three_rows] if e.shape[1] != 2 else []))
        )
    elif corruption == "feature_dims":
        arrays["x"] = data.draw(st.sampled_from([g["x"][:, 0], g["x"][None]]))
    elif corruption == "label_dims":
        arrays["y"] = np.stack([g["y"], g["y"]], axis=1)
    elif corruption == "string_edges":
        arrays["edge_index"] = e.astype(str)
    elif corruption == "missing_key":
        del arrays[data.draw(st.sampled_from(["edge_index", "x", "y"]))]
    elif corruption == "num_nodes_mismatch":
        arrays["num_nodes"] = np.int64(n + 2)
    elif corruption == "integer_features":
        arrays["x"] = np.ones((n, 2), dtype=np.int64)
    elif corruption == "bad_lp_pos":
        arrays["lp_val_pos"] = np.array([[0], [n + 7]])
    return arrays


NPZ_CORRUPTIONS = [
    "id_out_of_range",
    "negative_id",
    "float_ids",
    "float_labels",
    "nan_feature",
    "labels_length",
    "mask_length",
    "masks_overlap",
    "train_mask_empty",
    "partial_masks",
    "empty_edges",
    "edge_dims",
    "feature_dims",
    "label_dims",
    "string_edges",
    "missing_key",
    "num_nodes_mismatch",
    "integer_features",
    "bad_lp_pos",
    "truncated",
    "garbage",
    "npy_not_npz",
]


@settings(max_examples=60, deadline=None)
@given(g=small_graphs(), corruption=st.sampled_from(NPZ_CORRUPTIONS), data=st.data())
@pytest.mark.slow
def test_malformed_npz_is_refused(g, corruption, data):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"g_{corruption}.npz"
        if corruption in ("truncated", "garbage", "npy_not_npz"):
            np.savez(path, edge_index=g["edges"].T, x=g["x"], y=g["y"])
            raw = path.read_bytes()
            if corruption == "truncated":
                raw = raw[: data.draw(st.integers(0, len(raw) - 1))]
            elif corruption == "garbage":
                raw = data.draw(st.binary(min_size=0, max_size=200))
            else:
                np.save(Path(tmp) / "a.npy", g["x"])
                raw = (Path(tmp) / "a.npy").read_bytes()
            path.write_bytes(raw)
        else:
            np.savez(path, **_corrupt_npz(g, corruption, data))
        _expect_refusal(path)


# ------------------------------------------------------------- edge lists
def _write_edge_list(path: Path, g, corruption, data):
    """Write an edge list (+ features/labels/masks) for ``g`` with one corruption."""
    n, rng = g["n"], g["rng"]
    sep = data.draw(st.sampled_from([",", "\t", " "]))
    rows = [f"{s}{sep}{d}" for s, d in g["edges"]]
    header = data.draw(st.booleans())
    x, y, masks = g["x"], g["y"], dict(g["masks"])
    i = data.draw(st.integers(0, len(rows) - 1))
    raw = None
    if corruption == "float_id":
        rows[i] = f"{g['edges'][i][0]}.5{sep}{g['edges'][i][1]}"
    elif corruption == "three_columns":
        rows[i] = rows[i] + f"{sep}1"
    elif corruption == "all_three_columns":
        rows = [r + f"{sep}1" for r in rows]
    elif corruption == "one_column":
        rows[i] = str(g["edges"][i][0])
    elif corruption == "word_in_row":  # never the first line: a first line of words is a header
        rows.insert(max(i, 1), f"abc{sep}1")
    elif corruption == "header_only":
        rows, header = [], True
    elif corruption == "empty_file":
        rows, header = ([], False) if data.draw(st.booleans()) else (["# nothing here"], False)
    elif corruption == "negative_id":
        rows[i] = f"-{data.draw(st.integers(1, 9))}{sep}0"
    elif corruption == "id_beyond_features":
        rows[i] = f"{n + data.draw(st.integers(0, 5))}{sep}0"
    elif corruption == "binary":
        raw = data.draw(st.binary(min_size=1, max_size=200)) + b"\x00\xff"
    elif corruption == "not_utf8":
        raw = ("\n".join(rows) + "\n").encode() + b"1,\xff\xfe\n"
    elif corruption == "nan_features":
        x = x.copy()
        x[rng.integers(0, n), 0] = np.nan
    elif corruption == "float_labels":
        y = y.astype(np.float64) + 0.25
    elif corruption == "lengths_disagree":
        y = y[:-1]
    elif corruption == "feature_dims":
        x = x[:, 0]
    elif corruption == "masks_overlap":
        masks["val_mask"] = masks["val_mask"] | masks["test_mask"]
    elif corruption == "truncated_features":
        pass  # handled after writing
    elif corruption == "two_feature_files":
        np.save(path.with_name(f"{path.stem}_x.npy"), x)
    text = ("src" + sep + "dst\n" if header else "") + "".join(r + "\n" for r in rows)
    path.write_bytes(raw if raw is not None else text.encode())
    np.save(path.with_name(f"{path.stem}.features.npy"), x)
    np.save(path.with_name(f"{path.stem}.labels.npy"), y)
    if corruption == "masks_overlap":
        for name, mask in masks.items():
            np.save(path.with_name(f"{path.stem}.{name}.npy"), mask)
    if corruption == "truncated_features":
        feat = path.with_name(f"{path.stem}.features.npy")
        blob = feat.read_bytes()
        feat.write_bytes(blob[: data.draw(st.integers(0, len(blob) - 1))])


EDGE_LIST_CORRUPTIONS = [
    "float_id",
    "three_columns",
    "all_three_columns",
    "one_column",
    "word_in_row",
    "header_only",
    "empty_file",
    "negative_id",
    "id_beyond_features",
    "binary",
    "not_utf8",
    "nan_features",
    "float_labels",
    "lengths_disagree",
    "feature_dims",
    "masks_overlap",
    "truncated_features",
    "two_feature_files",
]


@settings(max_examples=60, deadline=None)
@given(
    g=small_graphs(),
    corruption=st.sampled_from(EDGE_LIST_CORRUPTIONS),
    suffix=st.sampled_from([".csv", ".tsv", ".txt"]),
    data=st.data(),
)
def test_malformed_edge_list_is_refused(g, corruption, suffix, data):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"e_{corruption}{suffix}"
        _write_edge_list(path, g, corruption, data)
        _expect_refusal(path)


# ------------------------------------------------------------ explicit cases
def _npz(tmp_path, name="g.npz", **arrays):
    base = {"edge_index": np.array([[0, 1, 2], [1, 2, 0]]), "x": np.zeros((3, 2), np.float32), "y": np.array([0, 1, 0])}
    base.update(arrays)
    path = tmp_path / name
    np.savez(path, **{k: v for k, v in base.items() if v is not None})
    return path


@pytest.mark.parametrize(
    "arrays,fragments",
    [
        ({"edge_index": np.array([[0, 5], [1, 2]])}, ["node id 5, out of range for num_nodes=3", "[0, 2]"]),
        ({"edge_index": np.array([[0, -1], [1, 2]])}, ["negative node id -1", "[0, 2]"]),
        (
            {"edge_index": np.array([[0.0, 1.5], [1.0, 2.0]])},
            ["edge_index must hold integers (got dtype torch.float64)"],
        ),
        ({"y": np.array([0.0, 1.5, 0.0])}, ["labels y must be integers (got dtype torch.float64)"]),
        ({"x": np.array([[0, np.nan], [0, 0], [0, 0]])}, ["features x contain NaN values", "row 0, column 1"]),
        ({"x": np.array([[0, np.inf], [0, 0], [0, 0]])}, ["features x contain Inf values"]),
        ({"y": np.array([0, 1])}, ["labels y must have shape [3] (got [2])"]),
        ({"x": np.zeros(3)}, ["features x must have shape [num_nodes, num_features] (got [3])"]),
        ({"edge_index": np.array([0, 1, 2])}, ["edge_index must have shape [2, num_edges] (got [3])"]),
        ({"edge_index": np.zeros((2, 0), np.int64)}, ["the graph has no edges"]),
        (
            {
                "train_mask": np.array([1, 0, 0], bool),
                "val_mask": np.array([1, 1, 0], bool),
                "test_mask": np.array([0, 0, 1], bool),
            },
            ["train_mask and val_mask overlap (1 nodes, first node 0)"],
        ),
        (
            {
                "train_mask": np.zeros(3, bool),
                "val_mask": np.array([1, 1, 0], bool),
                "test_mask": np.array([0, 0, 1], bool),
            },
            ["train_mask selects no node"],
        ),
        ({"train_mask": np.array([1, 0, 0], bool)}, ["give all three of train_mask, val_mask, test_mask"]),
        (
            {"train_mask": np.array([2, 0, 0]), "val_mask": np.array([0, 1, 0]), "test_mask": np.array([0, 0, 1])},
            ["train_mask must be bool or 0/1 integers"],
        ),
        ({"num_nodes": np.float64(3.5)}, ["num_nodes must be a single integer"]),
        ({"y": None}, ["has no 'y' array (accepted names: y, labels"]),
        ({"edge_index": np.array([["0", "1"], ["1", "2"]])}, ["edge_index must be a numeric array"]),
        ({"lp_val_pos": np.array([[0], [9]])}, ["lp_val_pos holds node id 9; ids must be in [0, 2]"]),
    ],
)
def test_npz_classes(tmp_path, arrays, fragments):
    _expect_refusal(_npz(tmp_path, **arrays), *fragments)


def test_npz_file_classes(tmp_path):
    good = _npz(tmp_path)
    blob = good.read_bytes()
    (tmp_path / "trunc.npz").write_bytes(blob[: len(blob) // 2])
    _expect_refusal(tmp_path / "trunc.npz", "cannot read", "as an .npz archive")
    flipped = bytearray(blob)
    flipped[-200] ^= 0xFF  # inside the last member's data: only the CRC can tell
    (tmp_path / "flip.npz").write_bytes(bytes(flipped))
    _expect_refusal(tmp_path / "flip.npz", "cannot read array")
    (tmp_path / "zero.npz").write_bytes(b"")
    _expect_refusal(tmp_path / "zero.npz", "cannot read")
    np.save(tmp_path / "single.npy", np.zeros(3))
    (tmp_path / "single.npz").write_bytes((tmp_path / "single.npy").read_bytes())
    _expect_refusal(tmp_path / "single.npz", "single .npy array, not an .npz archive")
    np.savez(
        tmp_path / "obj.npz", edge_index=np.array([[0], [1]], dtype=object), x=np.zeros((2, 1)), y=np.zeros(2, int)
    )
    _expect_refusal(tmp_path / "obj.npz", "cannot read array 'edge_index'")


def _edge_list(tmp_path, text, name="e.csv", x=None, y=None):
    path = tmp_path / name
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    if x is not None:
        np.save(tmp_path / f"{path.stem}.features.npy", x)
    if y is not None:
        np.save(tmp_path / f"{path.stem}.labels.npy", y)
    return path


ACCEPTED = "accepted: two integer columns src,dst per line"


@pytest.mark.parametrize(
    "text,fragments",
    [
        ("0,1\n1.5,2\n", ["could not convert string '1.5' to int64 at row 1, column 1", ACCEPTED]),
        ("0,1\n1,2,3\n", ["the number of columns changed from 2 to 3", ACCEPTED]),
        ("0,1,2\n1,2,3\n", ["rows have 3 columns", ACCEPTED]),
        ("src,dst\n", ["holds only a header line and no edge rows: the edge list is empty", ACCEPTED]),
        ("# just a comment\n\n", ["holds no edge rows: the edge list is empty"]),
        ("", ["holds no edge rows: the edge list is empty"]),
        ("0,1\n-3,2\n", ["negative node id -3"]),
        ("0,1\nfoo,2\n", ["could not convert string 'foo' to int64"]),
        (b"\x00\x01\x02garbage", ["holds binary data (NUL bytes), not a text edge list", ACCEPTED]),
        (b"0,1\n\xff\xfe,1\n", ["is not UTF-8 text", ACCEPTED]),
        ("0,99999999999999999999999\n", ["could not convert string '99999999999999999999999' to int64"]),
    ],
)
def test_edge_list_classes(tmp_path, text, fragments):
    _expect_refusal(_edge_list(tmp_path, text), *fragments)


def test_edge_list_side_file_classes(tmp_path):
    x3 = np.zeros((3, 2), np.float32)
    path = _edge_list(tmp_path, "0,1\n1,7\n", "oob.csv", x=x3)
    _expect_refusal(path, "oob.features.npy", "node id 7, out of range for num_nodes=3")
    path = _edge_list(tmp_path, "0,1\n", "len.csv", x=x3, y=np.zeros(4, np.int64))
    _expect_refusal(path, "len.features.npy has 3 rows but", "len.labels.npy has 4 labels")
    path = _edge_list(tmp_path, "0,1\n", "nan.csv", x=np.array([[0.0], [np.nan]]))
    _expect_refusal(path, "features x contain NaN values")
    path = _edge_list(tmp_path, "0,1\n", "fy.csv", y=np.array([0.5, 1.0]))
    _expect_refusal(path, "labels y must be integers")
    path = _edge_list(tmp_path, "0,1\n", "dim.csv", x=np.zeros(2, np.float32))
    _expect_refusal(path, "features must be a 2-D float array", "(got shape [2])")
    path = _edge_list(tmp_path, "0,1\n", "two.csv", x=x3)
    np.save(tmp_path / "two_x.npy", x3)
    _expect_refusal(path, "both two.features.npy and two_x.npy exist")
    path = _edge_list(tmp_path, "0,1\n", "tr.csv")
    (tmp_path / "tr.features.npy").write_bytes(b"\x93NUMPY garbage")
    _expect_refusal(path, "cannot read", "tr.features.npy as a .npy array of features")
    path = _edge_list(tmp_path, "0,1\n", "mk.csv")
    np.save(tmp_path / "mk.train_mask.npy", np.array([True, False]))
    _expect_refusal(path, "found mk.train_mask.npy but not mk.val_mask.npy, mk.test_mask.npy")
    path = _edge_list(tmp_path, "0,1\n", "ov.csv")
    for name, mask in (("train", [1, 0]), ("val", [1, 0]), ("test", [0, 1])):
        np.save(tmp_path / f"ov.{name}_mask.npy", np.array(mask, bool))
    _expect_refusal(path, "train_mask and val_mask overlap")


def test_pt_classes(tmp_path):
    (tmp_path / "garbage.pt").write_bytes(b"not a pickle at all")
    _expect_refusal(tmp_path / "garbage.pt", "cannot load", "as a saved PyG Data")
    torch.save({"x": torch.zeros(2, 1)}, tmp_path / "dict.pt")
    _expect_refusal(tmp_path / "dict.pt", "holds a dict, not a torch_geometric.data.Data")
    torch.save(Data(x=torch.zeros(2, 1), edge_index=torch.tensor([[0], [1]])), tmp_path / "noy.pt")
    _expect_refusal(tmp_path / "noy.pt", "PyG Data is missing ['y']")
    bad = Data(
        x=torch.tensor([[0.0], [float("nan")]]), y=torch.zeros(2, dtype=torch.long), edge_index=torch.tensor([[0], [1]])
    )
    torch.save(bad, tmp_path / "nan.pt")
    _expect_refusal(tmp_path / "nan.pt", "features x contain NaN values")
    multi = Data(x=torch.zeros(2, 1), y=torch.zeros(2, 3, dtype=torch.long), edge_index=torch.tensor([[0], [1]]))
    torch.save(multi, tmp_path / "multi.pt")
    _expect_refusal(tmp_path / "multi.pt", "labels y must have shape [2] (got [2, 3])")
    held = Data(
        x=torch.zeros(2, 1),
        y=torch.zeros(2, dtype=torch.long),
        edge_index=torch.tensor([[0], [1]]),
        lp_val_pos=torch.tensor([[0], [5]]),
    )
    torch.save(held, tmp_path / "held.pt")
    _expect_refusal(tmp_path / "held.pt", "lp_val_pos holds node id 5")
    blob = (tmp_path / "held.pt").read_bytes()
    (tmp_path / "trunc.pt").write_bytes(blob[: len(blob) // 2])
    _expect_refusal(tmp_path / "trunc.pt", "cannot load")


def test_missing_file_and_unknown_suffix(tmp_path):
    with pytest.raises(GraphError, match="does not exist"):
        load_graph(tmp_path / "nope.csv")
    (tmp_path / "g.json").write_text("{}")
    _expect_refusal(tmp_path / "g.json", "unsupported graph file suffix '.json'", ".csv, .tsv, .txt")
