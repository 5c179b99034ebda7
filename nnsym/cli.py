"""The ``nnsym`` command: ``infer`` a model's shapes and dtypes, ``run`` a checkpoint forward,
or run the built-in ``demo``.

Unix conventions: ``--version``; ``-`` is standard input or output wherever a file is read or
written; a closed output pipe (``nnsym infer ... | head -1``) ends the command quietly with
status 0; exit status 0 (ok), 1 (failure), 2 (usage); an error is one line
``nnsym: error: ...`` on standard error, with the traceback only under ``--debug``. nnsym prints
no colour (nothing to switch off with ``NO_COLOR``).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.metadata
import io
import logging
import os
import sys
import tempfile
import time
import traceback
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from nnsym import callback, fileio, initializer, module
from nnsym import io as mio
from nnsym import ndarray as nd
from nnsym import random as nrandom
from nnsym import symbol as sym
from nnsym import visualization as viz
from nnsym.codegen import cache, compiler
from nnsym.context import cpu
from nnsym.devtools.cuda import codegen as cuda_codegen
from nnsym.devtools.cuda.cli import add_codegen_arguments, directory_arg, run_codegen
from nnsym.errors import GraphFormatError, NNSymError
from nnsym.ir.graph import Entry, Graph
from nnsym.ir.json import graph_to_json
from nnsym.ir.opdef import all_names, mxnet_operator_names
from nnsym.kvstore.launch import launch
from nnsym.model import load_checkpoint
from nnsym.onnx import OPSET as ONNX_OPSET
from nnsym.onnx import export_checkpoint
from nnsym.ops import REGISTRY
from nnsym.runtime.imperative import run_op
from nnsym.symbol.json_io import infer_for_dump, load, load_json
from nnsym.symbol.symbol import Symbol, entry_name
from nnsym.types import SType, shape_str


def _parse_shape(text: str) -> tuple[str, tuple[int, ...]]:
    name, sep, dims = text.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"expected NAME=D1,D2,..., got {text!r}")
    try:
        shape = tuple(
            int(d) for d in dims.replace("(", "").replace(")", "").split(",") if d.strip()
        )
    except ValueError:
        raise argparse.ArgumentTypeError(f"bad dimensions in {text!r}") from None
    if any(d < 0 for d in shape):
        raise argparse.ArgumentTypeError(f"dimensions must be >= 0 in {text!r}")
    return name, shape


def _parse_dtype(text: str) -> tuple[str, str]:
    name, sep, dt = text.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"expected NAME=DTYPE, got {text!r}")
    try:
        return name, np.dtype(dt).name
    except TypeError:
        raise argparse.ArgumentTypeError(f"unknown dtype {dt!r}") from None


def infer_graph(s: Symbol, shapes: dict[str, Any], dtypes: dict[str, str]) -> Graph:
    return infer_for_dump(s, {**shapes, "type_dict": dtypes})


def format_table(g: Graph) -> str:
    """One row per node output: node, op, shape, dtype."""
    idx, a = g.index, g.attrs
    assert a.shape is not None and a.dtype is not None
    rows = [("node", "op", "output", "shape", "dtype")]
    for nid, node in enumerate(idx.nodes):
        for i in range(node.num_outputs()):
            eid = idx.entry_id(nid, i)
            dt = a.dtype[eid]
            rows.append(
                (
                    node.name if i == 0 else "",
                    node.op_name if i == 0 else "",
                    entry_name(Entry(node, i)),
                    shape_str(a.shape[eid]),
                    "?" if dt is None else np.dtype(dt).name,
                )
            )
    widths = [max(len(r[k]) for r in rows) for k in range(5)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _unknown_summary(s: Symbol, g: Graph) -> str | None:
    idx, a = g.index, g.attrs
    assert a.shape is not None
    missing = [
        f"{idx.nodes[n].name}: {shape_str(a.shape[idx.row_ptr[n]])}"
        for n in idx.input_nodes
        if a.shape[idx.row_ptr[n]] is None or None in a.shape[idx.row_ptr[n]]  # type: ignore[operator]
    ]
    if not missing:
        return None
    return "shapes still unknown (give them with --shape NAME=D1,D2,...):\n  " + "\n  ".join(
        missing
    )


def _symbol_file(model: str) -> Path:
    """MODEL-symbol.json as given, or a checkpoint prefix (``PREFIX-symbol.json``)."""
    path = Path(model)
    if path.suffix != ".json" and not path.exists():
        cand = Path(f"{model}-symbol.json")
        if cand.exists():
            return cand
    return path


STDIO = "-"  # as a file name: standard input (read) or standard output (write)


def _load_symbol(model: str) -> Symbol:
    """A symbol from MODEL-symbol.json, a checkpoint prefix, or standard input (``-``)."""
    if model == STDIO:
        try:
            text = sys.stdin.buffer.read().decode("utf-8")
        except UnicodeDecodeError as e:
            raise GraphFormatError(f"<stdin>: not UTF-8 text: {e}") from None
        try:
            return load_json(text)
        except GraphFormatError as e:
            raise GraphFormatError(f"<stdin>: {e}") from None
    return load(_symbol_file(model))


def _write_stdout(data: str | bytes) -> None:
    """Write ``data`` to standard output (text, or bytes to the binary buffer)."""
    if isinstance(data, str):
        sys.stdout.write(data)
    else:
        sys.stdout.flush()
        sys.stdout.buffer.write(data)
    sys.stdout.flush()


def _note_stream(*targets: str | None) -> Any:
    """Where human-readable lines go: standard error when a data output is standard output."""
    return sys.stderr if STDIO in targets else sys.stdout


def cmd_infer(args: argparse.Namespace) -> int:
    s = _load_symbol(args.model)
    g = infer_graph(s, dict(args.shape), dict(args.dtype))
    out = _note_stream(args.json)
    # NOTE: the file is written before anything is printed, so a reader that closes the pipe
    # early (| head) cannot stop it being written
    if args.json and args.json != STDIO:
        fileio.write_text(args.json, graph_to_json(g, inferred=True))
    print(format_table(g), file=out)
    note = _unknown_summary(s, g)
    if note:
        print("\n" + note, file=out)
    if args.json == STDIO:
        _write_stdout(graph_to_json(g, inferred=True) + "\n")
    elif args.json:
        print(f"\ninferred graph written to {args.json}", file=out)
    return 0


def _parse_input(text: str) -> tuple[str, str]:
    name, sep, path = text.partition("=")
    if not sep or not name or not path:
        raise argparse.ArgumentTypeError(f"expected NAME=FILE.npy, got {text!r}")
    return name, path


def cmd_run(args: argparse.Namespace) -> int:
    """Bind a checkpoint for inference, run forward, summarise the outputs and time a run."""
    s, arg_params, aux_params = load_checkpoint(args.prefix, args.epoch)
    shapes = dict(args.shape)
    inputs = {}
    out = _note_stream(args.save)
    if sum(path == STDIO for _, path in args.input) > 1:
        raise NNSymError("only one --input can read standard input ('-')")
    for name, path in args.input:
        # np.load seeks, which a pipe cannot: standard input is read whole first
        a = np.load(io.BytesIO(sys.stdin.buffer.read()) if path == STDIO else path,
                    allow_pickle=False)
        inputs[name] = a
        shapes.setdefault(name, tuple(a.shape))
    params = set(arg_params) | set(aux_params)
    free = [n for n in s.list_arguments() if n not in params]
    missing = [n for n in free if n not in shapes]
    if missing:
        raise NNSymError(f"give the shapes of the inputs {missing} (--shape NAME=D1,D2,...) "
                         "or their values (--input NAME=FILE.npy)")
    exe = s.simple_bind(grad_req="null", **{k: v for k, v in shapes.items() if k in free})
    for what, given, dest in (("argument", arg_params, exe.arg_dict),
                              ("auxiliary state", aux_params, exe.aux_dict)):
        for k, arr in given.items():
            if k not in dest:
                print(f"note: the checkpoint's {what} {k!r} is not used by the symbol",
                      file=out)
                continue
            if tuple(arr.shape) != tuple(dest[k].shape):
                raise NNSymError(f"checkpoint {what} {k!r} has shape {tuple(arr.shape)}, the "
                                 f"bound symbol needs {tuple(dest[k].shape)}")
            arr.copyto(dest[k])
    rng = np.random.default_rng(0)
    for n in free:
        if n in inputs:
            exe.arg_dict[n][:] = inputs[n]
        elif not n.endswith("_label"):
            exe.arg_dict[n][:] = rng.standard_normal(exe.arg_dict[n].shape)
            print(f"note: {n} {shape_str(exe.arg_dict[n].shape)} filled with standard normal "
                  "values (seed 0); give --input to use yours", file=out)
    outs = exe.forward()
    times = []
    for _ in range(max(1, args.repeat)):
        t0 = time.perf_counter()
        exe.forward()
        times.append(time.perf_counter() - t0)
    if args.save == STDIO:
        _write_stdout(nd.save_tobuffer(dict(zip(s.list_outputs(), outs))))
    elif args.save:  # written before the summary is printed (see cmd_infer)
        nd.save(args.save, dict(zip(s.list_outputs(), outs)))
    for name, o in zip(s.list_outputs(), outs):
        v = o.asnumpy()
        line = (f"{name}: {shape_str(v.shape)} {v.dtype.name}  min {v.min(initial=np.inf):.6g}  "
                f"max {v.max(initial=-np.inf):.6g}  mean {v.mean() if v.size else 0:.6g}")
        if v.ndim == 2 and v.shape[1] > 1:
            top = np.argsort(-v[0])[:5]
            line += "  top-5 of row 0: " + ", ".join(f"{i} ({v[0, i]:.4g})" for i in top)
        print(line, file=out)
    if args.save and args.save != STDIO:
        print(f"outputs written to {args.save}", file=out)
    print(f"forward: {np.median(times) * 1e3:.3f} ms per run (median of {len(times)}), "
          f"planned memory {exe.plan.total_bytes:,} bytes", file=out)
    return 0


def cmd_export_onnx(args: argparse.Namespace) -> int:
    """Export a checkpoint to ONNX (``nnsym.onnx.export_checkpoint``)."""
    if args.out != STDIO:
        path = export_checkpoint(args.prefix, args.epoch, dict(args.shape), args.out,
                                 dict(args.dtype))
        print(f"wrote {path} (ONNX opset {ONNX_OPSET})")
        return 0
    with tempfile.TemporaryDirectory(prefix="nnsym-onnx-") as tmp:
        path = export_checkpoint(args.prefix, args.epoch, dict(args.shape),
                                 Path(tmp) / "model.onnx", dict(args.dtype))
        _write_stdout(Path(path).read_bytes())
    print(f"wrote the model to standard output (ONNX opset {ONNX_OPSET})", file=sys.stderr)
    return 0


def cmd_plot(args: argparse.Namespace) -> int:
    """Draw a symbol (shapes on the edges when given) as SVG/PNG/PDF through Graphviz's
    ``dot``; without it, write the DOT source and say how to render it."""
    s = _load_symbol(args.model)
    shapes, dtypes = dict(args.shape) or None, dict(args.dtype) or None
    stem = ("stdin" if args.model == STDIO else
            _symbol_file(args.model).name.removesuffix(".json").removesuffix("-symbol"))
    plot = viz.plot_network(s, title=stem, shape=shapes, dtype=dtypes,
                            hide_weights=not args.show_weights)
    # nnsym's own Digraph renders (and says how to, without dot) the same DOT source, whether
    # plot_network returned it or a graphviz.Digraph
    d = plot if isinstance(plot, viz.Digraph) else viz.Digraph(stem, plot.source)
    if args.output == STDIO:
        if args.summary:
            with contextlib.redirect_stdout(sys.stderr):
                viz.print_summary(s, shape=shapes)
        fmt = args.format or "svg"
        # without dot, the DOT source is the picture's stand-in (as with a file)
        _write_stdout(d.source if viz.dot_program() is None else d.pipe(fmt))
        return 0
    out = Path(args.output or f"{stem}.{args.format or 'svg'}")
    if args.summary:
        viz.print_summary(s, shape=shapes)
    if viz.dot_program() is None:
        src = d.save(out.with_suffix(".dot"))
        fmt = args.format or out.suffix.lstrip(".") or "svg"
        print(f"Graphviz `dot` not found; wrote {src}\nrender it with: "
              f"{viz.render_command(src, out, fmt)}")
        return 0
    print(f"wrote {d.render(out, format=args.format)}")
    return 0


def demo_symbols() -> dict[str, tuple[Symbol, dict[str, tuple[int, ...]]]]:
    data = sym.Variable("data")
    fc1 = sym.FullyConnected(data, num_hidden=128, name="fc1")
    act1 = sym.Activation(fc1, act_type="relu", name="relu1")
    fc2 = sym.FullyConnected(act1, num_hidden=10, name="fc2")
    mlp = sym.SoftmaxOutput(fc2, name="softmax")

    x = sym.Variable("data")
    c1 = sym.Convolution(x, kernel=(3, 3), num_filter=8, pad=(1, 1), name="conv1")
    b1 = sym.BatchNorm(c1, fix_gamma=False, name="bn1")
    r1 = sym.Activation(b1, act_type="relu", name="relu1")
    p1 = sym.Pooling(r1, kernel=(2, 2), stride=(2, 2), pool_type="max", name="pool1")
    f = sym.Flatten(p1, name="flat")
    fc = sym.FullyConnected(f, num_hidden=10, name="fc")
    conv = sym.SoftmaxOutput(fc, name="softmax")
    return {"mlp": (mlp, {"data": (64, 784)}), "convnet": (conv, {"data": (8, 3, 32, 32)})}


def cmd_demo(args: argparse.Namespace) -> int:
    out_dir = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="nnsym-demo-"))
    out_dir.mkdir(parents=True, exist_ok=True)
    for name, (s, shapes) in demo_symbols().items():
        given = ", ".join(f"{k}={v}" for k, v in shapes.items())
        print(f"== {name}: inferred shapes and dtypes for {given}")
        g = infer_graph(s, shapes, {})
        print(format_table(g))
        arg, _, aux = s.infer_shape_partial(**shapes)  # complete: the demo gives every input
        n_params = sum(
            int(np.prod(sh))
            for n, sh in zip(s.list_arguments(), arg)
            if n not in shapes and not n.endswith("_label")
        )
        print(f"arguments: {len(arg)}, auxiliary states: {len(aux)}, parameters: {n_params:,}")
        _demo_forward(g)
        fileio.write_text(out_dir / f"{name}-symbol.json", s.tojson())
        fileio.write_text(out_dir / f"{name}-inferred.json", graph_to_json(g, inferred=True))
        print(f"wrote {out_dir / (name + '-symbol.json')} and {name}-inferred.json\n")
    print("== training")
    if compiler.backend() == "c":
        demo_train()
        print("\n== sparse training")
        demo_train_sparse()
        print("\n== a bundled model: MobileNet v1 (width 0.25, 10 classes), an MXNet 1.9.1 "
              "model-zoo export with random weights, loaded as a checkpoint")
        prefix = Path(__file__).parent / "examples" / "mobilenet_v1_w025"
        print(f"nnsym run {prefix} 0 --shape data=1,3,64,64")
        cmd_run(argparse.Namespace(prefix=str(prefix), epoch=0, shape=[("data", (1, 3, 64, 64))],
                                   input=[], repeat=20, save=None))
    else:
        print("skipped: binding and training need generated kernels (a C compiler)")
    return 0


def _demo_forward(g: Graph) -> None:
    """One inference forward pass of an inferred graph, node by node through nnsym's generated
    kernels (``nd`` calls), checked against every operator's numpy reference."""
    idx, attrs = g.index, g.attrs
    assert attrs.shape is not None and attrs.dtype is not None
    rng = np.random.default_rng(0)
    values: list[Any] = [None] * idx.num_entries
    for nid in idx.input_nodes:
        eid = idx.entry_id(nid)
        shape: tuple[int, ...] = tuple(int(d or 0) for d in attrs.shape[eid] or ())
        name = idx.nodes[nid].name
        v: np.ndarray
        if name.endswith(("_moving_var", "_gamma")):
            v = np.ones(shape)
        elif name.endswith(("_moving_mean", "_beta", "_bias", "_label")):
            v = np.zeros(shape)
        else:
            v = rng.standard_normal(shape) * (1.0 if name == "data" else 0.05)
        values[eid] = v.astype(attrs.dtype[eid])
    compiles = compiler.STATS["compiles"]
    t0 = time.perf_counter()
    worst = 0.0
    for nid, node in enumerate(idx.nodes):
        if node.op is None:
            continue
        ins = [values[e] for e in idx.input_entries[nid]]
        given = {k: v for k, v in node.attrs.items() if not k.startswith("__")}
        outs = run_op(node.op, given, ins)
        assert node.op.reference is not None
        want = node.op.reference(node.params, *ins)
        want = list(want) if isinstance(want, (tuple, list)) else [want]
        for eid, got, ref in zip(idx.output_entries(nid), outs, want):
            values[eid] = got
            scale = max(1.0, float(np.abs(ref).max(initial=0.0)))
            worst = max(worst, float(np.abs(got - ref).max(initial=0.0)) / scale)
    dt = time.perf_counter() - t0
    probs = values[idx.outputs[0]]
    print(f"forward through generated C kernels ({compiler.backend()} backend, "
          f"{compiler.STATS['compiles'] - compiles} compiler call(s)): {dt * 1e3:.0f} ms; "
          f"output {probs.shape}, rows sum to {float(probs.sum(axis=-1).mean()):.4f}, "
          f"largest difference from the numpy references {worst:.1e}")


