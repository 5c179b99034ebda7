"""A misspelled operator and a misspelled parameter: mypy must reject both
(test_mypy_user_scripts.py)."""

from __future__ import annotations

import nnsym as mx

data = mx.sym.var("data")
fc = mx.sym.FullyConected(data, num_hidden=10)
act = mx.sym.Activation(data, act_typ="relu")
