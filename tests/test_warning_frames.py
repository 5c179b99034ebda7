"""Warnings name the user's line (the first frame outside nnsym), so they can be filtered by
module and point at the call to change."""

from __future__ import annotations

import sys
import warnings

import numpy as np
import pytest

import nnsym as mx
from nnsym import errors, nd, sym
from nnsym.ops.common import stype


def _caught(fn, category=Warning):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        fn()
    got = [x for x in w if issubclass(x.category, category)]
    assert got, f"no {category.__name__} from {fn}"
    return got


def test_storage_fallback_warning_names_the_callers_line(monkeypatch):
    monkeypatch.setattr(stype, "_SEEN", set())  # it warns once per signature per process
    c = nd.array(np.array([[1, 0], [0, 2]], np.float32)).tostype("csr")
    w = _caught(lambda: nd.sparse.retain(c, nd.array([1])), stype.StorageFallbackWarning)
    assert {x.filename for x in w} == {__file__}


def test_symbol_inference_warnings_name_the_callers_line():
    s = sym.FullyConnected(sym.var("x"), num_hidden=3)
    for w in (_caught(lambda: s.infer_shape()), _caught(lambda: s.infer_type())):
        assert w[0].filename == __file__ and "Cannot decide" in str(w[0].message)


def test_deprecated_initializer_call_names_the_callers_line():
    arr = nd.zeros((2, 3))
    w = _caught(lambda: mx.init.Uniform(0.1)("fc_weight", arr), DeprecationWarning)
    assert w[0].filename == __file__ and "deprecated" in str(w[0].message)
    assert np.abs(arr.asnumpy()).max() > 0  # it still initialised


def test_module_warning_through_several_nnsym_frames_names_the_callers_line():
    net = sym.SoftmaxOutput(sym.FullyConnected(sym.var("data"), num_hidden=2, name="fc"),
                            name="softmax")
    mod = mx.mod.Module(net, context=mx.cpu())
    mod.bind(data_shapes=[("data", (1, 3))], label_shapes=[("softmax_label", (1,))])
    mod.init_params()
    w = _caught(lambda: mod.init_params())
    lineno = sys._getframe().f_lineno - 1
    assert (w[0].filename, w[0].lineno) == (__file__, lineno)
    assert "already initialized" in str(w[0].message)


def test_visualization_warning_names_the_callers_line():
    from nnsym import visualization as viz

    x = sym.var("x")
    a, b = sym.relu(x, name="same"), sym.sigmoid(x, name="same")
    w = _caught(lambda: viz.plot_network(sym.Group([a, b])), RuntimeWarning)
    assert w[0].filename == __file__ and "same name" in str(w[0].message)


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="3.12+ uses skip_file_prefixes")
def test_stacklevel_fallback_skips_every_nnsym_frame():
    """The pre-3.12 path: the counted stacklevel names this file whichever nnsym frame calls."""
    w = _caught(lambda: errors.warn("direct"))
    assert w[0].filename == __file__


def test_optimizer_warning_through_the_updater_names_the_callers_line():
    """The float16 warning comes from create_state_multi_precision, which the updater calls:
    a fixed stacklevel named the updater's line inside nnsym."""
    opt = mx.optimizer.SGD(learning_rate=0.1)
    update = mx.optimizer.get_updater(opt)
    w16 = nd.ones((2,), dtype="float16")
    w = _caught(lambda: update(0, nd.ones((2,), dtype="float16"), w16))
    assert w[0].filename == __file__ and "float16" in str(w[0].message)
    np.testing.assert_allclose(w16.asnumpy(), [0.9, 0.9], rtol=1e-3)


def test_every_nnsym_warning_goes_through_errors_warn():
    """A bare warnings.warn with a fixed stacklevel names the wrong line from some callers."""
    from pathlib import Path

    pkg = Path(errors.__file__).parent
    bare = [f"{p.relative_to(pkg)}:{i}" for p in sorted(pkg.rglob("*.py")) if p.name != "errors.py"
            for i, line in enumerate(p.read_text().splitlines(), 1) if "warnings.warn(" in line]
    assert bare == []