class _EpochMetrics:
    """A batch-end callback keeping each epoch's running (global) metric values."""

    def __init__(self) -> None:
        self.by_epoch: dict[int, dict[str, float]] = {}

    def __call__(self, param: Any) -> None:
        self.by_epoch[param.epoch] = dict(param.eval_metric.get_global_name_value())

    def history(self) -> list[tuple[float, float]]:
        return [(v["cross-entropy"], v["accuracy"]) for _, v in sorted(self.by_epoch.items())]


class _StdoutHandler(logging.Handler):
    """Writes records to whatever ``sys.stdout`` is when they are emitted."""

    def emit(self, record: logging.LogRecord) -> None:
        print(self.format(record), flush=True)


@contextlib.contextmanager
def _fit_logging() -> Iterator[None]:
    """Show Module.fit's and Speedometer's INFO lines on standard output while the demo
    trains (as an MXNet script's ``logging.basicConfig(level=logging.INFO)`` would)."""
    root = logging.getLogger()
    handler = _StdoutHandler()
    handler.setFormatter(logging.Formatter("%(message)s"))
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    try:
        yield
    finally:
        root.removeHandler(handler)
        root.setLevel(level)


def demo_train(epochs: int = 5, batch: int = 64, seed: int = 0) -> list[tuple[float, float]]:
    """Train a small MLP on a synthetic 10-class problem (Gaussian clusters) with
    ``Module.fit``: SGD with momentum, Xavier initialisation, a Speedometer and the accuracy and
    cross-entropy metrics. Returns (cross-entropy, accuracy) per epoch."""
    rng = np.random.default_rng(seed)
    classes, dim, n = 10, 64, 2048
    centers = rng.standard_normal((classes, dim)) * 0.25
    labels = rng.integers(0, classes, n).astype(np.float32)
    data = (centers[labels.astype(np.int64)] + rng.standard_normal((n, dim))).astype(np.float32)

    x = sym.Variable("data")
    h = sym.Activation(sym.FullyConnected(x, num_hidden=128, name="fc1"), act_type="relu",
                       name="relu1")
    out = sym.SoftmaxOutput(sym.FullyConnected(h, num_hidden=classes, name="fc2"),
                            name="softmax")
    train = mio.NDArrayIter(data, labels, batch_size=batch, shuffle=True)
    print(f"training an MLP {dim}-128-{classes} with Module.fit (SGD, momentum 0.9, batch "
          f"{batch}) on {n} synthetic samples")
    mod = module.Module(out, context=cpu())
    record = _EpochMetrics()
    nrandom.seed(seed)
    with _fit_logging():
        mod.fit(train, eval_metric=["ce", "acc"], optimizer="sgd",
                optimizer_params={"learning_rate": 0.05, "momentum": 0.9},
                initializer=initializer.Xavier(), num_epoch=epochs,
                batch_end_callback=[callback.Speedometer(batch, frequent=16,
                                                         auto_reset=False), record])
    return record.history()


