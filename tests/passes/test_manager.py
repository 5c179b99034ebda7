"""The pass manager: requirements checked, failures name the pass and what ran before it."""

from __future__ import annotations

import pytest

from nnsym import sym
from nnsym.errors import PassError, PassOrderError
from nnsym.ir.graph import Graph
from nnsym.passes.infer import infer_shape, infer_type
from nnsym.passes.manager import graph_pass, run_passes


@graph_pass(requires=("shape",), provides=("storage_id",))
def needs_shape(g: Graph) -> Graph:
    return g.with_attrs(storage_id=tuple(range(g.index.num_entries)))


@graph_pass(requires=("shape",))
def broken(g: Graph) -> Graph:
    raise RuntimeError("boom")


def _graph():
    return sym.FullyConnected(sym.Variable("data", shape=(2, 3)), num_hidden=4).graph()


def test_pipeline_runs_in_order_and_provides():
    g = run_passes(_graph(), [infer_shape, infer_type, needs_shape])
    assert g.attrs.present() >= {"shape", "dtype", "storage_id"}
    assert g.attrs.shape[-1] == (2, 4)


def test_missing_requirement_is_reported():
    with pytest.raises(PassOrderError, match=r"needs_shape needs \['shape'\]; ran so far: \[\]"):
        run_passes(_graph(), [needs_shape])


def test_failure_names_pass_and_predecessors():
    with pytest.raises(
        PassError, match=r"pass broken failed after \['infer_shape', 'infer_type'\]"
    ):
        run_passes(_graph(), [infer_shape, infer_type, broken])


def test_unknown_attribute_names_are_rejected_at_declaration():
    with pytest.raises(ValueError, match="unknown graph attributes"):
        graph_pass(provides=("shapes",))


def test_dump_dir_writes_inferred_json(tmp_path):
    run_passes(_graph(), [infer_shape, infer_type], dump_dir=tmp_path)
    files = sorted(p.name for p in tmp_path.iterdir())
    assert files == ["01_infer_shape.json", "02_infer_type.json"]
    assert "__inferred_shape__" in (tmp_path / "02_infer_type.json").read_text()
