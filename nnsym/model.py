"""Checkpoints in MXNet's format: ``save_checkpoint`` / ``load_checkpoint`` (``mx.model``).

A checkpoint is two files, named as MXNet 1.9.1 names them:

* ``<prefix>-symbol.json``: the symbol's JSON (``Symbol.save``);
* ``<prefix>-<epoch:04d>.params``: an NDArray file (``nnsym.ndarray.io``, MXNet's binary format)
  holding a dict with one ``arg:<name>`` entry per argument parameter and one ``aux:<name>``
  entry per auxiliary state.

Files written here load in MXNet (``mx.model.load_checkpoint``) and MXNet's (including what
Gluon's ``HybridBlock.export`` writes) load here. Behaviour follows ``mxnet/model.py``:

* ``save_checkpoint`` skips the JSON when ``symbol`` is ``None``, writes the arg entries before
  the aux entries (each in its dict's order), copies every array to the CPU first and logs the
  parameter file's name at INFO level.
* ``load_params`` / ``load_checkpoint`` of a parameter file that holds no arrays log a warning
  and give two empty dicts.

Where MXNet fails obscurely nnsym raises a ``CheckpointError`` (an ``NNSymError`` and a
``ValueError``) that names the file and the offending keys: a missing file
(``CheckpointNotFoundError``, also a ``FileNotFoundError``), a parameter file saved as a list (no
names), and keys that do not start with ``arg:`` or ``aux:`` or have nothing after it (MXNet
fails with an unpacking error for a key without ``:``, such as Gluon's ``save_parameters``
names, and silently drops other prefixes; nnsym refuses both). Non-NDArray values, non-string
names and a non-integer epoch raise ``CheckpointTypeError`` (also a ``TypeError``).
"""

from __future__ import annotations

import logging
import os
from collections import namedtuple
from collections.abc import Mapping
from pathlib import Path
from typing import Any, SupportsInt

from nnsym.context import cpu
from nnsym.errors import NNSymError
from nnsym.ndarray import io as _io
from nnsym.ndarray.ndarray import NDArray
from nnsym.symbol import json_io as _json_io
from nnsym.symbol.symbol import Symbol

__all__ = [
    "BatchEndParam",
    "CheckpointError",
    "CheckpointNotFoundError",
    "CheckpointTypeError",
    "load_checkpoint",
    "load_params",
    "load_params_file",
    "params_file",
    "save_checkpoint",
    "save_params_file",
    "symbol_file",
]

_log = logging.getLogger(__name__)

#: What batch-end callbacks receive (MXNet keeps it in ``mx.model``).
BatchEndParam = namedtuple(  # type: ignore[name-match]  # MXNet's class name
    "BatchEndParams", ["epoch", "nbatch", "eval_metric", "locals"])
_PREFIXES = ("arg", "aux")


class CheckpointError(NNSymError, ValueError):
    """A checkpoint that cannot be written or read: bad names, a parameter file of the wrong
    shape, missing files."""


class CheckpointNotFoundError(CheckpointError, FileNotFoundError):
    """A checkpoint file (``-symbol.json`` or ``.params``) that does not exist."""


class CheckpointTypeError(CheckpointError, TypeError):
    """A value of the wrong type given to ``save_checkpoint`` (or a non-integer epoch)."""


def _epoch(epoch: Any) -> int:
    # MXNet formats with '%04d', which takes any real number (1.7 -> '0001'); so does
    # nnsym, but anything else is a clear error rather than '%d format: ...'.
    if isinstance(epoch, (str, bytes)) or not isinstance(epoch, SupportsInt):
        raise CheckpointTypeError(f"epoch must be an integer, not {type(epoch).__name__} "
                                  f"{epoch!r}")
    return int(epoch)


def symbol_file(prefix: str | os.PathLike[str]) -> str:
    """``<prefix>-symbol.json``, the checkpoint's symbol file."""
    return f"{os.fspath(prefix)}-symbol.json"


def params_file(prefix: str | os.PathLike[str], epoch: int) -> str:
    """``<prefix>-<epoch:04d>.params``, the checkpoint's parameter file for ``epoch``."""
    return f"{os.fspath(prefix)}-{_epoch(epoch):04d}.params"  # MXNet: '%s-%04d.params'


def _entries(kind: str, params: Mapping[str, NDArray] | None) -> dict[str, NDArray]:
    if params is None:
        return {}
    if not isinstance(params, Mapping):
        raise CheckpointTypeError(f"{kind}_params must be a dict of name -> NDArray, not "
                                  f"{type(params).__name__}")
    out: dict[str, NDArray] = {}
    for name, value in params.items():
        if not isinstance(name, str):
            raise CheckpointTypeError(f"{kind}_params: parameter names must be strings, got "
                                      f"{name!r}")
        if not name:
            raise CheckpointError(f"{kind}_params: a parameter has an empty name")
        if not isinstance(value, NDArray):
            raise CheckpointTypeError(f"{kind}_params[{name!r}] must be an NDArray, not "
                                      f"{type(value).__name__}")
        out[f"{kind}:{name}"] = value.as_in_context(cpu())
    return out