def demo_train_sparse(epochs: int = 5, batch: int = 128, seed: int = 0,
                      ) -> list[tuple[float, float]]:
    """A sparse linear classifier trained with ``Module.fit``: csr data (bag-of-features rows,
    8 of 5,000 features active), ``dot(data, weight)`` whose weight gradient is row_sparse
    (only the rows of the batch's features), and lazy SGD with momentum updating only those
    rows (docs/sparse.md). Returns (cross-entropy, accuracy) per epoch."""
    rng = np.random.default_rng(seed)
    n, feats, active, classes = 8192, 5000, 8, 4
    true_w = rng.standard_normal((feats, classes))
    cols = np.sort(np.stack([rng.choice(feats, active, replace=False) for _ in range(n)]), axis=1)
    vals = rng.random((n, active)).astype(np.float32) + 0.5
    indptr = np.arange(0, n * active + 1, active)
    dense_logits = np.einsum("na,nac->nc", vals, true_w[cols])
    labels = dense_logits.argmax(axis=1).astype(np.float32)
    dataset = nd.sparse.csr_matrix((vals.ravel(), cols.ravel(), indptr), shape=(n, feats))

    data = sym.Variable("data", stype="csr")
    weight = sym.Variable("weight", shape=(feats, classes), init=initializer.Normal(0.01))
    bias = sym.Variable("bias", shape=(1, classes))
    logits = sym.broadcast_add(sym.dot(data, weight), bias)
    net = sym.SoftmaxOutput(logits, name="softmax")
    train = mio.NDArrayIter(dataset, labels, batch_size=batch, last_batch_handle="discard")
    print(f"training a sparse linear classifier ({feats:,} features, {active} active per "
          f"sample, {classes} classes) with Module.fit: csr batches, a row_sparse weight "
          f"gradient and lazy SGD momentum (batch {batch}, {n:,} samples)")
    mod = module.Module(net, context=cpu())
    record = _EpochMetrics()
    nrandom.seed(seed)
    with _fit_logging():
        mod.fit(train, eval_metric=["ce", "acc"], optimizer="sgd",
                optimizer_params={"learning_rate": 1.0, "momentum": 0.9, "wd": 1e-5},
                num_epoch=epochs,
                batch_end_callback=[callback.Speedometer(batch, frequent=32,
                                                         auto_reset=False), record])
    return record.history()


