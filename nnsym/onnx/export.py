"""``export_model``: an nnsym symbol and its parameters as an ONNX model (opset 18).

Shapes and dtypes come from nnsym's own inference with the given input shapes, so operators whose
MXNet parameters have no ONNX counterpart (Reshape's special codes, ``target_shape``) are written
with the concrete values they resolve to. Each operator's translation is one small function in
``nnsym.onnx.export_ops``.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from nnsym import fileio
from nnsym.model import load_checkpoint
from nnsym.ndarray import io as nd_io
from nnsym.ndarray.ndarray import NDArray
from nnsym.onnx._lazy import OPSET, OnnxError, onnx
from nnsym.onnx.export_ops_more import CONVERTERS
from nnsym.onnx.exporter import Exporter, tensor_type
from nnsym.symbol.json_io import load as load_symbol
from nnsym.symbol.symbol import Symbol, infer_for_dump

log = logging.getLogger(__name__)


def _params_dict(params: Any) -> dict[str, np.ndarray]:
    if isinstance(params, (list, tuple)):
        if len(params) != 2:
            raise OnnxError("params as a list must be [arg_params, aux_params]")
        merged = {**dict(params[0] or {}), **dict(params[1] or {})}
    elif isinstance(params, Mapping):
        merged = dict(params)
    else:
        raise OnnxError(f"params must be a dict, [arg_params, aux_params] or a file path, "
                        f"not {type(params).__name__}")
    out = {}
    for k, v in merged.items():
        k = str(k).removeprefix("arg:").removeprefix("aux:")
        out[k] = v.asnumpy() if isinstance(v, NDArray) else np.asarray(v)
    return out


def _load_inputs(sym: Any, params: Any) -> tuple[Symbol, dict[str, np.ndarray]]:
    if isinstance(sym, (str, os.PathLike)) and isinstance(params, (str, os.PathLike)):
        s = load_symbol(os.fspath(sym))
        loaded = nd_io.load(str(params))
        return s, _params_dict(loaded if isinstance(loaded, dict) else {})
    if isinstance(sym, (str, os.PathLike)):
        sym = load_symbol(os.fspath(sym))
    if not isinstance(sym, Symbol):
        raise OnnxError(f"sym must be a Symbol or a symbol JSON path, not {type(sym).__name__}")
    return sym, _params_dict(params)


def export_model(
    sym: Any,
    params: Any,
    in_shapes: Sequence[Sequence[int]] | None = None,
    in_types: Any = np.float32,
    onnx_file_path: str | os.PathLike[str] = "model.onnx",
    verbose: bool = False,
    dynamic: bool = False,
    dynamic_input_shapes: Sequence[Sequence[int | None]] | None = None,
    run_shape_inference: bool = False,
    input_type: Any = None,
    input_shape: Sequence[Sequence[int]] | None = None,
) -> str:
    """Write ``sym`` with ``params`` as an ONNX model; returns ``onnx_file_path``.

    As MXNet's ``mx.onnx.export_model``: the data inputs are the symbol's inputs that are not in
    ``params`` (and not the label of a final loss layer), in ``list_inputs`` order, with shapes
    ``in_shapes`` and dtypes ``in_types`` (one dtype or a list). ``dynamic`` leaves the inputs'
    dimensions symbolic (or as ``dynamic_input_shapes`` says; None marks a symbolic dimension).
    """
    if input_type is not None:
        in_types = input_type
    if input_shape is not None:
        in_shapes = input_shape
    if in_shapes is None:
        raise OnnxError("in_shapes is required: one shape per data input")
    s, weights = _load_inputs(sym, params)
    model = export_onnx_model(s, weights, in_shapes, in_types, verbose=verbose, dynamic=dynamic,
                              dynamic_input_shapes=dynamic_input_shapes)
    if run_shape_inference:
        try:
            model = onnx().shape_inference.infer_shapes(model)
        except Exception as e:  # NOTE: as MXNet: a failed inference keeps the plain export
            log.info("ONNX shape inference failed (%s); the export is kept without it", e)
    fileio.write_bytes(onnx_file_path, model.SerializeToString())
    return str(onnx_file_path)


def export_checkpoint(prefix: str, epoch: int, shapes: Mapping[str, Sequence[int]],
                      out: str | os.PathLike[str], dtypes: Mapping[str, Any] | None = None) -> str:
    """Export ``PREFIX-symbol.json`` + ``PREFIX-EPOCH.params`` with named input shapes (CLI)."""
    s, arg_params, aux_params = load_checkpoint(prefix, epoch)
    weights = _params_dict([arg_params, aux_params])
    names = _data_inputs(s, weights)
    missing = [n for n in names if n not in shapes]
    unknown = [n for n in shapes if n not in names]
    if missing or unknown:
        raise OnnxError(f"the data inputs are {names}; shapes missing for {missing}, "
                        f"given for unknown inputs {unknown}")
    dtypes = dtypes or {}
    return export_model(s, weights, [tuple(shapes[n]) for n in names],
                        [dtypes.get(n, np.float32) for n in names], out)


def _label_name(s: Symbol) -> str | None:
    heads = [e.node for e in s.outputs]
    if len(heads) != 1 or heads[0].op is None:
        return None
    return f"{heads[0].name}_label"


def _data_inputs(s: Symbol, weights: Mapping[str, Any]) -> list[str]:
    label = _label_name(s)
    return [n for n in s.list_inputs() if n not in weights and n != label]


def export_onnx_model(sym: Symbol, weights: Mapping[str, np.ndarray],
                      in_shapes: Sequence[Sequence[int]], in_types: Any = np.float32,
                      verbose: bool = False, dynamic: bool = False,
                      dynamic_input_shapes: Sequence[Sequence[int | None]] | None = None) -> Any:
    """The ``onnx.ModelProto`` of ``sym`` (see ``export_model``)."""
    ox = onnx()
    data_names = _data_inputs(sym, weights)
    in_shapes = [tuple(int(d) for d in s) for s in in_shapes]
    if len(in_shapes) != len(data_names):
        raise OnnxError(f"{len(in_shapes)} input shape(s) given for the data inputs {data_names}")
    types = list(in_types) if isinstance(in_types, (list, tuple)) else [in_types] * len(in_shapes)
    if len(types) != len(in_shapes):
        raise OnnxError("in_types and in_shapes must have the same length")
    types = [np.dtype(t) for t in types]
    if dynamic_input_shapes is not None and not dynamic:
        raise OnnxError("dynamic_input_shapes needs dynamic=True")
    if dynamic_input_shapes is not None and (
        len(dynamic_input_shapes) != len(in_shapes)
        or any(len(a) != len(b) for a, b in zip(dynamic_input_shapes, in_shapes))
    ):
        raise OnnxError("dynamic_input_shapes must give one shape of the same rank per input")

    label = _label_name(sym)
    shapes: dict[str, Any] = dict(zip(data_names, in_shapes))
    shapes.update({k: v.shape for k, v in weights.items() if k in sym.list_inputs()})
    dtypes: dict[str, Any] = dict(zip(data_names, types))
    dtypes.update({k: v.dtype for k, v in weights.items() if k in sym.list_inputs()})
    g = infer_for_dump(sym, {**shapes, "type_dict": dtypes})
    x = Exporter(g, verbose)

    graph_inputs = []
    for nid, node in enumerate(x.idx.nodes):
        if node.op is not None or (node.name == label and node.name not in weights):
            continue  # the loss layer's label is no input of the inference graph
        name = x.fresh(node.name)
        x.entry_names[(nid, 0)] = name
        if node.name in weights:
            arr = np.ascontiguousarray(weights[node.name])
            x.inits.append(ox.numpy_helper.from_array(arr, name))
        elif node.name in data_names:
            k = data_names.index(node.name)
            dims: Sequence[Any] = in_shapes[k]
            if dynamic:
                dims = (dynamic_input_shapes[k] if dynamic_input_shapes is not None
                        else [None] * len(dims))
                dims = [d if d is not None else f"{name}_dim{j}" for j, d in enumerate(dims)]
            graph_inputs.append(ox.helper.make_tensor_value_info(name, tensor_type(types[k]),
                                                                 list(dims)))
        else:
            raise OnnxError(f"input '{node.name}' has no value in params and no shape")

    for nid, node in enumerate(x.idx.nodes):
        if node.op is None:
            continue
        conv = CONVERTERS.get(node.op.name)
        if conv is None:
            raise OnnxError(
                f"node '{node.name}': operator '{node.op.name}' has no ONNX equivalent "
                f"(opset {OPSET}); it cannot be exported"
            )
        if verbose:
            log.info("converting node %d: %s (%s)", nid, node.name, node.op.name)
        ins = [x.name_of(e) if (x._nid[id(e.node)], e.index) in x.entry_names else ""
               for e in node.inputs]
        n_out = node.num_visible()
        outs = [x.fresh(node.name if i == 0 else f"{node.name}{i}") for i in range(n_out)]
        for i, o in enumerate(outs):
            x.entry_names[(nid, i)] = o
        conv(x, node, ins, outs)

    graph_outputs = []
    for e in sym.outputs:
        name = x.name_of(e)
        dims = x.shape(e)
        out_dims: list[Any] = list(dims)
        if dynamic:
            out_dims = [None] * len(dims)
        graph_outputs.append(ox.helper.make_tensor_value_info(name, tensor_type(x.dtype(e)),
                                                              out_dims))
    graph = ox.helper.make_graph(x.nodes, "nnsym", graph_inputs, graph_outputs, x.inits)
    model = ox.helper.make_model(graph, opset_imports=[ox.helper.make_opsetid("", OPSET)],
                                 producer_name="nnsym")
    model.ir_version = min(model.ir_version, 9)  # NOTE: readable by onnxruntime >= 1.16
    return model
