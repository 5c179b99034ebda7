"""Misspelled operators, a misspelled parameter and a misspelled fluent method: mypy must reject
each (test_mypy_user_scripts.py)."""

from __future__ import annotations

import nnsym as mx

data = mx.sym.var("data")
fc = mx.sym.FullyConected(data, num_hidden=10)
act = mx.sym.Activation(data, act_typ="relu")
x = mx.nd.ones((2, 3))
y = mx.nd.sofmax(x)
z = x.summ(axis=1)