def cmd_cache(args: argparse.Namespace) -> int:
    root = Path(args.dir) if args.dir else cache.configured_root()
    action = args.flag or args.action or "info"
    if action == "info":
        info = cache.info(root)
        print(f"kernel cache: {info['path']}")
        print(f"entries: {info['entries']}, size: {info['bytes'] / 1e6:.1f} MB")
        print("(set NNSYM_CACHE_DIR to move it)")
    elif action == "clear":
        n = cache.clear(root)
        print(f"removed {n} cached build(s) from {root / cache.FORMAT}")
    else:
        report = cache.check(root)
        for path, reason, _ in report.removed:
            print(f"removed {path}: {reason}")
        for problem in report.problems:
            print(f"problem: {problem}", file=sys.stderr)
        print(f"kernel cache {root}: {report.ok} entr{'y' if report.ok == 1 else 'ies'} ok, "
              f"{len(report.removed)} removed, {report.bytes_freed / 1e6:.2f} MB freed"
              + ("" if report.healthy else f", {len(report.problems)} problem(s) left"))
        return 0 if report.healthy else 1
    return 0


def _op_rows() -> list[tuple[str, str, str, str]]:
    """(name, aliases, storage types, devices) of every registered operator."""
    gpu_ops = {v.op for v in cuda_codegen.all_variants()}
    rows = []
    for name, op in sorted(REGISTRY.items()):
        stypes = {"default"}
        for rule in op.stype_rules:
            stypes |= {s.label for s in (*rule.ins, *rule.out) if isinstance(s, SType)}
        if op.expr is not None and op.sparse:
            stypes |= {"csr", "row_sparse"}
        order = [s for s in ("default", "csr", "row_sparse") if s in stypes]
        devices = "cpu, gpu" if name in gpu_ops else "cpu"
        rows.append((name, ", ".join(op.aliases), ", ".join(order), devices))
    return rows


