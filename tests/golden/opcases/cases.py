"""Writes the operator cases MXNet 1.9.1 is asked about (run with nnsym's Python):
``python tests/golden/opcases/cases.py cases.json``. One case per registered operator example
whose operator MXNet has (by its name): the parameters as the strings nnsym writes into symbol
JSON, the input names, shapes, dtype and value ranges, the domains of inputs moved by
``Example.prep``, and which inputs take gradients.
``make.py`` (run in the MXNet reference venv) turns them into fixtures."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from nnsym.ir.opdef import mxnet_operator_names
from nnsym.ops import REGISTRY

# Random in training mode: their values are not comparable with MXNet's.
RANDOM = {"Dropout", "LeakyReLU"}


def cases() -> list[dict]:
    out = []
    mx_names = mxnet_operator_names()
    for name, op in sorted(REGISTRY.items()):
        if (name not in mx_names or name.startswith("_backward") or name in RANDOM
                or op.random):
            continue
        for k, ex in enumerate(op.examples):
            params, strs = op.parse_params(dict(ex.params))
            names = list(op.input_names(params))
            if len(names) != len(ex.shapes):
                continue
            aux = set(op.aux_indices(params))
            out.append({
                "id": f"{name}-{k}", "op": name, "params": dict(strs),
                "inputs": names, "shapes": [list(s) for s in ex.shapes], "dtype": ex.dtype,
                **({"in_dtypes": list(ex.in_dtypes)} if ex.in_dtypes else {}),
                "low": ex.low, "high": ex.high,
                "ints": {str(i): list(r) for i, r in ex.ints.items()},
                "prep": {str(i): k for i, k in ex.prep.items()},
                "aux": sorted(aux),
                "grad": op.grad is not None,
            })
    return out


if __name__ == "__main__":
    Path(sys.argv[1]).write_text(json.dumps(cases(), indent=1))
    print(len(cases()), "cases")
