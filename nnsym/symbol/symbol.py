"""Symbol: a handle on output entries of the IR, with MXNet 1.x's symbolic API."""

from __future__ import annotations

import copy as _copy
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, NoReturn, TypeAlias

import numpy as np

from nnsym import fileio
from nnsym.context import Context
from nnsym.errors import (
    CompositionError,
    NNSymError,
    OperatorParamError,
    ShapeError,
    StorageTypeError,
    warn,
)
from nnsym.executor.executor import BindError, BindShapeError, Executor, _reqs
from nnsym.ir.graph import Entry, Graph, GraphAttrs, IndexedGraph, Node, variable
from nnsym.ir.json import graph_to_json, load_entries
from nnsym.ir.opdef import OpDef, get_op
from nnsym.ir.params import mx_str
from nnsym.ir.printing import node_block
from nnsym.ndarray.ndarray import NDArray, zeros
from nnsym.ndarray.sparse import zeros as sparse_zeros
from nnsym.passes.infer import infer_shape, infer_type
from nnsym.passes.manager import run_passes
from nnsym.passes.stype import infer_storage_type
from nnsym.symbol.naming import AttrScope, NameManager
from nnsym.types import SType, dtype_flag, dtype_of, from_mx_shape, to_mx_shape

Shapes: TypeAlias = list[tuple[int, ...]]
Types: TypeAlias = list[type]
ArrayArgs: TypeAlias = Sequence[NDArray] | Mapping[str, NDArray]
GradReq: TypeAlias = str | Sequence[str] | Mapping[str, str]

# MXNet's kHiddenKeys: given as op kwargs or scope attrs they are stored as ``__key__``.
HIDDEN_KEYS = ("ctx_group", "lr_mult", "wd_mult", "force_mirroring", "mirror_stage")


def normalize_attrs(attrs: Mapping[str, Any]) -> dict[str, str]:
    """Hidden keys -> ``__key__``; values -> strings (MXNet stores ``str(value)``)."""
    out: dict[str, str] = {}
    for k, v in attrs.items():
        key = f"__{k}__" if k in HIDDEN_KEYS else k
        out[key] = v if isinstance(v, str) else mx_str(v)
    return out


if TYPE_CHECKING:  # the fluent methods (x.sum(1)) are added at import; their typed stub
    from nnsym.symbol._fluent_methods import SymbolFluent as _Fluent
else:
    _Fluent = object