def ops_markdown() -> str:
    """docs/operators.md: every registered operator with its aliases, storage types, devices,
    inputs and parameters, from the registry."""
    rows = _op_rows()
    out = ["# Operators", "",
           f"Generated from the registry by `nnsym ops --markdown > docs/operators.md` "
           f"({len(rows)} operators; `tests/test_cli.py` checks that this file is current). "
           "Storage types are those an operator's storage-type rules name (`default` is dense; "
           "a sparse signature without a kernel of its own falls back to the dense kernel). "
           "`gpu` means a CUDA kernel is generated for it. `nnsym ops --missing` lists MXNet "
           "1.9.1's operators that nnsym does not implement.", "",
           "| operator | aliases | storage types | devices |", "|---|---|---|---|"]
    out += [f"| `{r[0]}` | {', '.join(f'`{a}`' for a in r[1].split(', ') if a)} | {r[2]} | "
            f"{r[3]} |" for r in rows]
    out += ["", "## Inputs and parameters", ""]
    for name, op in sorted(REGISTRY.items()):
        out += [f"### `{name}`", "", (op.doc or "").strip() or f"The {name} operator.", ""]
        if op.key_var_num_args:
            out.append(f"- inputs: any number (`{op.key_var_num_args}`)")
        else:
            try:  # with required parameters, as the first example sets them
                raw = dict(op.examples[0].params) if op.examples else {}
                names = op.input_names(op.parse_params(raw)[0])
                out.append("- inputs: " + (", ".join(f"`{n}`" for n in names) or "none"))
            except NNSymError:
                out.append("- inputs: depend on the parameters")
        for spec in op.params.specs().values():
            out.append(f"- `{spec.describe()}`: {spec.doc}".rstrip(": "))
        out.append("")
    return "\n".join(out)


