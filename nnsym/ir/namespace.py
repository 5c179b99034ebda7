"""Operator functions' signatures, docstrings and namespaces, generated from the registry for
``nnsym.sym`` and ``nnsym.nd`` alike."""

from __future__ import annotations

import inspect
import types
from typing import Any

from nnsym.ir.opdef import OpDef, all_names


def signature(op: OpDef) -> inspect.Signature:
    P = inspect.Parameter
    params: list[inspect.Parameter] = []
    if op.key_var_num_args:
        params.append(P("args", P.VAR_POSITIONAL, annotation="Symbol"))
    else:
        try:
            names = op.input_names(_default_params(op))
        except Exception:
            names = ("data",)
        params.extend(
            P(n, P.POSITIONAL_OR_KEYWORD, default=None, annotation="Symbol") for n in names
        )
    for spec in op.params.specs().values():
        default = P.empty if spec.required else spec.default
        params.append(P(spec.name, P.KEYWORD_ONLY, default=default, annotation=spec.type_name()))
    params.append(P("name", P.KEYWORD_ONLY, default=None, annotation="str"))
    params.append(P("attr", P.KEYWORD_ONLY, default=None, annotation="dict"))
    return inspect.Signature(params, return_annotation="Symbol")


def _default_params(op: OpDef) -> Any:
    """Parameters with defaults (required ones get a harmless placeholder) for listing inputs."""
    specs = op.params.specs()
    vals: dict[str, Any] = {}
    for n, s in specs.items():
        if s.required:
            vals[n] = {
                "int": 1,
                "float": 1.0,
                "bool": False,
                "str": (s.choices or ("",))[0],
                "dtype": "float32",
                "tuple": (1,),
                "tuple_opt": (1,),
                "tuple_float": (1.0,),
            }[s.base]
    return op.params(**vals)


def op_docstring(op: OpDef, func_name: str) -> str:
    lines = [op.doc or f"The {op.name} operator.", ""]
    if func_name != op.name:
        lines += [f"Alias of ``{op.name}``.", ""]
    lines.append("Parameters")
    lines.append("----------")
    try:
        names = op.input_names(_default_params(op))
        aux = op.aux_names(_default_params(op))
    except Exception:
        names, aux = (), ()
    if op.key_var_num_args:
        lines.append("*args : Symbol\n    The inputs.")
    else:
        for n in names:
            kind = "auxiliary state" if n in aux else "input"
            lines.append(f"{n} : Symbol\n    The {kind} '{n}' (an implicit variable when omitted).")
    lines.extend(op.params.doc_lines())
    lines.append("name : str, optional\n    Node name; MXNet-style automatic name when omitted.")
    lines.append("attr : dict, optional\n    Extra attributes for the node.")
    lines += ["", "Returns", "-------", "Symbol"]
    return "\n".join(lines)


# MXNet's operator-name prefixes whose operators its sub-namespaces hold under the short name
# (base._OP_NAME_PREFIX_LIST); ``_random_`` ones live in nnsym.<pkg>.random (hand-written)
_PREFIXED = {"_contrib_": "contrib", "_linalg_": "linalg", "_image_": "image", "_sparse_": "sparse"}


def populate_namespaces(package: str, make: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """One function per registered operator name and alias, made by ``make(op, name)``, and the
    sub-namespaces MXNet has (``contrib``, ``linalg``, ``image`` and ``sparse`` hold the
    ``_contrib_``/``_linalg_``/``_image_``/``_sparse_`` operators under their short names, made
    by ``make(op, short)`` so that auto-naming uses the short name as MXNet does:
    ``sym.contrib.box_nms(d)`` is ``box_nms0``; ``_internal`` holds names starting with ``_``;
    ``sparse`` also holds operators with sparse implementations) as modules named
    ``<package>.<sub>``. Returns (functions by name, sub-modules by name)."""
    subs = {
        "contrib": types.ModuleType(f"{package}.contrib", "Contributed operators."),
        "_internal": types.ModuleType(f"{package}._internal", "Internal operators."),
        "sparse": types.ModuleType(f"{package}.sparse", "Operators with sparse kernels."),
        "linalg": types.ModuleType(f"{package}.linalg", "Linear-algebra operators."),
        "image": types.ModuleType(f"{package}.image", "Image operators."),
    }
    made: dict[str, Any] = {}
    for fname, op in sorted(all_names().items()):
        fn = make(op, fname)
        for prefix, sub in _PREFIXED.items():
            if fname.startswith(prefix):
                short = fname[len(prefix) :]
                fshort = make(op, short)
                fshort._op_name = fname  # the registered name (stubs look the operator up)
                setattr(subs[sub], short, fshort)
        if fname.startswith("_"):
            setattr(subs["_internal"], fname, fn)
        if op.sparse:
            setattr(subs["sparse"], fname, fn)
        made[fname] = fn
    return made, subs
