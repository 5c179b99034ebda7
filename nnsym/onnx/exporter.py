"""The state of one ONNX export: tensor names, emitted nodes, initializers, inferred shapes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from nnsym.ir.graph import Entry, Graph, Node
from nnsym.onnx._lazy import OnnxError, onnx


class Exporter:
    """The state of one export: tensor names, emitted nodes and initializers."""

    def __init__(self, g: Graph, verbose: bool = False):
        self.g = g
        self.idx = g.index
        self.nodes: list[Any] = []
        self.inits: list[Any] = []
        self.names: set[str] = set()
        self.entry_names: dict[tuple[int, int], str] = {}
        self.verbose = verbose
        self._nid: dict[int, int] = {id(n): i for i, n in enumerate(self.idx.nodes)}

    # --- names -------------------------------------------------------------------------------
    def fresh(self, hint: str) -> str:
        name, k = hint, 0
        while name in self.names:
            k += 1
            name = f"{hint}_{k}"
        self.names.add(name)
        return name

    def name_of(self, e: Entry) -> str:
        key = (self._nid[id(e.node)], e.index)
        if key not in self.entry_names:
            raise OnnxError(
                f"node '{e.node.name}' ({e.node.op_name}): output {e.index} is used but has no "
                "ONNX translation (only the inference outputs are exported)"
            )
        return self.entry_names[key]

    # --- inferred attributes --------------------------------------------------------------------
    def shape(self, e: Entry) -> tuple[int, ...]:
        assert self.g.attrs.shape is not None
        s = self.g.attrs.shape[self.idx.entry_id(e)]
        if s is None or any(d is None for d in s):
            raise OnnxError(f"the shape of '{e.node.name}' output {e.index} is unknown; "
                            "give every input's shape")
        return tuple(int(d) for d in s if d is not None)

    def dtype(self, e: Entry) -> np.dtype:
        assert self.g.attrs.dtype is not None
        t = self.g.attrs.dtype[self.idx.entry_id(e)]
        return np.dtype(np.float32) if t is None else np.dtype(t)

    def out_shape(self, node: Node, i: int = 0) -> tuple[int, ...]:
        return self.shape(Entry(node, i))

    def out_dtype(self, node: Node, i: int = 0) -> np.dtype:
        return self.dtype(Entry(node, i))

    # --- emission --------------------------------------------------------------------------------
    def const(self, value: Any, dtype: Any = np.int64, hint: str = "const") -> str:
        """A new initializer holding ``value``; returns its name."""
        arr = np.asarray(value, dtype=dtype)
        name = self.fresh(hint)
        self.inits.append(onnx().numpy_helper.from_array(arr, name))
        return name

    def add(self, op_type: str, inputs: Sequence[str], outputs: Sequence[str] | int = 1,
            hint: str = "", **attrs: Any) -> list[str]:
        """Append an ONNX node; ``outputs`` is a list of names or how many fresh ones to make."""
        if isinstance(outputs, int):
            outputs = [self.fresh(f"{hint or op_type}_out") for _ in range(outputs)]
        attrs = {k: v for k, v in attrs.items() if v is not None}
        self.nodes.append(onnx().helper.make_node(
            op_type, list(inputs), list(outputs), name=self.fresh(hint or op_type), **attrs))
        return list(outputs)

    def add1(self, op_type: str, inputs: Sequence[str], out: str | None = None, hint: str = "",
             **attrs: Any) -> str:
        return self.add(op_type, inputs, [out] if out else 1, hint=hint, **attrs)[0]

    def cast(self, x: str, dtype: Any, out: str | None = None) -> str:
        return self.add1("Cast", [x], out, to=tensor_type(dtype))


def tensor_type(dtype: Any) -> int:
    dt = np.dtype(dtype)
    if dt == np.bool_:
        return int(onnx().TensorProto.BOOL)
    return int(onnx().helper.np_dtype_to_tensor_dtype(dt))