def cmd_ops(args: argparse.Namespace) -> int:
    if args.markdown:
        print(ops_markdown())
        return 0
    if args.missing:
        user_facing = ("_contrib_", "_linalg_", "_random_", "_sample_", "_image_")
        public = sorted(n for n in mxnet_operator_names() if n not in all_names()
                        and (not n.startswith("_") or n.startswith(user_facing)))
        for n in public:
            print(n)
        print(f"{len(public)} of MXNet 1.9.1's public, contrib, linalg, random, sample and "
              "image operators are not implemented", file=sys.stderr)
        return 0
    rows = _op_rows()
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    print(f"{'operator':<{widths[0]}}  {'aliases':<{widths[1]}}  {'storage types':<{widths[2]}}"
          "  devices")
    for r in rows:
        print(f"{r[0]:<{widths[0]}}  {r[1]:<{widths[1]}}  {r[2]:<{widths[2]}}  {r[3]}")
    print(f"{len(rows)} operators, {sum(len(r[1].split(', ')) for r in rows if r[1])} aliases",
          file=sys.stderr)
    return 0


def cmd_launch(args: argparse.Namespace) -> int:
    """``nnsym launch -n N [--hosts FILE] [--timeout S] python train.py ...`` over mpiexec."""
    command = list(args.command)
    if command and command[0] == "--":
        command = command[1:]
    if args.hosts != STDIO:
        return launch(args.n, command, hosts=args.hosts, timeout=args.timeout)
    with tempfile.TemporaryDirectory(prefix="nnsym-hosts-") as tmp:
        hosts = Path(tmp) / "hosts"
        fileio.write_text(hosts, sys.stdin.read())
        return launch(args.n, command, hosts=str(hosts), timeout=args.timeout)