class Symbol(_Fluent):
    """A list of output entries of a graph; immutable (composition returns a new Symbol)."""

    __slots__ = ("__weakref__", "_index", "_outputs")

    def __init__(self, outputs: Sequence[Entry]):
        self._outputs: tuple[Entry, ...] = tuple(outputs)
        self._index: IndexedGraph | None = None

    # ------------------------------------------------------------------ structure
    @property
    def outputs(self) -> tuple[Entry, ...]:
        return self._outputs

    @property
    def index(self) -> IndexedGraph:
        if self._index is None:
            self._index = IndexedGraph(self._outputs)
        return self._index

    def graph(self, **attrs: Any) -> Graph:
        g = Graph(self._outputs, GraphAttrs(**attrs))
        object.__setattr__(g, "_index", self.index)
        return g

    @property
    def name(self) -> str | None:
        """The head node's name when this symbol has one output, else None."""
        if len(self._outputs) != 1:
            return None
        return self._outputs[0].node.name

    def __repr__(self) -> str:
        if len(self._outputs) == 1:
            return f"<Symbol {self.name}>"
        return f"<Symbol group [{', '.join(self.list_outputs())}]>"

    def __len__(self) -> int:
        return len(self._outputs)

    def __iter__(self) -> Iterator[Symbol]:
        return (Symbol([e]) for e in self._outputs)

    def __getitem__(self, key: int | str | slice) -> Symbol:
        if isinstance(key, str):
            names = self.list_outputs()
            idx = [i for i, n in enumerate(names) if n == key]
            if not idx:
                raise CompositionError(f"no output named {key!r}; outputs: {names}")
            if len(idx) > 1:
                raise CompositionError(f"there are multiple outputs named {key!r}")
            return Symbol([self._outputs[idx[0]]])
        if isinstance(key, slice):
            return Symbol(self._outputs[key])
        if not isinstance(key, (int, np.integer)):
            raise TypeError(f"symbol index must be int, str or slice, not {type(key).__name__}")
        n = len(self._outputs)
        if not -n <= int(key) < n:
            raise IndexError(f"output index {key} is out of range for {n} outputs")
        return Symbol([self._outputs[int(key)]])

    def __copy__(self) -> Symbol:
        return Symbol(self._outputs)

    def __deepcopy__(self, memo: Any) -> Symbol:
        return Symbol(self._outputs)

    def __reduce__(self) -> Any:
        return (load_json, (self.tojson(),))

    def copy(self) -> Symbol:
        return Symbol(self._outputs)

    # ------------------------------------------------------------------ listing
    def list_arguments(self) -> list[str]:
        idx = self.index
        return [idx.nodes[i].name for i in idx.input_nodes if i not in idx.mutable_input_nodes]

    def list_auxiliary_states(self) -> list[str]:
        idx = self.index
        return [idx.nodes[i].name for i in idx.input_nodes if i in idx.mutable_input_nodes]

    def list_inputs(self) -> list[str]:
        idx = self.index
        return [idx.nodes[i].name for i in idx.input_nodes]

    def list_outputs(self) -> list[str]:
        return [entry_name(e) for e in self._outputs]

    def get_internals(self) -> Symbol:
        """Every visible output of every node, in graph order."""
        entries: list[Entry] = []
        for node in self.index.nodes:
            entries.extend(Entry(node, i) for i in range(node.num_visible()))
        return Symbol(entries)

    def get_children(self) -> Symbol | None:
        """The inputs of the head node(s), grouped; None for a variable."""
        entries = [e for out in self._outputs for e in out.node.inputs]
        return Symbol(entries) if entries else None

    # ------------------------------------------------------------------ attributes
    def attr(self, key: str) -> str | None:
        if len(self._outputs) != 1:
            return None
        attrs = self._outputs[0].node.attrs
        if key in attrs:
            return attrs[key]
        if key in HIDDEN_KEYS:
            return attrs.get(f"__{key}__")
        return None

    def list_attr(self, recursive: bool = False) -> dict[str, str]:
        if recursive:
            raise DeprecationWarning("Symbol.list_attr with recursive=True has been deprecated")
        if len(self._outputs) != 1:
            return {}
        return _with_plain_hidden(self._outputs[0].node.attrs)

    def attr_dict(self) -> dict[str, dict[str, str]]:
        """``{node name: attrs}`` for every node that has attributes."""
        out: dict[str, dict[str, str]] = {}
        for node in self.index.nodes:
            if node.attrs:
                out.setdefault(node.name, {}).update(_with_plain_hidden(node.attrs))
        return out

    def _set_attr(self, **kwargs: Any) -> Symbol:
        """A symbol whose head node has these attributes added (nodes are immutable)."""
        if len(self._outputs) != 1:
            raise CompositionError("cannot set attributes on a group of symbols")
        node = self._outputs[0].node
        attrs = dict(node.attrs)
        attrs.update(normalize_attrs(kwargs))
        new = Node(node.op, node.name, node.params, node.inputs, MappingProxyType(attrs))
        return self._replace_nodes({id(node): new})

    # ------------------------------------------------------------------ composition
    def __call__(self, *args: Symbol, **kwargs: Any) -> Symbol:
        """Replace free variables by symbols: positionally (``list_arguments`` order) or by name."""
        name = kwargs.pop("name", None)
        if args and kwargs:
            raise CompositionError(
                "compose only accepts input Symbols either as positional or keyword arguments, "
                "not both"
            )
        for i, a in enumerate([*args, *kwargs.values()]):
            if not isinstance(a, Symbol):
                raise CompositionError(
                    f"argument {i} to compose is a {type(a).__name__}, not a Symbol"
                )
            if len(a) != 1:
                raise CompositionError(
                    f"argument {i} to compose has {len(a)} outputs; a single output is required"
                )
        idx = self.index
        repl: dict[int, Entry] = {}
        if args:
            arg_nodes = [idx.nodes[i] for i in idx.input_nodes if i not in idx.mutable_input_nodes]
            if len(args) > len(arg_nodes):
                raise CompositionError(
                    f"too many positional arguments: {len(args)} given, the symbol has "
                    f"{len(arg_nodes)}: {[n.name for n in arg_nodes]}"
                )
            for node, a in zip(arg_nodes, args):
                repl[id(node)] = a._outputs[0]
        else:
            found = set()
            for i in idx.input_nodes:
                node = idx.nodes[i]
                if node.name in kwargs:
                    repl[id(node)] = kwargs[node.name]._outputs[0]
                    found.add(node.name)
            missing = [k for k in kwargs if k not in found]
            if missing:
                raise CompositionError(
                    f"keyword argument(s) {missing} not found; inputs: {self.list_inputs()}"
                )
        out = self._substitute(repl)
        if name:
            head = out._outputs[0].node
            if head.op is None:
                raise CompositionError("a variable cannot be composed")
            out = out._replace_nodes(
                {id(head): Node(head.op, name, head.params, head.inputs, head.attrs)}
            )
        return out

    def _substitute(self, repl: Mapping[int, Entry]) -> Symbol:
        """Rebuild the graph with variable nodes (by identity) replaced by entries."""
        memo: dict[int, Node] = {}
        entry_map: dict[int, Entry] = dict(repl)

        def new_entry(e: Entry) -> Entry:
            r = entry_map.get(id(e.node))
            if r is not None and e.node.op is None:
                return Entry(r.node, r.index, e.version if r.node.op is None else 0)
            return Entry(memo[id(e.node)], e.index, e.version)

        for node in self.index.nodes:
            if id(node) in entry_map and node.op is None:
                continue
            ins = tuple(new_entry(e) for e in node.inputs)
            if all(a.node is b.node for a, b in zip(ins, node.inputs)):
                memo[id(node)] = node
            else:
                memo[id(node)] = Node(
                    node.op, node.name, node.params, ins, node.attrs, node.control_deps
                )
        return Symbol([new_entry(e) for e in self._outputs])

    def _replace_nodes(self, repl: Mapping[int, Node]) -> Symbol:
        memo: dict[int, Node] = {}
        for node in self.index.nodes:
            base = repl.get(id(node), node)
            ins = tuple(Entry(memo[id(e.node)], e.index, e.version) for e in base.inputs)
            if base is node and all(a.node is b.node for a, b in zip(ins, node.inputs)):
                memo[id(node)] = node
            else:
                memo[id(node)] = Node(
                    base.op, base.name, base.params, ins, base.attrs, base.control_deps
                )
        return Symbol([Entry(memo[id(e.node)], e.index, e.version) for e in self._outputs])

    # ------------------------------------------------------------------ arithmetic
    def __add__(self, other: Any) -> Symbol:
        return _arith(self, other, "_Plus", "_PlusScalar")

    __radd__ = __add__

    def __sub__(self, other: Any) -> Symbol:
        return _arith(self, other, "_Minus", "_MinusScalar")

    def __rsub__(self, other: Any) -> Symbol:
        return _arith(self, other, None, "_RMinusScalar")

    def __mul__(self, other: Any) -> Symbol:
        return _arith(self, other, "_Mul", "_MulScalar")

    __rmul__ = __mul__

    def __truediv__(self, other: Any) -> Symbol:
        return _arith(self, other, "_Div", "_DivScalar")

    def __rtruediv__(self, other: Any) -> Symbol:
        return _arith(self, other, None, "_RDivScalar")

    def __pow__(self, other: Any) -> Symbol:
        return _arith(self, other, "_Power", "_PowerScalar")

    def __rpow__(self, other: Any) -> Symbol:
        return _arith(self, other, None, "_rpower_scalar")

    def __mod__(self, other: Any) -> Symbol:
        return _arith(self, other, "_Mod", "_ModScalar")

    def __rmod__(self, other: Any) -> Symbol:
        return _arith(self, other, None, "_RModScalar")

    # Comparisons: _equal (no broadcasting) for two symbols, _equal_scalar for a number (a
    # number on the left reaches the mirrored method: 2 < x is x > 2); other operands raise
    # TypeError, as in MXNet.
    def __eq__(self, other: Any) -> Symbol:  # type: ignore[override]
        return _compare(self, other, "_equal")

    def __ne__(self, other: Any) -> Symbol:  # type: ignore[override]
        return _compare(self, other, "_not_equal")

    def __gt__(self, other: Any) -> Symbol:
        return _compare(self, other, "_greater")

    def __ge__(self, other: Any) -> Symbol:
        return _compare(self, other, "_greater_equal")

    def __lt__(self, other: Any) -> Symbol:
        return _compare(self, other, "_lesser")

    def __le__(self, other: Any) -> Symbol:
        return _compare(self, other, "_lesser_equal")

    # MXNet 1.9.1's Symbol is unhashable (it overrides __eq__ only); here it stays hashable by
    # identity so symbols can still key dicts and sets.
    __hash__ = object.__hash__

    def __bool__(self) -> bool:
        raise NotImplementedForSymbol("bool")

    # NDArray-only methods MXNet's Symbol defines to raise NotImplementedForSymbol
    def asnumpy(self) -> NoReturn:
        raise NotImplementedForSymbol("asnumpy")

    def asscalar(self) -> NoReturn:
        raise NotImplementedForSymbol("asscalar")

    def as_in_context(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise NotImplementedForSymbol("as_in_context")

    def wait_to_read(self) -> NoReturn:
        raise NotImplementedForSymbol("wait_to_read")

    def backward(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise NotImplementedForSymbol("backward")

    def detach(self) -> NoReturn:
        raise NotImplementedForSymbol("detach")

    # ------------------------------------------------------------------ MXNet 1.9.1 extras
    def debug_str(self) -> str:
        """The graph in MXNet's ``Symbol.debug_str`` layout: the outputs, then every node in
        graph order (variables as ``Variable:name``; operators with inputs and sorted attrs)."""
        outs = self._outputs
        if len(outs) == 1 and not outs[0].node.inputs and not outs[0].node.control_deps:
            node = outs[0].node
            if node.op is None:
                return f"Variable:{node.name}\n"
            return f"AtomicFunctor  Op:{node.op.name}\n"
        lines = ["Symbol Outputs:"]
        lines.extend(f"\toutput[{i}]={e.node.name}({e.index})" for i, e in enumerate(outs))
        idx = self.index
        mutated = idx.mutable_input_nodes  # MXNet prints version=1 for inputs an op writes
        for node in idx.nodes:
            if node.op is None:
                lines.append(f"Variable:{node.name}")
                continue
            lines.extend(node_block(idx, node, mutated, node.attrs))
            if node.control_deps:
                lines.append("Control deps:")
                lines.extend(f"\tcdep[{j}]={d.name}" for j, d in enumerate(node.control_deps))
        return "\n".join(lines) + "\n"

    def gradient(self, wrt: Sequence[str]) -> Symbol:
        """Not implemented, as in MXNet 1.9.1 (whose C API answers "not implemented"); use
        ``bind``/``simple_bind`` and ``Executor.backward`` for gradients."""
        raise SymbolGradientNotImplemented(
            "Symbol.gradient is not implemented (nor in MXNet 1.9.1); bind the symbol and call "
            "Executor.backward to get gradients")

    def optimize_for(self, backend: str, args: Any = None, aux: Any = None, ctx: Any = None,
                     shape_dict: Any = None, type_dict: Any = None, stype_dict: Any = None,
                     skip_infer: bool = False, **kwargs: Any) -> Symbol:
        """A copy of this symbol, unpartitioned: nnsym has no subgraph backends. For MXNet's
        CPU backends (``MKLDNN``, ``MKLDNN_QUANTIZE``) the copy computes what their fused graph
        computes; any other name is logged as unknown and the symbol returned as it is, which
        is what MXNet 1.9.1 does for a backend it cannot find. ``args``/``aux`` are left as
        given (no partitioning adds inputs)."""
        _check_backend_name(backend, "optimize_for")
        for what, v in (("args", args), ("aux", aux)):
            if v is not None and not isinstance(v, (Mapping, list, tuple)):
                raise TypeError(f"optimize_for: {what} must be a dict or a list of NDArrays, "
                                f"got {type(v).__name__}")
        if backend not in SUBGRAPH_BACKENDS:
            warn(f"optimize_for: no subgraph backend named {backend!r} (nnsym knows "
                 f"{list(SUBGRAPH_BACKENDS)} and partitions for none); the symbol is returned "
                 f"unchanged")
        return copy_symbol(self)

    def get_backend_symbol(self, backend: str) -> Symbol:
        """A copy of this symbol for MXNet's CPU subgraph backends (nnsym fuses nothing, so the
        graph is unchanged); any other backend name raises ``SubgraphBackendError``, as in
        MXNet 1.9.1."""
        _check_backend_name(backend, "get_backend_symbol")
        if backend not in SUBGRAPH_BACKENDS:
            raise SubgraphBackendError(
                f"get_backend_symbol: subgraph backend {backend!r} is not registered; known: "
                f"{list(SUBGRAPH_BACKENDS)}")
        return copy_symbol(self)

    def __neg__(self) -> Symbol:
        return self.__mul__(-1.0)

    def __pos__(self) -> Symbol:
        return self

    def __abs__(self) -> Symbol:
        return apply_op(get_op("abs"), "abs", [self], {})

    # ------------------------------------------------------------------ inference
    def _seed(self, what: str, args: Sequence[Any], kwargs: Mapping[str, Any], conv: Any) -> list:
        idx = self.index
        vals: list[Any] = [None] * idx.num_entries
        if args and kwargs:
            raise CompositionError(f"{what} accepts positional or keyword arguments, not both")
        if args:
            arg_ids = [i for i in idx.input_nodes if i not in idx.mutable_input_nodes]
            if len(args) > len(arg_ids):
                raise CompositionError(
                    f"{what}: {len(args)} positional values for {len(arg_ids)} arguments "
                    f"{self.list_arguments()}"
                )
            for nid, v in zip(arg_ids, args):
                if v is not None:
                    vals[idx.row_ptr[nid]] = conv(v)
        else:
            by_name: dict[str, list[int]] = {}
            for i in idx.input_nodes:
                by_name.setdefault(idx.nodes[i].name, []).append(i)
            for k, v in kwargs.items():
                if k not in by_name:
                    raise CompositionError(
                        f"{what}: keyword argument name {k} not found; candidates: "
                        f"{self.list_inputs()}"
                    )
                if v is not None:
                    for nid in by_name[k]:
                        vals[idx.row_ptr[nid]] = conv(v)
        return vals

    def _infer(self, kind: str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> Any:
        if kind == "shape":
            seeds = self._seed("infer_shape", args, kwargs, _user_shape)
            g = infer_shape(self.graph(shape=tuple(seeds)))
            vals: Sequence[Any] | None = g.attrs.shape
        else:
            seeds = self._seed("infer_type", args, kwargs, dtype_of)
            g = infer_type(self.graph(dtype=tuple(seeds)))
            vals = g.attrs.dtype
        assert vals is not None
        return self._triple(vals)

    def _triple(self, vals: Sequence[Any]) -> tuple[list, list, list]:
        idx = self.index
        arg = [vals[idx.row_ptr[i]] for i in idx.input_nodes if i not in idx.mutable_input_nodes]
        aux = [vals[idx.row_ptr[i]] for i in idx.input_nodes if i in idx.mutable_input_nodes]
        out = [vals[e] for e in idx.outputs]
        return arg, out, aux

    def infer_shape(self, *args: Any, **kwargs: Any
                    ) -> tuple[Shapes, Shapes, Shapes] | tuple[None, None, None]:
        """``(arg_shapes, out_shapes, aux_shapes)``, or ``(None, None, None)`` when incomplete."""
        arg, out, aux = self._infer("shape", args, kwargs)
        if any(not _complete(s) for s in (*arg, *out, *aux)):
            names = self.list_arguments()
            unknown = [f"{n}: {to_mx_shape(s)}" for n, s in zip(names, arg) if not _complete(s)]
            msg = (
                "Cannot decide shape for the following arguments (0s in shape means unknown "
                "dimensions). Consider providing them as input:\n\t"
                + "\n\t".join(unknown[:10] + (["..."] if len(unknown) > 10 else []))
            )
            warn(msg)
            return None, None, None
        return _mx_shapes(arg), _mx_shapes(out), _mx_shapes(aux)

    def infer_shape_partial(self, *args: Any, **kwargs: Any) -> tuple[Shapes, Shapes, Shapes]:
        """Like ``infer_shape`` but returns what is known (``()`` / ``0`` for unknown)."""
        arg, out, aux = self._infer("shape", args, kwargs)
        return _mx_shapes(arg), _mx_shapes(out), _mx_shapes(aux)

    def infer_type(self, *args: Any, **kwargs: Any
                   ) -> tuple[Types, Types, Types] | tuple[None, None, None]:
        """``(arg_types, out_types, aux_types)`` as numpy types, or ``(None, None, None)``."""
        arg, out, aux = self._infer("dtype", args, kwargs)
        if any(t is None for t in (*arg, *out, *aux)):
            names = self.list_arguments()
            unknown = [n for n, t in zip(names, arg) if t is None]
            warn(
                "Cannot decide type for the following arguments. Consider providing them as "
                "input:\n\t" + "\n\t".join(f"{n}: None" for n in unknown[:10]),
            )
            return None, None, None
        return _np_types(arg), _np_types(out), _np_types(aux)

    def infer_type_partial(self, *args: Any, **kwargs: Any
                           ) -> tuple[list[type | None], list[type | None], list[type | None]]:
        arg, out, aux = self._infer("dtype", args, kwargs)
        return _np_types(arg), _np_types(out), _np_types(aux)

    def infer_storage_type(self, *args: Any, **kwargs: Any
                           ) -> tuple[list[str], list[str], list[str]]:
        """``(arg_stypes, out_stypes, aux_stypes)`` as ``'default' | 'row_sparse' | 'csr'``,
        from the given argument storage types (unlisted ones: their ``stype`` attribute, else
        default). Raises StorageTypeError where an operator refuses the combination."""
        def conv(v: Any) -> SType:
            try:
                return SType.parse(v)
            except ValueError as e:
                raise StorageTypeError(str(e)) from None

        seeds = self._seed("infer_storage_type", args, kwargs, conv)
        g = infer_storage_type(self.graph(stype=tuple(seeds)))
        assert g.attrs.stype is not None
        arg, out, aux = self._triple(g.attrs.stype)
        return ([s.label for s in arg], [s.label for s in out], [s.label for s in aux])

    # ------------------------------------------------------------------ serialization
    # ------------------------------------------------------------------ binding
    def bind(self, ctx: Context | None, args: ArrayArgs,
             args_grad: Sequence[NDArray | None] | Mapping[str, NDArray] | None = None,
             grad_req: GradReq = "write", aux_states: ArrayArgs | None = None,
             group2ctx: Any = None, shared_exec: Executor | None = None) -> Executor:
        """An Executor over the given arrays (used as they are: later writes to them are seen).
        ``args``/``args_grad``/``aux_states``: lists in ``list_arguments`` /
        ``list_auxiliary_states`` order or dicts by name; ``grad_req``: 'write', 'add' or
        'null', per argument by list or dict (unlisted: 'null')."""
        _unsupported(group2ctx=group2ctx, shared_exec=shared_exec)
        return Executor(self, ctx, args, args_grad, grad_req, aux_states)

    def simple_bind(self, ctx: Context | None = None, grad_req: GradReq = "write",
                    type_dict: Mapping[str, Any] | None = None,
                    stype_dict: Mapping[str, str] | None = None, group2ctx: Any = None,
                    shared_arg_names: Sequence[str] | None = None,
                    shared_exec: Executor | None = None,
                    shared_buffer: dict[str, NDArray] | None = None,
                    **kwargs: Sequence[int]) -> Executor:
        """Infer every shape and dtype from the given input shapes (and ``type_dict``; float32
        otherwise), allocate zero-filled arguments, gradients and auxiliary states, and bind.

        ``shared_exec`` (with ``shared_arg_names``): those arguments and their gradients, and
        every auxiliary state, are ``shared_exec``'s own arrays (shapes and dtypes must match),
        and the internal memory pool is shared with it (the two must not run at the same
        time). ``shared_buffer`` (name -> NDArray): every other argument (and ``"grad of " +
        name``) is a view of the buffer's array when that is large enough and of the same
        dtype; otherwise a new array is made and put in the buffer (MXNet's bucketing).

        ``stype_dict`` (name -> "default" / "row_sparse" / "csr"): storage types of arguments
        (else their ``__storage_type__`` attribute, else default); they are allocated as empty
        sparse arrays. Gradient arrays take the storage types the operators' backward rules
        give (a row_sparse weight gradient through ``dot(csr, weight)`` or
        ``Embedding(sparse_grad=True)``)."""
        _unsupported(group2ctx=group2ctx)
        arg_s, _, aux_s = self._infer("shape", (), kwargs)
        names = self.list_arguments()
        aux_names = self.list_auxiliary_states()
        missing = [n for n, s in zip(names + aux_names, arg_s + aux_s) if not _complete(s)]
        if missing:
            raise ShapeError(
                f"simple_bind: cannot decide the shapes of {missing} from {kwargs}; give their "
                "shapes (or the inputs they follow from)"
            )
        arg_t, _, aux_t = self._infer("type", (), dict(type_dict or {}))
        f32 = np.dtype(np.float32)
        shared = set(shared_arg_names or ())
        if shared and shared_exec is None:
            raise BindError("shared_arg_names needs shared_exec")
        sh_args, sh_grads = ((shared_exec.arg_dict, shared_exec.grad_dict)
                             if shared_exec is not None else ({}, {}))

        def alloc(key: str, shape: tuple[int, ...], dtype: np.dtype,
                  st: str = "default") -> NDArray:
            try:
                return zeros(shape, ctx, dtype) if st == "default" else \
                    sparse_zeros(st, shape, ctx, dtype)
            except ShapeError as e:  # numpy could not allocate it
                raise BindShapeError(f"simple_bind: cannot allocate {key!r}: {e}") from None

        def take(key: str, shape: tuple[int, ...], dtype: np.dtype) -> NDArray:
            if shared_buffer is None:
                return alloc(key, shape, dtype)
            buf = shared_buffer.get(key)
            n = int(np.prod(shape, dtype=np.int64))
            if buf is not None and np.dtype(buf.dtype) == dtype and buf.size >= n:
                return NDArray(buf._data.reshape(-1)[:n].reshape(shape), buf.context)
            if buf is not None:
                warn(f"simple_bind: shared_buffer[{key!r}] {buf.shape} is too small "
                     f"for {shape} (or of another dtype); allocating a new one")
            new = alloc(key, shape, dtype)
            shared_buffer[key] = new
            return new

        def from_exec(what: str, have: Any, shape: tuple[int, ...], dtype: np.dtype) -> Any:
            if have is None or tuple(have.shape) != shape or np.dtype(have.dtype) != dtype:
                got = None if have is None else (have.shape, np.dtype(have.dtype).name)
                raise BindError(f"shared_exec's {what} is {got}, this bind needs "
                                f"{(shape, dtype.name)}")
            return have

        shapes = _mx_shapes(arg_s)
        dtypes = [np.dtype(t or f32) for t in arg_t]
        arg_st = self._arg_stypes(stype_dict)
        args = [from_exec(f"argument {n!r}", sh_args.get(n), s, t) if n in shared
                else take(n, s, t) if st == "default" else alloc(n, s, t, st)
                for n, s, t, st in zip(names, shapes, dtypes, arg_st)]
        if shared_exec is not None:
            aux = [from_exec(f"auxiliary state {n!r}", shared_exec.aux_dict.get(n), s,
                             np.dtype(t or f32))
                   for n, s, t in zip(aux_names, _mx_shapes(aux_s), aux_t)]
        else:
            aux = [alloc(n, s, np.dtype(t or f32))
                   for n, s, t in zip(aux_names, _mx_shapes(aux_s), aux_t)]
        reqs = _reqs(grad_req, names, args)
        grads = [None if r == "null" else
                 from_exec(f"gradient of {n!r}", sh_grads.get(n), s, t)
                 if n in shared else take("grad of " + n, s, t)
                 for n, r, s, t in zip(names, reqs, shapes, dtypes)]
        return Executor(self, ctx, args, grads, reqs, aux,
                        shared_pools=None if shared_exec is None else shared_exec._pools,
                        infer_grad_stypes=frozenset(n for n in names if n not in shared))

    def _arg_stypes(self, stype_dict: Any) -> list[str]:
        """Storage types of the arguments: ``stype_dict``, else ``__storage_type__``, else
        default."""
        names = self.list_arguments()
        given = dict(stype_dict or {})
        unknown = set(given) - set(names)
        if unknown:
            raise BindError(f"stype_dict: unknown argument(s) {sorted(unknown)}; arguments: "
                            f"{names}")
        idx = self.index
        attr = {idx.nodes[nid].name: idx.nodes[nid].attrs.get("__storage_type__")
                for nid in idx.input_nodes}
        out = []
        for n in names:
            v = given.get(n, attr.get(n))
            try:
                st = SType.parse(int(v) if isinstance(v, str) and v.lstrip("-").isdigit()
                                 else v) if v is not None else SType.DEFAULT
            except ValueError as e:
                raise BindError(f"storage type of {n!r}: {e}") from None
            out.append(st.label)
        return out

    def eval(self, ctx: Any = None, **kwargs: Any) -> list[Any]:
        """Bind the given arrays (no gradients) and run forward once."""
        aux_names = self.list_auxiliary_states()
        args = {k: v for k, v in kwargs.items() if k not in aux_names}
        aux = {k: v for k, v in kwargs.items() if k in aux_names}
        exe = self.bind(ctx, args, grad_req="null", aux_states=aux or None)
        return list(exe.forward())

    def tojson(self, inferred: bool = False, **kwargs: Any) -> str:
        """MXNet 1.x symbol JSON. ``inferred=True`` runs inference (``kwargs`` as ``infer_shape``)
        and records every inferred attribute per entry inside each node's ``attrs``."""
        if not inferred:
            if kwargs:
                raise TypeError("tojson takes input shapes only with inferred=True")
            return graph_to_json(self.graph())
        return graph_to_json(infer_for_dump(self, kwargs), inferred=True)

    def save(self, fname: str | Path, remove_amp_cast: bool = True) -> None:
        fileio.write_text(fname, self.tojson())  # a failed save keeps the previous file


def load_json(text: str | bytes) -> Symbol:
    """Load MXNet symbol JSON (any 0.8+ version); validated, legacy forms upgraded."""
    sym = Symbol(load_entries(text))
    _ = sym.index  # detect cycles (impossible with backward-only references) early
    return sym


def infer_for_dump(sym: Symbol, shapes: Mapping[str, Any]) -> Graph:
    """Shape, dtype and storage-type inference for a dump: input shapes by name, dtypes by
    ``type_dict`` (without one, inputs lacking ``__dtype__`` are float32, as in MXNet's
    simple_bind), storage types from ``__storage_type__`` attributes (else default)."""
    kw = dict(shapes)
    type_dict = kw.pop("type_dict", None) or {}
    shape_seed = sym._seed("tojson", (), kw, _user_shape)
    if type_dict:
        type_seed = sym._seed(
            "tojson", (), {k: dtype_of(v) for k, v in type_dict.items()}, lambda t: t
        )
    else:
        # As simple_bind without type_dict: inputs lacking __dtype__ default to float32.
        idx = sym.index
        type_seed = [None] * idx.num_entries
        for nid in idx.input_nodes:
            if "__dtype__" not in idx.nodes[nid].attrs:
                type_seed[idx.row_ptr[nid]] = np.dtype(np.float32)
    g = sym.graph(shape=tuple(shape_seed), dtype=tuple(type_seed))
    return run_passes(g, [infer_shape, infer_type, infer_storage_type])


def entry_name(e: Entry) -> str:
    node = e.node
    if node.op is None:
        return node.name
    return f"{node.name}_{node.output_names()[e.index]}"


def _with_plain_hidden(attrs: Mapping[str, str]) -> dict[str, str]:
    out = dict(attrs)
    for k in HIDDEN_KEYS:
        v = attrs.get(f"__{k}__")
        if v is not None:
            out[k] = v
    return out


def _user_shape(v: Any) -> Any:
    if isinstance(v, (int, np.integer)):
        v = (int(v),)
    try:
        return from_mx_shape(v)
    except NNSymError:
        raise
    except (TypeError, ValueError) as e:
        raise NNSymError(f"invalid shape {v!r}: {e}") from None


def _complete(s: Any) -> bool:
    return s is not None and all(d is not None for d in s)


def _mx_shapes(vals: Sequence[Any]) -> list[tuple[int, ...]]:
    return [to_mx_shape(s) for s in vals]


def _np_types(vals: Sequence[Any]) -> list[Any]:
    return [None if t is None else np.dtype(t).type for t in vals]


# ---------------------------------------------------------------------------------------------
# Variables, groups, operator application


def Variable(
    name: str,
    attr: Mapping[str, str] | None = None,
    shape: Any = None,
    lr_mult: float | None = None,
    wd_mult: float | None = None,
    dtype: Any = None,
    init: Any = None,
    stype: Any = None,
    **kwargs: Any,
) -> Symbol:
    """A free input of the graph (an argument, or an auxiliary state when an op mutates it)."""
    if not isinstance(name, str):
        raise TypeError("Expect a string for variable `name`")
    attrs = AttrScope.current().get(dict(attr) if attr else None)
    attrs = normalize_attrs(attrs)
    if shape is not None:
        attrs["__shape__"] = str(tuple(shape) if isinstance(shape, list) else shape)
    if lr_mult is not None:
        attrs["__lr_mult__"] = str(lr_mult)
    if wd_mult is not None:
        attrs["__wd_mult__"] = str(wd_mult)
    if dtype is not None:
        attrs["__dtype__"] = str(dtype_flag(dtype_of(dtype)))
    if init is not None:
        attrs["__init__"] = init if isinstance(init, str) else init.dumps()
    if stype is not None:
        attrs["__storage_type__"] = str(SType.parse(stype).value)
    for k, v in kwargs.items():
        if k.startswith("__") and k.endswith("__"):
            attrs[k] = str(v)
        else:
            raise ValueError(
                f"Attribute name={k} is not supported. Additional attributes must start and end "
                "with double underscores, e.g, __yourattr__"
            )
    return Symbol([Entry(variable(name, attrs))])


var = Variable


def Group(symbols: Sequence[Symbol]) -> Symbol:
    """One symbol whose outputs are all the given symbols' outputs, in order."""
    if not symbols or any(not isinstance(s, Symbol) for s in symbols):
        raise TypeError("Expected a non-empty list of symbols as input")
    return Symbol([e for s in symbols for e in s._outputs])


def apply_op(op: OpDef, hint: str, args: Sequence[Any], kwargs: dict[str, Any]) -> Symbol:
    """Create an op node: parse params, name it, wire inputs, make implicit variables."""
    name = kwargs.pop("name", None)
    user_attr = kwargs.pop("attr", None)
    sym_kwargs = {k: v for k, v in kwargs.items() if isinstance(v, Symbol)}
    raw = {k: v for k, v in kwargs.items() if not isinstance(v, Symbol)}
    for i, a in enumerate(args):
        if not isinstance(a, Symbol):
            raise CompositionError(
                f"operator {op.name}: positional argument {i} is a {type(a).__name__}; inputs "
                "must be Symbols and parameters keywords"
            )
    attrs: dict[str, str] = {}
    pvals: dict[str, Any] = {}
    for k, v in raw.items():
        if k in HIDDEN_KEYS:
            attrs[f"__{k}__"] = mx_str(v)
        elif k.startswith("__") and k.endswith("__"):
            attrs[k] = mx_str(v)
        elif any(k.endswith("_" + h) for h in HIDDEN_KEYS):
            raise OperatorParamError(
                f"operator {op.name}: setting variable attributes with the op parameter {k!r} is "
                "deprecated; set them on the variable (Variable(..., lr_mult=...)) instead"
            )
        else:
            pvals[k] = v
    if op.key_var_num_args and op.key_var_num_args not in pvals:
        pvals[op.key_var_num_args] = len(args)
    params, pstrs = op.parse_params(pvals, node_name=name or "")  # errors name a given name
    scope_attrs = normalize_attrs(AttrScope.current().get(dict(user_attr) if user_attr else None))
    node_attrs = {**scope_attrs, **attrs, **pstrs}
    name = NameManager.current().get(name, hint)

    in_names = op.input_names(params)
    aux_idx = set(op.aux_indices(params))
    if len(args) > len(in_names):
        raise CompositionError(
            f"operator {op.name} (node '{name}'): {len(args)} inputs given, it takes "
            f"{len(in_names)}: {list(in_names)}"
        )
    unknown = [k for k in sym_kwargs if k not in in_names]
    if unknown:
        raise CompositionError(
            f"operator {op.name} (node '{name}'): unknown input(s) {unknown}; "
            f"inputs: {list(in_names)}"
        )
    given: list[Symbol | None] = list(args) + [None] * (len(in_names) - len(args))
    for k, v in sym_kwargs.items():
        pos = in_names.index(k)
        if given[pos] is not None:
            raise CompositionError(
                f"operator {op.name} (node '{name}'): input '{k}' given both positionally and "
                "by keyword"
            )
        given[pos] = v
    entries = []
    for i, (in_name, s) in enumerate(zip(in_names, given)):
        if s is None:
            vattrs = dict(node_attrs)
            vattrs.update(op.input_var_attrs.get(in_name, {}))
            node = variable(f"{name}_{in_name}", vattrs)
            entries.append(Entry(node, 0, 1 if i in aux_idx else 0))
            continue
        if len(s._outputs) != 1:
            raise CompositionError(
                f"operator {op.name} (node '{name}'): input '{in_name}' is a group of "
                f"{len(s._outputs)} outputs; a single output is required"
            )
        e = s._outputs[0]
        if i in aux_idx and e.node.op is None:
            e = Entry(e.node, e.index, e.version + 1)
        entries.append(e)
    entries = _set_input_var_attrs(op, in_names, entries)
    node = Node(op, name, params, tuple(entries), MappingProxyType(node_attrs))
    return Symbol([Entry(node, i) for i in range(op.num_visible(params))])


def _set_input_var_attrs(op: OpDef, in_names: Sequence[str], entries: list[Entry]) -> list[Entry]:
    """MXNet's FSetInputVarAttrOnCompose on user-given variables (e.g. BatchNorm's ``__init__``).

    MXNet mutates the variable node; nodes here are immutable, so the variable is replaced by a
    copy with the attributes throughout the graph feeding this node.
    """
    repl: dict[int, Node] = {}
    for in_name, e in zip(in_names, entries):
        extra = op.input_var_attrs.get(in_name)
        v = e.node
        if extra and v.op is None and "__init__" not in v.attrs and id(v) not in repl:
            repl[id(v)] = Node(None, v.name, None, (), MappingProxyType({**v.attrs, **extra}))
    if not repl:
        return entries
    return list(Symbol(entries)._replace_nodes(repl)._outputs)


# Operator functions behind the arithmetic operators, by MXNet's Python name (the naming hint
# is the lower-cased name, as MXNet's front end derives it).
def _arith(lhs: Symbol, rhs: Any, sym_fn: str | None, scalar_fn: str) -> Symbol:
    if isinstance(rhs, Symbol):
        if sym_fn is None:
            raise TypeError("reflected arithmetic with a Symbol on the left is not defined")
        return apply_op(get_op(sym_fn), sym_fn.lower(), [lhs, rhs], {})
    if isinstance(rhs, (int, float, np.number)) and not isinstance(rhs, bool):
        return apply_op(get_op(scalar_fn), scalar_fn.lower(), [lhs], {"scalar": rhs})
    return NotImplemented  # type: ignore[no-any-return]


class NotImplementedForSymbol(NNSymError, TypeError):
    """An NDArray-only Python operation applied to a Symbol (MXNet's NotImplementedForSymbol)."""

    def __init__(self, function: str) -> None:
        super().__init__(f'Function {function} (namely operator "{function}") is not '
                         "implemented for Symbol and only available in NDArray.")


class SymbolGradientNotImplemented(NNSymError, NotImplementedError):
    """``Symbol.gradient``: not implemented in MXNet 1.9.1 either (a RuntimeError there)."""


class SubgraphBackendError(NNSymError, ValueError):
    """``Symbol.get_backend_symbol`` with a backend name MXNet 1.9.1 does not register."""


# The subgraph backends MXNet 1.9.1's CPU build registers (and runs without extra options).
SUBGRAPH_BACKENDS = ("MKLDNN", "MKLDNN_QUANTIZE")


def _check_backend_name(backend: Any, what: str) -> None:
    if not isinstance(backend, str):
        raise SubgraphBackendError(f"{what}: backend must be a string, got "
                                   f"{type(backend).__name__}")


def _compare(lhs: Symbol, rhs: Any, name: str) -> Symbol:
    res = _arith(lhs, int(rhs) if isinstance(rhs, bool) else rhs, name, f"{name}_scalar")
    if res is NotImplemented:
        raise TypeError(f"type {type(rhs)} not supported")
    return res


def copy_symbol(s: Symbol) -> Symbol:
    return _copy.copy(s)


def _unsupported(**given: Any) -> None:
    used = [k for k, v in given.items() if v is not None]
    if used:
        raise NNSymError(f"{', '.join(used)}: not supported by this executor yet")
