"""benchmarks/bench_table.py at tiny sizes: nnsym and the numpy/scipy peers compute the same
results from the same saved arrays, and a missing peer is skipped with a note. No timings."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import bench_table as bt


@pytest.fixture(scope="module")
def ctx(tmp_path_factory: pytest.TempPathFactory) -> bt.Ctx:
    data = tmp_path_factory.mktemp("bench-data")
    for wid in ("W1", "W3", "W4a", "W5q"):
        bt.prepare(wid, bt.TINY, data)
    # NOTE: max_wait=0: never wait for a quiet machine here; 1 sample: timings are not checked.
    return bt.Ctx(data, bt.TINY, samples=1, load_limit=1e9, max_wait=0.0)


CASES = [("W1", bt.NUMPY), ("W2", bt.NUMPY), ("W3", bt.NUMPY), ("W4a", bt.SCIPY),
         ("W4b", bt.SCIPY), ("W5q", bt.NUMPY), ("W5c", bt.SCIPY)]


@pytest.mark.parametrize(("wid", "ref"), CASES)
def test_nnsym_and_reference_peer_agree(ctx: bt.Ctx, wid: str, ref: str) -> None:
    want = bt.run_case(wid, ref, ctx)
    nn_peers = [p for p in bt.WORKLOADS[wid].peers if p.startswith(bt.NNSYM)]
    for peer in nn_peers:
        got = bt.run_case(wid, peer, ctx)
        assert got["check"]["n"] == want["check"]["n"] > 0
        assert bt.digests_agree(got["check"], want["check"], bt.WORKLOADS[wid].tol), (
            wid, peer, got["check"]["sample"][:4], want["check"]["sample"][:4])
        assert got["median_ms"] > 0 and got["quiet"] is True


def test_digest_detects_a_different_result() -> None:
    a = np.linspace(-1, 1, 500, dtype=np.float32)
    assert bt.digests_agree(bt.digest(a), bt.digest(a.copy()), 1e-6)
    b = a.copy()
    b[250] += 0.5  # one changed value among the sampled ones
    assert not bt.digests_agree(bt.digest(b), bt.digest(a), 1e-4)
    assert not bt.digests_agree(bt.digest(a[:-1]), bt.digest(a), 1e-4)


def test_numpy_peer_matches_an_independent_formula(ctx: bt.Ctx) -> None:
    x = bt.load(ctx.data, "w3")["x"].astype(np.float64)
    want = np.maximum(1.5 * x * x - 0.5 * x + 0.25, 0) * 0.5 + np.tanh(x)
    got = bt.run_case("W3", bt.NUMPY, ctx)["check"]
    assert bt.digests_agree(got, bt.digest(want), 1e-5)


def test_peer_process_does_not_import_nnsym(ctx: bt.Ctx) -> None:
    args = argparse.Namespace(samples=1, load=1e9, wait=0.0, tiny=True, timeout=120.0)
    row = bt.run_one("W3", bt.NUMPY, args, ctx.data)
    assert row is not None and row["peer"] == "numpy"
    assert row["env"]["nnsym_imported"] is False
    assert bt.digests_agree(row["check"], bt.run_case("W3", bt.NUMPY, ctx)["check"], 0.0)


def test_missing_peer_is_skipped_with_a_note(monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture[str],
                                             tmp_path: Path) -> None:
    monkeypatch.setenv("NNSYM_MXREF_PYTHON", str(tmp_path / "no-such-python"))
    monkeypatch.setattr(bt, "_AVAILABLE", {})
    args = argparse.Namespace(samples=1, load=1.0, wait=0.0, tiny=True, timeout=10.0)
    assert bt.run_one("W3", bt.MXNET, args, tmp_path) is None
    out = capsys.readouterr().out.strip().splitlines()
    assert out == [f"# W3 / mxnet: skipped (no interpreter {tmp_path / 'no-such-python'})"]


def test_table_reports_goal_and_best_peer() -> None:
    rows = [{"workload": "W6", "peer": "nnsym", "value": 1.0},
            {"workload": "W6", "peer": "numpy", "value": 2.0},
            {"workload": "W6", "peer": "mxnet", "value": 4.0}]
    line = bt.table(rows)[1]
    assert "numpy 2 ms" in line and " 0.50 " in line  # ratio to the best other peer
    assert "<= 0.2 x mxnet: 0.25 NOT met" in line  # the goal is against MXNet


def test_quiet_wait_gives_up_and_says_so() -> None:
    info = bt.wait_quiet(limit=-1.0, max_wait=0.0)
    assert info["quiet"] is False and info["waited_s"] == 0.0 and info["load_1m"] >= 0
