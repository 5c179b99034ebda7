"""ResizeIter and PrefetchingIter: batch sequences (hand-computed from NDArrayIter's, which
the MXNet fixtures pin), renaming, errors from the worker threads, reset and thread cleanup."""

from __future__ import annotations

import gc
import threading

import numpy as np
import pytest

import nnsym.ndarray as nd
from nnsym.errors import DataIterError
from nnsym.io import DataBatch, DataDesc, DataIter, NDArrayIter, PrefetchingIter, ResizeIter


def _firsts(it, n=None) -> list[list[float]]:
    out = []
    for b in it:
        out.append(b.data[0].asnumpy().tolist())
        if n is not None and len(out) == n:
            break
    return out


def _ten(bs=3, **kw) -> NDArrayIter:
    return NDArrayIter(np.arange(10.0), np.arange(10.0) + 100, batch_size=bs, **kw)


B0, B1, B2, B3 = [0, 1, 2], [3, 4, 5], [6, 7, 8], [9, 0, 1]


def test_resize_iter_wraps_and_resets_internal():
    it = ResizeIter(_ten(), 6)
    assert _firsts(it) == [B0, B1, B2, B3, B0, B1]
    it.reset()
    assert _firsts(it) == [B0, B1, B2, B3, B0, B1]
    assert it.provide_data == _ten().provide_data and it.batch_size == 3


def test_resize_iter_without_reset_internal_continues():
    it = ResizeIter(_ten(), 3, reset_internal=False)
    assert _firsts(it) == [B0, B1, B2]
    it.reset()
    assert _firsts(it) == [B3, B0, B1]
    assert it.getpad() == 0 and it.getlabel()[0].asnumpy().tolist() == [103, 104, 105]


def test_resize_iter_shorter_than_epoch_and_pads():
    it = ResizeIter(_ten(), 4)
    pads = [b.pad for b in it]
    assert pads == [0, 0, 0, 2]


def test_prefetching_iter_matches_direct_iteration_with_renames():
    direct = [(b.data[0].asnumpy().tolist(), b.label[0].asnumpy().tolist(), b.pad)
              for b in _ten(4)]
    with PrefetchingIter([_ten(4), _ten(4, data_name="x", label_name="y")],
                         rename_data=[{"data": "d1"}, {"x": "d2"}],
                         rename_label=[{"softmax_label": "l1"}, {"y": "l2"}]) as it:
        assert [d.name for d in it.provide_data] == ["d1", "d2"]
        assert [d.name for d in it.provide_label] == ["l1", "l2"]
        assert it.provide_data[0] == DataDesc("d1", (4,)) and it.batch_size == 4
        for _ in range(2):
            got = []
            for b in it:
                assert len(b.data) == len(b.label) == 2
                assert b.provide_data == it.provide_data
                np.testing.assert_array_equal(b.data[0].asnumpy(), b.data[1].asnumpy())
                got.append((b.data[0].asnumpy().tolist(), b.label[1].asnumpy().tolist(),
                            b.pad))
            assert got == direct
            it.reset()


def test_prefetching_reads_in_worker_threads_one_ahead():
    seen: list[str] = []

    class Spy(NDArrayIter):
        def next(self) -> DataBatch:
            seen.append(threading.current_thread().name)
            return super().next()

    with PrefetchingIter(Spy(np.arange(6.0), batch_size=2)) as it:
        b = it.next()
        assert b.data[0].asnumpy().tolist() == [0, 1]
        for _ in range(100):  # the worker fetches batch 2 before it is asked for
            if len(seen) == 2:
                break
            threading.Event().wait(0.01)
        assert len(seen) == 2
    assert seen and all(name.startswith("nnsym-prefetch") for name in seen)


def test_reset_mid_epoch_starts_over():
    with PrefetchingIter(_ten()) as it:
        assert _firsts(it, 2) == [B0, B1]
        it.reset()
        assert _firsts(it) == [B0, B1, B2, B3]


class _Failing(DataIter):
    def __init__(self) -> None:
        super().__init__(2)
        self.i = 0

    @property
    def provide_data(self) -> list[DataDesc]:
        return [DataDesc("data", (2,))]

    def next(self) -> DataBatch:
        self.i += 1
        if self.i == 2:
            raise ValueError("disk on fire")
        return DataBatch([nd.zeros((2,))], [], pad=0)

    def reset(self) -> None:
        self.i = 0


def test_worker_exception_is_reraised_in_caller():
    with PrefetchingIter(_Failing()) as it:
        it.next()
        with pytest.raises(ValueError, match="disk on fire"):
            it.next()
        it.reset()
        assert it.next().pad == 0  # usable again after reset


def test_mismatched_iterators_raise():
    with PrefetchingIter([_ten(3), NDArrayIter(np.arange(3.0), batch_size=3)]) as it:
        it.next()
        with pytest.raises(DataIterError, match="different batches"):
            it.next()
    with pytest.raises(DataIterError, match="no new name for 'data'"):
        PrefetchingIter(_ten(), rename_data=[{"x": "y"}])
    with pytest.raises(DataIterError, match="2 dicts for 1"):
        PrefetchingIter(_ten(), rename_data=[{}, {}])


def test_no_thread_leak():
    before = threading.active_count()
    it = PrefetchingIter([_ten(), _ten()])
    assert threading.active_count() == before + 2
    _firsts(it, 2)
    it.close()
    it.close()
    assert threading.active_count() == before
    with pytest.raises(DataIterError, match="closed"):
        it.reset()
    it = PrefetchingIter([_ten(), _ten()])
    _firsts(it, 1)
    del it
    gc.collect()
    for _ in range(100):
        if threading.active_count() == before:
            break
        threading.Event().wait(0.01)
    assert threading.active_count() == before
