"""FullyConnected: ``out = data · weightᵀ + bias``, flattening trailing dimensions by default."""

from __future__ import annotations

from dataclasses import dataclass

from nnsym.codegen.spec import KernelCall, Lowered, size
from nnsym.ops.dot import gemm_launch
from nnsym.ops.params import Params, field
from nnsym.ops.registry import (
    DENSE,
    Example,
    Kernel,
    OpDef,
    RuleError,
    merge_shape,
    prod,
    register,
    same_dtype,
)


@dataclass(frozen=True, kw_only=True)
class FullyConnectedParams(Params):
    num_hidden: int = field(lower=1, doc="Number of hidden units (output features).")
    no_bias: bool = field(default=False, doc="Whether to leave out the bias term.")
    flatten: bool = field(
        default=True, doc="Flatten all but the first axis of data (else use only the last)."
    )


def fully_connected_inputs(p: FullyConnectedParams) -> tuple[str, ...]:
    return ("data", "weight") if p.no_bias else ("data", "weight", "bias")


def fully_connected_shape(p: FullyConnectedParams, ins: list, outs: list) -> tuple[list, list]:
    data, out = ins[0], outs[0]
    nh = p.num_hidden
    if data is None:
        # Backward: the batch dimension comes back from the output (MXNet copies out[0] to data[0]).
        return list(ins), [out]
    if p.flatten:
        num_input = prod(data[1:]) if len(data) > 1 else 1
        out_shape = (data[0], nh)
    else:
        num_input = data[-1]
        out_shape = (*data[:-1], nh)
    if out is not None:
        out_shape = merge_shape(out_shape, out)  # type: ignore[assignment]
        if len(out) >= 1 and data[0] is None and out[0] is not None:
            data = (out[0], *data[1:])
    new_ins = [data, (nh, num_input)]
    if not p.no_bias:
        bias = ins[2]
        if bias is not None and len(bias) == 2 and bias[1] == 1:
            new_ins.append((nh, 1))  # MXNet accepts (num_hidden, 1) as well
        else:
            new_ins.append((nh,))
    if len(data) < 1:
        raise RuleError("data must have at least one dimension")
    return new_ins, [out_shape]


def fully_connected_reference(p: FullyConnectedParams, data, weight, bias=None):
    x = data.reshape(data.shape[0], weight.shape[1]) if p.flatten else data  # -1: empty data
    y = x @ weight.T
    if bias is not None:
        y = y + bias.reshape(-1)
    return y.astype(data.dtype, copy=False)


def fully_connected_lowering(call: KernelCall) -> Lowered:
    """One GEMM ``data[m, k] . weight[n, k]ᵀ``; the bias is added to each row right after it."""
    p: FullyConnectedParams = call.params
    data = call.in_shapes[0]
    if p.flatten:
        m, k = data[0], size(data[1:])
    else:
        m, k = size(data[:-1]), data[-1]
    launch = gemm_launch(
        call.out_dtypes[0],
        call.req,
        batch=1,
        m=m,
        n=p.num_hidden,
        k=k,
        ta=False,
        tb=True,
        n_in=len(call.in_shapes),
        bias=not p.no_bias,
    )
    return Lowered((launch,))


FULLY_CONNECTED = register(
    OpDef(
        name="FullyConnected",
        params=FullyConnectedParams,
        inputs=fully_connected_inputs,
        infer_shape=fully_connected_shape,
        infer_type=same_dtype,
        reference=fully_connected_reference,
        kernels={DENSE: Kernel(fully_connected_lowering)},
        doc="Applies a linear transformation: Y = XWᵀ + b.",
        examples=(
            Example(((4, 5), (3, 5), (3,)), {"num_hidden": 3}),
            Example(((2, 3, 4, 5), (7, 60), (7,)), {"num_hidden": 7}),
            Example(((2, 3, 4), (6, 4)), {"num_hidden": 6, "no_bias": True, "flatten": False}),
            Example(((4, 5), (3, 5), (3,)), {"num_hidden": 3}, dtype="float64"),
        ),
        bad_params=({"num_hidden": 0}, {}, {"num_hidden": 3, "flaten": True}),
    )
)
