"""MXNet-written JSON from shared evidence (copied to tests/golden/evidence): exact round trips,
and the 0.8-era upgrade path producing exactly what MXNet 1.9.1 saves after loading."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nnsym import sym

EVIDENCE = Path(__file__).parent.parent / "golden" / "evidence"


@pytest.mark.parametrize(
    "name", ["mlp-symbol.json", "conv-bn-group-symbol.json", "csr-dot-symbol.json"]
)
def test_mxnet_files_round_trip_exactly(name):
    text = (EVIDENCE / name).read_text()
    assert sym.load_json(text).tojson() == text


def test_legacy_08_file_upgrades_like_mxnet():
    got = sym.load(EVIDENCE / "legacy-0.8-input.json").tojson()
    assert got == (EVIDENCE / "legacy-0.8-upgraded.json").read_text()


def test_aux_edges_keep_version_one():
    doc = json.loads((EVIDENCE / "conv-bn-group-symbol.json").read_text())
    s = sym.load_json(json.dumps(doc))
    assert s.list_auxiliary_states() == ["bn_moving_mean", "bn_moving_var"]
    bn = json.loads(s.tojson())["nodes"][7]
    assert bn["inputs"][3][2] == 1 and bn["inputs"][4][2] == 1


def test_inferred_json_still_loads_and_drops_inferred_keys():
    s = sym.load(EVIDENCE / "mlp-symbol.json")
    dumped = s.tojson(inferred=True, data=(4, 784))
    doc = json.loads(dumped)
    fc1 = next(n for n in doc["nodes"] if n["name"] == "fc1")
    assert fc1["attrs"]["__inferred_shape__"] == "[(4, 128)]"
    assert fc1["attrs"]["__inferred_dtype__"] == "[float32]"
    assert sym.load_json(dumped).tojson() == s.tojson()
