"""Iterators over iterators: ``ResizeIter`` (a fixed number of batches an epoch) and
``PrefetchingIter`` (each wrapped iterator read ahead by its own thread)."""

from __future__ import annotations

import queue
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from nnsym.errors import DataIterError
from nnsym.io.base import DataBatch, DataDesc, DataIter

__all__ = ["PrefetchingIter", "ResizeIter"]


class ResizeIter(DataIter):
    """``size`` batches an epoch from ``data_iter``, resetting it when it runs out;
    ``reset_internal`` says whether ``reset()`` also resets ``data_iter``."""

    def __init__(self, data_iter: DataIter, size: int, reset_internal: bool = True) -> None:
        super().__init__()
        if size < 0:
            raise DataIterError(f"ResizeIter: size must be >= 0, not {size}")
        self.data_iter = data_iter
        self.size = size
        self.reset_internal = reset_internal
        self.cur = 0
        self.current_batch: DataBatch | None = None
        self.batch_size = data_iter.batch_size
        if hasattr(data_iter, "default_bucket_key"):
            self.default_bucket_key = data_iter.default_bucket_key

    @property
    def provide_data(self) -> list[DataDesc]:
        return self.data_iter.provide_data

    @property
    def provide_label(self) -> list[DataDesc]:
        return self.data_iter.provide_label

    def reset(self) -> None:
        self.cur = 0
        if self.reset_internal:
            self.data_iter.reset()

    def iter_next(self) -> bool:
        if self.cur == self.size:
            return False
        try:
            self.current_batch = self.data_iter.next()
        except StopIteration:
            self.data_iter.reset()
            self.current_batch = self.data_iter.next()
        self.cur += 1
        return True

    def _batch(self) -> DataBatch:
        if self.current_batch is None:
            raise DataIterError("ResizeIter: no current batch; call iter_next() first")
        return self.current_batch

    def getdata(self) -> Any:
        return self._batch().data

    def getlabel(self) -> Any:
        return self._batch().label

    def getindex(self) -> Any:
        return self._batch().index

    def getpad(self) -> Any:
        return self._batch().pad


_NEXT, _STOP = "next", "stop"


def _worker(it: DataIter, commands: queue.Queue[str],
            results: queue.Queue[tuple[str, Any]]) -> None:
    """Serve ``next`` requests for one iterator until told to stop (holds no PrefetchingIter
    reference, so an abandoned PrefetchingIter can be collected and stop its threads)."""
    while commands.get() == _NEXT:
        try:
            results.put(("batch", it.next()))
        except StopIteration:
            results.put(("end", None))
        except BaseException as e:  # re-raised in the caller's thread
            results.put(("error", e))


def _renamed(descs: list[DataDesc], names: Mapping[str, str] | None,
             what: str) -> list[DataDesc]:
    if names is None:
        return list(descs)
    out = []
    for d in descs:
        d = d if isinstance(d, DataDesc) else DataDesc(*d)
        if d.name not in names:
            raise DataIterError(f"PrefetchingIter: {what} has no new name for {d.name!r} "
                                f"(given {dict(names)})")
        out.append(DataDesc(names[d.name], d.shape, d.dtype, d.layout))
    return out


