"""FullyConnected: ``out = data · weightᵀ + bias``, flattening trailing dimensions by default."""

from __future__ import annotations

from dataclasses import dataclass

from nnsym.ir.opdef import (
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
from nnsym.ir.params import Params, field
from nnsym.ir.spec import KernelCall, KernelSpec, Launch, Lowered, size
from nnsym.ops.common.grad import node_gradient
from nnsym.ops.dot.dot import gemm_launch


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
    m, k = _mk(p, call.in_shapes[0])
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


def _mk(p: FullyConnectedParams, data: tuple[int, ...]) -> tuple[int, int]:
    """The GEMM's rows and reduction length for this data shape."""
    return (data[0], size(data[1:])) if p.flatten else (size(data[:-1]), data[-1])


# ---------------------------------------------------------------------------------------------
# Gradient: _backward_FullyConnected(ograd, data, weight) -> (data grad, weight grad, bias grad)


def fully_connected_backward_shape(p: FullyConnectedParams, ins: list,
                                   outs: list) -> tuple[list, list]:
    ograd, data, weight = ins
    data = data if data is not None else outs[0]
    weight = weight if weight is not None else outs[1]
    new_outs = [data, weight] + ([] if p.no_bias else [(p.num_hidden,)])
    return [ograd, data, weight], new_outs


def fully_connected_backward_lowering(call: KernelCall) -> Lowered:
    """data grad = ograd . weight; weight grad = ogradᵀ . data; bias grad = column sums of
    ograd. p = [ograd, data, weight, data grad, weight grad, (bias grad), (workspace)]."""
    p: FullyConnectedParams = call.params
    m, k = _mk(p, call.in_shapes[1])
    n = p.num_hidden
    dt = call.out_dtypes[0]
    ws = 3 + len(call.out_shapes)
    launches = []
    if call.out_req(0) != "null":  # an unread data gradient (a first layer's) is not computed
        launches.append(gemm_launch(dt, call.out_req(0), batch=1, m=m, n=k, k=n, ta=False,
                                    tb=False, slots=(0, 2, 3, ws)))
    if call.out_req(1) != "null":
        launches.append(gemm_launch(dt, call.out_req(1), batch=1, m=n, n=k, k=m, ta=True,
                                    tb=False, slots=(0, 1, 4, ws)))
    if not p.no_bias and call.out_req(2) != "null":
        spec = KernelSpec.make("dot/fc_bias_grad.c.j2", dtype=dt.name, req=call.out_req(2),
                               slot_g=0, slot_out=5)
        launches.append(Launch(spec, (m, n)))
    return Lowered(tuple(launches))


def fully_connected_backward_outputs(p: FullyConnectedParams) -> tuple[str, ...]:
    return ("data_grad", "weight_grad") if p.no_bias else ("data_grad", "weight_grad",
                                                           "bias_grad")


BACKWARD_FULLY_CONNECTED = register(
    OpDef(
        name="_backward_FullyConnected",
        params=FullyConnectedParams,
        inputs=("ograd", "data", "weight"),
        outputs=fully_connected_backward_outputs,
        infer_shape=fully_connected_backward_shape,
        infer_type=same_dtype,
        kernels={DENSE: Kernel(fully_connected_backward_lowering)},
        differentiable=False,
        doc="Gradient of FullyConnected (two GEMMs and a column sum).",
    )
)


fully_connected_grad = node_gradient(BACKWARD_FULLY_CONNECTED, lambda n: n.inputs[:2])


FULLY_CONNECTED = register(
    OpDef(
        name="FullyConnected",
        params=FullyConnectedParams,
        inputs=fully_connected_inputs,
        infer_shape=fully_connected_shape,
        infer_type=same_dtype,
        reference=fully_connected_reference,
        kernels={DENSE: Kernel(fully_connected_lowering)},
        grad=fully_connected_grad,
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