EXIT_OK, EXIT_FAILURE, EXIT_USAGE = 0, 1, 2

EPILOG = """\
exit status:
  0    success (also when a reader closes the output pipe early, as `| head` does)
  1    failure: a bad or missing file, a model nnsym cannot infer or run, a failed check
  2    usage: unknown command or option, a malformed argument
  130  interrupted (Ctrl-C)
  (nnsym launch exits with its launcher's status; cache check exits 1 where problems remain)

'-' as a file name reads standard input (a model: symbol JSON; --input NAME=-: a .npy) or
writes standard output (--json -, --save -, export-onnx --out -, plot -o -); the
human-readable lines then go to standard error. Directory arguments (codegen and demo --out,
cache --dir) refuse '-'. An error is one line 'nnsym: error: ...' on standard error; --debug
(before or after the command) adds the traceback. nnsym prints no colour."""


def package_version() -> str:
    """The installed distribution's version, else ``nnsym.__version__``."""
    try:
        return importlib.metadata.version("nnsym")
    except importlib.metadata.PackageNotFoundError:
        import nnsym  # noqa: PLC0415, RUF100 -- only where no distribution metadata exists

        return str(getattr(nnsym, "__version__", "unknown"))


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                        help="show the traceback of an error")
    p = argparse.ArgumentParser(
        prog="nnsym",
        description="nnsym: a symbolic graph compiler with MXNet 1.x's symbolic API.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--version", action="version", version=f"nnsym {package_version()}")
    p.add_argument("--debug", action="store_true", help="show the traceback of an error")
    sub = p.add_subparsers(dest="command", required=True)

    def add(name: str, **kw: Any) -> argparse.ArgumentParser:
        return sub.add_parser(name, parents=[common], epilog=EPILOG,
                              formatter_class=argparse.RawDescriptionHelpFormatter, **kw)

    pi = add("infer", help="infer shapes and dtypes of an MXNet symbol JSON file")
    pi.add_argument("model", help="MODEL-symbol.json, a checkpoint prefix, or - (stdin)")
    pi.add_argument(
        "--shape",
        action="append",
        type=_parse_shape,
        default=[],
        metavar="NAME=D1,D2,...",
        help="input shape (repeatable)",
    )
    pi.add_argument(
        "--dtype",
        action="append",
        type=_parse_dtype,
        default=[],
        metavar="NAME=DTYPE",
        help="input dtype (repeatable), e.g. data=float16",
    )
    pi.add_argument("--json", metavar="OUT", help="write the inferred graph JSON here (- for "
                    "stdout; the table then goes to stderr)")
    pi.set_defaults(func=cmd_infer)
    pr = add("run", help="bind a checkpoint (PREFIX-symbol.json, "
                        "PREFIX-EPOCH.params), run forward, summarise outputs, time a run")
    pr.add_argument("prefix", help="checkpoint prefix")
    pr.add_argument("epoch", type=int, help="checkpoint epoch")
    pr.add_argument("--shape", action="append", type=_parse_shape, default=[],
                    metavar="NAME=D1,D2,...", help="input shape (repeatable)")
    pr.add_argument("--input", action="append", type=_parse_input, default=[],
                    metavar="NAME=FILE.npy", help="input values (repeatable; FILE - reads "
                    "stdin)")
    pr.add_argument("--repeat", type=int, default=10, help="timed runs (default 10)")
    pr.add_argument("--save", metavar="OUT.params", help="write the outputs (nd.save format; "
                    "- for stdout)")
    pr.set_defaults(func=cmd_run)
    px = add("export-onnx", help="write a checkpoint (PREFIX-symbol.json, "
                        "PREFIX-EPOCH.params) as an ONNX model (needs nnsym[onnx])")
    px.add_argument("prefix", help="checkpoint prefix")
    px.add_argument("epoch", type=int, help="checkpoint epoch")
    px.add_argument("--shape", action="append", type=_parse_shape, default=[],
                    metavar="NAME=D1,D2,...", help="data input shape (repeatable, required)")
    px.add_argument("--dtype", action="append", type=_parse_dtype, default=[],
                    metavar="NAME=DTYPE", help="data input dtype (default float32)")
    px.add_argument("--out", required=True, metavar="FILE.onnx", help="the ONNX file to write "
                    "(- for stdout)")
    px.set_defaults(func=cmd_export_onnx)
    pp = add("plot", help="draw a symbol JSON (or checkpoint prefix) with shapes "
                        "on the edges (Graphviz dot; DOT source where dot is missing)")
    pp.add_argument("model", help="MODEL-symbol.json, a checkpoint prefix, or - (stdin)")
    pp.add_argument("--shape", action="append", type=_parse_shape, default=[],
                    metavar="NAME=D1,D2,...", help="input shape (repeatable)")
    pp.add_argument("--dtype", action="append", type=_parse_dtype, default=[],
                    metavar="NAME=DTYPE", help="input dtype (repeatable)")
    pp.add_argument("-o", "--output", metavar="OUT.svg", help="picture to write (.svg, .png, "
                    ".pdf; default MODEL.svg; - for stdout: the picture, or the DOT source "
                    "without Graphviz)")
    pp.add_argument("--format", choices=sorted(viz.KNOWN_FORMATS - {"dot", "gv"}),
                    help="picture format (default: from -o's suffix, else svg)")
    pp.add_argument("--show-weights", action="store_true", help="draw parameter nodes too")
    pp.add_argument("--summary", action="store_true", help="also print the layer table")
    pp.set_defaults(func=cmd_plot)
    pg = add("codegen", help="write the generated kernel sources (C or CUDA), one "
                        "kernel per file (every kernel variant, dense and sparse)")
    add_codegen_arguments(pg)
    pg.set_defaults(func=run_codegen)
    pd = add("demo", help="build an MLP and a small conv net, infer, print, dump JSON")
    pd.add_argument("--out", metavar="DIR", type=directory_arg,
                    help="where to write the JSON (default: a temp dir)")
    pd.set_defaults(func=cmd_demo)
    pc = add("cache", help="show, check (verify and prune) or clear the "
                        "compiled-kernel cache")
    pc.add_argument("action", nargs="?", choices=["info", "check", "clear"],
                    help="info (default), check: remove broken entries, stale build "
                    "directories and old failed sources (exit 1 where problems remain), clear")
    for name in ("info", "check", "clear"):
        pc.add_argument(f"--{name}", dest="flag", action="store_const", const=name,
                        help=f"same as the {name} action")
    pc.add_argument("--dir", metavar="DIR", type=directory_arg,
                    help="the cache directory (default: $NNSYM_CACHE_DIR, else ~/.cache/nnsym)")
    pc.set_defaults(func=cmd_cache)
    po = add("ops", help="list the registered operators with their aliases, storage "
                        "types and devices")
    po.add_argument("--missing", action="store_true",
                    help="list instead MXNet 1.9.1's operators that nnsym does not implement")
    po.add_argument("--markdown", action="store_true",
                    help="print docs/operators.md (every operator with its parameters)")
    po.set_defaults(func=cmd_ops)
    pl = add("launch", help="run a training script on N MPI ranks (mpiexec) for "
                        "the 'dist_sync' kvstore; exits with the launcher's status")
    pl.add_argument("-n", type=int, required=True, metavar="N", help="number of ranks")
    pl.add_argument("--hosts", metavar="FILE", help="hosts file (mpiexec's -f / --hostfile; "
                    "- reads it from stdin)")
    pl.add_argument("--timeout", type=float, metavar="S", help="seconds a rank waits for the "
                    "others before failing (sets NNSYM_KVSTORE_TIMEOUT; default 120)")
    pl.add_argument("command", nargs=argparse.REMAINDER, help="the command, e.g. python "
                    "train.py --epochs 3")
    pl.set_defaults(func=cmd_launch)
    return p


