"""Operators written in Python (MXNet's ``mx.operator``): subclass ``CustomOpProp`` (names,
shape/dtype/storage rules, backward dependencies) and ``CustomOp`` (forward and backward over
NDArrays), register the prop with ``@register("name")``, then call
``sym.Custom(..., op_type="name")`` or ``nd.Custom(...)``. Keyword arguments other than
``op_type`` reach the prop's constructor as strings, as in MXNet."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from nnsym.ops.custom import CustomOpError, register_prop, registered_op_types

P = TypeVar("P", bound=type)

_REQS = ("null", "write", "inplace", "add")


class CustomOp:
    """The computation of a custom operator (made by ``CustomOpProp.create_operator``)."""

    def forward(self, is_train: bool, req: list[str], in_data: list[Any], out_data: list[Any],
                aux: list[Any]) -> None:
        """Fill ``out_data`` from ``in_data`` (and ``aux``); ``req[k]`` says how to write
        output k: 'write', 'inplace', 'add' or 'null' (use ``self.assign``)."""

    def backward(self, req: list[str], out_grad: list[Any], in_data: list[Any],
                 out_data: list[Any], in_grad: list[Any], aux: list[Any]) -> None:
        """Fill ``in_grad`` (by ``req``) from the output gradients and forward values."""

    def assign(self, dst: Any, req: str, src: Any) -> None:
        """Store ``src`` into ``dst`` as ``req`` says: nothing ('null'), overwrite ('write',
        'inplace') or accumulate ('add')."""
        if req == "null":
            return
        if req in ("write", "inplace"):
            dst[:] = src
        elif req == "add":
            dst[:] += src
        else:
            raise CustomOpError(f"assign: unknown req {req!r}; expected one of {_REQS}")


class CustomOpProp:
    """A custom operator's properties. ``need_top_grad=False`` marks a loss-like operator whose
    backward needs no incoming gradient."""

    def __init__(self, need_top_grad: bool = True) -> None:
        self.need_top_grad_ = need_top_grad

    def infer_shape(self, in_shape: list[list[int]]) -> tuple[list[Any], list[Any], list[Any]]:
        """(argument shapes, output shapes, aux shapes); default: every output like input 0."""
        return in_shape, [in_shape[0]] * len(self.list_outputs()), []

    def infer_type(self, in_type: list[Any]) -> tuple[list[Any], list[Any], list[Any]]:
        """(argument dtypes, output dtypes, aux dtypes); default: all like input 0."""
        t = in_type[0]
        return (in_type, [t] * len(self.list_outputs()),
                [t] * len(self.list_auxiliary_states()))

    def infer_storage_type(self, in_stype: list[str]) -> tuple[list[str], list[str], list[str]]:
        """(argument, output, aux) storage types; default: dense only."""
        for i, st in enumerate(in_stype):
            if st != "default":
                raise CustomOpError(
                    f"the default infer_storage_type allows only default storage; input {i} is "
                    f"{st!r}: implement infer_storage_type and infer_storage_type_backward")
        return (in_stype, ["default"] * len(self.list_outputs()),
                ["default"] * len(self.list_auxiliary_states()))

    def infer_storage_type_backward(self, ograd_stype: list[str], in_stype: list[str],
                                    out_stype: list[str], igrad_stype: list[str],
                                    aux_stype: list[str]) -> tuple[list[str], ...]:
        """Storage types of the backward pass's arrays; default: dense only."""
        for i, st in enumerate(ograd_stype):
            if st != "default":
                raise CustomOpError(
                    f"the default infer_storage_type_backward allows only default storage; "
                    f"output gradient {i} is {st!r}")
        return (ograd_stype, in_stype, out_stype, ["default"] * len(igrad_stype), aux_stype)

    def list_outputs(self) -> list[str]:
        return ["output"]

    def list_arguments(self) -> list[str]:
        return ["data"]

    def list_auxiliary_states(self) -> list[str]:
        return []

    def declare_backward_dependency(self, out_grad: list[int], in_data: list[int],
                                    out_data: list[int]) -> list[int]:
        """Ids of the arrays backward reads (default: output gradients when needed, inputs,
        outputs)."""
        deps = list(out_grad) if self.need_top_grad_ else []
        return deps + list(in_data) + list(out_data)

    def need_top_grad(self) -> bool:
        return bool(self.need_top_grad_)

    def create_operator(self, ctx: Any, in_shapes: list[list[int]],
                        in_dtypes: list[int]) -> CustomOp:
        """The operator for these input shapes and dtypes (MXNet's integer type flags)."""
        return CustomOp()


def register(reg_name: str) -> Callable[[P], P]:
    """Class decorator: register a CustomOpProp subclass as ``op_type=reg_name``."""

    def do_register(prop_cls: P) -> P:
        register_prop(reg_name, prop_cls)
        return prop_cls

    return do_register


def registered() -> list[str]:
    """The registered custom op_types, sorted (nnsym's addition)."""
    return registered_op_types()


__all__ = ["CustomOp", "CustomOpError", "CustomOpProp", "register", "registered"]
