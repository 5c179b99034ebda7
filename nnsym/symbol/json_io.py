"""MXNet 1.x symbol JSON files: ``load`` reads one into a ``Symbol``.

The parser and the writer are ``nnsym.ir.json``; ``load_json`` (a string) and ``infer_for_dump``
(inference for ``tojson(inferred=True)``) live with ``Symbol`` and are re-exported here.
"""

from __future__ import annotations

from pathlib import Path

from nnsym.errors import GraphFormatError
from nnsym.symbol.symbol import Symbol, infer_for_dump, load_json

__all__ = ["infer_for_dump", "load", "load_json"]


def load(fname: str | Path) -> Symbol:
    """Load a symbol from an MXNet ``-symbol.json`` file."""
    try:
        text = Path(fname).read_text()
    except UnicodeDecodeError as e:
        raise GraphFormatError(f"{fname}: not a UTF-8 text file: {e}") from None
    try:
        return load_json(text)
    except GraphFormatError as e:
        raise GraphFormatError(f"{fname}: {e}") from None