def _one_line(text: str) -> str:
    return "; ".join(ln.strip() for ln in text.splitlines() if ln.strip())


def _quiet_stdout() -> None:
    """Point standard output at /dev/null after its reader went away, so the interpreter's
    final flush does not fail again (the Python docs' recipe for SIGPIPE)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError, io.UnsupportedOperation):
        pass  # no real file descriptor (captured output): nothing will be flushed to a pipe


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status (0 ok, 1 failure, 2 usage)."""
    args = build_parser().parse_args(argv)  # usage errors: argparse prints them and exits 2
    debug = bool(getattr(args, "debug", False))
    try:
        code = int(args.func(args))
        sys.stdout.flush()  # a closed pipe shows here, not in the interpreter's exit
    except BrokenPipeError:
        _quiet_stdout()
        return EXIT_OK
    except KeyboardInterrupt:
        print("nnsym: interrupted", file=sys.stderr)
        return 130
    except Exception as e:
        if debug:
            traceback.print_exc()
        if isinstance(e, (NNSymError, OSError)):
            msg = f"{type(e).__name__}: {_one_line(str(e))}"
        else:  # a bug in nnsym: say so, and how to see where
            msg = (f"internal error {type(e).__name__}: {_one_line(str(e))}"
                   + ("" if debug else " (run with --debug for the traceback)"))
        print(f"nnsym: error: {msg}", file=sys.stderr)
        return EXIT_FAILURE
    return code


if __name__ == "__main__":
    raise SystemExit(main())
