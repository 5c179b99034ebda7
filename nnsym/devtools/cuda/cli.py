"""``nnsym codegen``: every kernel variant (dense, and the sparse csr/row_sparse kernels) written
as C or CUDA source, one kernel per file."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from nnsym import fileio
from nnsym.devtools.cuda import sparse
from nnsym.devtools.cuda.codegen import TARGETS, render_source, suffix, variants
from nnsym.errors import NNSymError


def write_sources(target: str, out_dir: str | Path, op: str | None = None) -> list[Path]:
    """Write one self-contained kernel per file (``<name>.c`` or ``<name>.cu``) into
    ``out_dir``: every dense kernel variant (of ``op`` only, if given) and, for all operators,
    the sparse kernels (``nnsym.devtools.cuda.sparse``); returns the paths, sorted."""
    if target not in TARGETS:
        raise ValueError(f"target must be one of {TARGETS}, not {target!r}")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for v in variants(op):
        p = out / (v.name + suffix(target))
        fileio.write_text(p, render_source(v, target))
        paths.append(p)
    if op is None:  # the sparse (csr, row_sparse) kernels belong to no single operator
        for stem, source in sparse.kernels(target):
            p = out / (stem + suffix(target))
            fileio.write_text(p, source)
            paths.append(p)
    return sorted(paths)


def directory_arg(text: str) -> Path:
    """An argparse type for a directory argument: ``-`` (standard input/output) is refused."""
    if text == "-":
        raise argparse.ArgumentTypeError("a directory is needed here; '-' (standard input or "
                                         "output) cannot hold several files")
    return Path(text)


def add_codegen_arguments(ap: argparse.ArgumentParser) -> None:
    """The options of ``nnsym codegen`` (for a subcommand parser of nnsym.cli)."""
    ap.add_argument("--target", choices=TARGETS, required=True,
                    help="c: the C kernels; cuda: their CUDA twins")
    ap.add_argument("--out", required=True, type=directory_arg,
                    help="directory to write into (one file per kernel: not '-')")
    ap.add_argument("--op", help="only this operator's kernels (name or alias)")


def run_codegen(args: argparse.Namespace) -> int:
    """Write the sources ``args`` asks for; 0 on success, 1 when the operator has no kernels in
    these families, 2 on an unknown operator."""
    try:
        paths = write_sources(args.target, args.out, args.op)
    except NNSymError as e:
        print(f"nnsym: error: {e}", file=sys.stderr)
        return 2
    if not paths:
        print(f"nnsym: error: operator {args.op} has no generated kernels", file=sys.stderr)
        return 1
    print(f"wrote {len(paths)} {args.target} kernels to {args.out}")
    return 0


def cli_main(argv: Sequence[str] | None = None) -> int:
    """``nnsym codegen --target {c,cuda} --out DIR [--op NAME]``."""
    ap = argparse.ArgumentParser(
        prog="nnsym codegen",
        description="Write the generated kernels (every operator's dense kernel variants and "
        "the sparse kernels) as C or CUDA sources, one self-contained kernel per file.")
    add_codegen_arguments(ap)
    return run_codegen(ap.parse_args(argv))