def save_checkpoint(
    prefix: str | os.PathLike[str],
    epoch: int,
    symbol: Symbol | None,
    arg_params: Mapping[str, NDArray] | None,
    aux_params: Mapping[str, NDArray] | None,
    remove_amp_cast: bool = True,
) -> None:
    """Writes ``<prefix>-symbol.json`` (unless ``symbol`` is None) and
    ``<prefix>-<epoch:04d>.params`` with ``arg:NAME`` / ``aux:NAME`` entries, as MXNet does."""
    fname = params_file(prefix, epoch)
    if symbol is not None and not isinstance(symbol, Symbol):
        raise CheckpointTypeError(f"symbol must be a Symbol or None, not {type(symbol).__name__}")
    save_dict = _entries("arg", arg_params)
    save_dict.update(_entries("aux", aux_params))
    if symbol is not None:
        symbol.save(symbol_file(prefix), remove_amp_cast=remove_amp_cast)
    _io.save(fname, save_dict)
    _log.info('Saved checkpoint to "%s"', fname)


def save_params_file(fname: str | os.PathLike[str], arg_params: Mapping[str, NDArray] | None,
                     aux_params: Mapping[str, NDArray] | None) -> None:
    """Write one ``.params`` file of ``arg:NAME`` / ``aux:NAME`` entries (a checkpoint's
    parameter file under any name; ``Module.save_params``)."""
    save_dict = _entries("arg", arg_params)
    save_dict.update(_entries("aux", aux_params))
    _io.save(os.fspath(fname), save_dict)


def load_params_file(
    fname: str | os.PathLike[str],
) -> tuple[dict[str, NDArray], dict[str, NDArray]]:
    """``(arg_params, aux_params)`` from a ``.params`` file of ``arg:`` / ``aux:`` entries."""
    name = os.fspath(fname)
    _require(name)
    return _split(name, _io.load(name))


def _require(fname: str) -> None:
    if not Path(fname).is_file():
        what = "no such file" if not Path(fname).exists() else "not a regular file"
        raise CheckpointNotFoundError(f"checkpoint file {fname!r}: {what}")


def _split(fname: str, data: list[NDArray] | dict[str, NDArray]) -> tuple[dict[str, NDArray],
                                                                          dict[str, NDArray]]:
    arg_params: dict[str, NDArray] = {}
    aux_params: dict[str, NDArray] = {}
    if not data:
        _log.warning("Params file '%s' is empty", fname)
        return arg_params, aux_params
    if not isinstance(data, dict):
        raise CheckpointError(f"{fname}: holds a list of {len(data)} unnamed arrays; a "
                              "checkpoint's parameter file maps 'arg:NAME' / 'aux:NAME' to arrays")
    bad = []
    for key, value in data.items():
        kind, sep, name = key.partition(":")
        if not sep or kind not in _PREFIXES or not name:
            bad.append(key)
            continue
        (arg_params if kind == "arg" else aux_params)[name] = value
    if bad:
        shown = ", ".join(repr(k) for k in bad[:5]) + (f" and {len(bad) - 5} more"
                                                        if len(bad) > 5 else "")
        hint = ""
        if all(":" not in k for k in bad):
            hint = (" (a file of bare names, such as Gluon's save_parameters writes, is not a "
                    "checkpoint: load it with nnsym.ndarray.io.load)")
        raise CheckpointError(f"{fname}: {len(bad)} of {len(data)} keys do not have the form "
                              f"'arg:NAME' or 'aux:NAME': {shown}{hint}")
    return arg_params, aux_params


def load_params(
    prefix: str | os.PathLike[str], epoch: int
) -> tuple[dict[str, NDArray], dict[str, NDArray]]:
    """``(arg_params, aux_params)`` from ``<prefix>-<epoch:04d>.params``, the ``arg:`` / ``aux:``
    prefixes removed."""
    return load_params_file(params_file(prefix, epoch))


def load_checkpoint(
    prefix: str | os.PathLike[str], epoch: int
) -> tuple[Symbol, dict[str, NDArray], dict[str, NDArray]]:
    """``(symbol, arg_params, aux_params)`` from ``<prefix>-symbol.json`` and
    ``<prefix>-<epoch:04d>.params``, as ``mx.model.load_checkpoint`` returns them."""
    sname, pname = symbol_file(prefix), params_file(prefix, epoch)
    _require(sname)
    _require(pname)
    symbol = _json_io.load(sname)
    arg_params, aux_params = _split(pname, _io.load(pname))
    return symbol, arg_params, aux_params