class PrefetchingIter(DataIter):
    """Batches of several iterators side by side (their data and labels concatenated), each
    read one batch ahead by its own thread. ``rename_data``/``rename_label``: one
    ``{old: new}`` dict per iterator. Call ``close()`` (or use ``with``) to stop the threads;
    an unreferenced PrefetchingIter stops them too."""

    def __init__(self, iters: DataIter | Sequence[DataIter],
                 rename_data: Sequence[Mapping[str, str]] | None = None,
                 rename_label: Sequence[Mapping[str, str]] | None = None) -> None:
        super().__init__()
        self.iters: list[DataIter] = (list(iters) if isinstance(iters, (list, tuple))
                                      else [iters])  # type: ignore[list-item]
        self.n_iter = len(self.iters)
        if self.n_iter == 0:
            raise DataIterError("PrefetchingIter needs at least one iterator")
        for names, what in ((rename_data, "rename_data"), (rename_label, "rename_label")):
            if names is not None and len(names) != self.n_iter:
                raise DataIterError(f"PrefetchingIter: {what} has {len(names)} dicts for "
                                    f"{self.n_iter} iterators")
        self.rename_data = rename_data
        self.rename_label = rename_label
        self.batch_size = self.provide_data[0].shape[0]
        self.current_batch: DataBatch | None = None
        # NOTE: at most one request is outstanding per worker, so a result queue of one never
        # blocks the worker; the command queue also takes a stop while a request waits.
        self._commands: list[queue.Queue[str]] = [queue.Queue() for _ in self.iters]
        self._results: list[queue.Queue[tuple[str, Any]]] = [
            queue.Queue(maxsize=1) for _ in self.iters]
        self._pending = [False] * self.n_iter
        self._threads = [
            threading.Thread(target=_worker, args=(it, c, r), daemon=True,
                             name=f"nnsym-prefetch-{i}")
            for i, (it, c, r) in enumerate(zip(self.iters, self._commands, self._results,
                                               strict=True))]
        self._closed = False
        for t in self._threads:
            t.start()
        self._request()

    @property
    def provide_data(self) -> list[DataDesc]:
        names: Sequence[Mapping[str, str] | None] = self.rename_data or [None] * self.n_iter
        return [d for r, it in zip(names, self.iters, strict=True)
                for d in _renamed(it.provide_data, r, "rename_data")]

    @property
    def provide_label(self) -> list[DataDesc]:
        names: Sequence[Mapping[str, str] | None] = self.rename_label or [None] * self.n_iter
        return [d for r, it in zip(names, self.iters, strict=True)
                for d in _renamed(it.provide_label, r, "rename_label")]

    def _request(self) -> None:
        if self._closed:
            raise DataIterError("PrefetchingIter is closed")
        for i, c in enumerate(self._commands):
            if not self._pending[i]:
                c.put(_NEXT)
                self._pending[i] = True

    def _collect(self) -> list[tuple[str, Any]]:
        out = []
        for i, r in enumerate(self._results):
            if self._pending[i]:
                out.append(r.get())
                self._pending[i] = False
            else:
                out.append(("end", None))
        return out

    def reset(self) -> None:
        """Wait for the batches being read, reset every iterator, start reading again."""
        self._collect()  # NOTE: the workers are idle after this, so reset runs alone
        for it in self.iters:
            it.reset()
        self.current_batch = None
        self._request()

    def iter_next(self) -> bool:
        self._request()
        got = self._collect()
        for kind, value in got:
            if kind == "error":
                raise value
        kinds = {kind for kind, _ in got}
        if kinds == {"end"}:
            return False
        if kinds != {"batch"}:
            raise DataIterError("PrefetchingIter: the iterators ran out at different batches "
                                "(number of batches differs)")
        batches: list[DataBatch] = [b for _, b in got]
        if len({b.pad for b in batches}) != 1:
            raise DataIterError(f"PrefetchingIter: the iterators' batches have different pads "
                                f"{[b.pad for b in batches]}")
        self.current_batch = DataBatch(
            [d for b in batches for d in (b.data or [])],
            [lb for b in batches for lb in (b.label or [])],
            batches[0].pad, batches[0].index,
            provide_data=self.provide_data, provide_label=self.provide_label)
        self._request()
        return True

    def next(self) -> DataBatch:
        if self.iter_next():
            assert self.current_batch is not None
            return self.current_batch
        raise StopIteration

    def _batch(self) -> DataBatch:
        if self.current_batch is None:
            raise DataIterError("PrefetchingIter: no current batch; call iter_next() first")
        return self.current_batch

    def getdata(self) -> Any:
        return self._batch().data

    def getlabel(self) -> Any:
        return self._batch().label

    def getindex(self) -> Any:
        return self._batch().index

    def getpad(self) -> Any:
        return self._batch().pad

    def close(self) -> None:
        """Stop and join the threads (after the batches being read); idempotent."""
        if self._closed:
            return
        self._closed = True
        self._collect()
        for c in self._commands:
            c.put(_STOP)
        for t in self._threads:
            t.join()

    def __enter__(self) -> PrefetchingIter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        # Never block here (it may run at interpreter exit): tell the workers to stop after
        # the request they are serving, without waiting for them.
        if getattr(self, "_closed", True):
            return
        self._closed = True
        for c in self._commands:
            c.put_nowait(_STOP)
