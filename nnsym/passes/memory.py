"""In-place and memory planning (MXNet's PlanMemory, with real dtype sizes).

Forward and backward nodes are planned together, in topological order. Each entry gets a storage
id: ``VARIABLE`` (-1) for arguments, auxiliary states and head gradients (the caller's arrays),
``EXTERNAL`` (-2) for gradient outputs written straight into the caller's gradient arrays, or a
block id >= 0 of the executor's pool. Per node:

1. *views*: outputs that are their input's memory seen in another shape (the lowering said so)
   take the input's storage;
2. *in place*: for each (input, output) pair the operator allows, the output takes the input's
   block when that block has no other reader left, is not the caller's, and has the same size;
3. the other outputs get a block from the free pool (best fit within a size range, as MXNet's
   allocator; sizes are bytes of the real dtype, not MXNet's 4 bytes per element);
4. inputs whose last reader this was give their block back to the pool; outputs nobody reads
   are given back at once (the kernel still writes them).

Readers are node inputs (except shape-only ones, ``OpDef.ignore_inputs``) and graph outputs.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from nnsym.ir.graph import IndexedGraph

VARIABLE = -1
EXTERNAL = -2
SPARSE = -3  # csr / row_sparse entries: data-dependent sizes, held by the executor's arrays
MATCH_RANGE = 16  # a free block is reused for requests between 1/16 and 16 times its size


@dataclass(frozen=True)
class MemoryPlan:
    storage_id: tuple[int, ...]  # per entry
    inplace: tuple[int, ...]  # per entry: the input index it shares storage with, or -1
    block_bytes: tuple[int, ...]  # per block id
    views: frozenset[int]  # entries that are views of an input (no kernel writes them)

    @property
    def total_bytes(self) -> int:
        return sum(self.block_bytes)


def nbytes(shape: Sequence[int], dtype: np.dtype) -> int:
    n = 1
    for d in shape:
        n *= int(d)
    return n * np.dtype(dtype).itemsize


class _Pool:
    """Free blocks by size; a request takes the smallest free block at least as large (within
    MATCH_RANGE), else grows the largest smaller one (down to 1/MATCH_RANGE), else a new one."""

    def __init__(self) -> None:
        self.sizes: list[int] = []  # block sizes
        self.free: list[tuple[int, int]] = []  # sorted (size, block id)

    def request(self, n: int) -> int:
        i = bisect.bisect_left(self.free, (n, -1))
        if i < len(self.free) and self.free[i][0] < n * MATCH_RANGE:
            _, b = self.free.pop(i)
            return b
        if i > 0 and self.free[i - 1][0] * MATCH_RANGE >= n:
            _, b = self.free.pop(i - 1)
            self.sizes[b] = n
            return b
        self.sizes.append(n)
        return len(self.sizes) - 1

    def release(self, b: int) -> None:
        bisect.insort(self.free, (self.sizes[b], b))


def entry_readers(idx: IndexedGraph) -> list[int]:
    """Per entry: node inputs that read it (shape-only inputs do not count) plus graph outputs."""
    readers = [0] * idx.num_entries
    for nid, node in enumerate(idx.nodes):
        if node.op is None:
            continue
        ignored = node.op.ignored_inputs(node.params)
        for pos, eid in enumerate(idx.input_entries[nid]):
            if pos not in ignored:
                readers[eid] += 1
    for eid in idx.outputs:
        readers[eid] += 1
    return readers


def plan_memory(idx: IndexedGraph, shapes: Sequence[tuple[int, ...]], dtypes: Sequence[np.dtype],
                external: set[int], views: Mapping[int, Mapping[int, int]],
                sparse: frozenset[int] = frozenset()) -> MemoryPlan:
    """Storage ids for every entry of ``idx``. ``external``: entries written into the caller's
    arrays; ``views``: per node id, {output index: input index} of outputs that are views;
    ``sparse``: csr / row_sparse entries, which take no block (``SPARSE``)."""
    n = idx.num_entries
    readers = entry_readers(idx)

    sid = [VARIABLE] * n
    inplace = [-1] * n
    view_entries: set[int] = set()
    refs: dict[int, int] = {}  # block id -> outstanding reads of entries stored in it
    pool = _Pool()
    size = [nbytes(shapes[e], dtypes[e]) for e in range(n)]

    for nid, node in enumerate(idx.nodes):
        op = node.op
        if op is None:
            continue
        ins = idx.input_entries[nid]
        outs = list(idx.output_entries(nid))
        ignored = op.ignored_inputs(node.params)
        done: set[int] = set()
        for oi, ii in views.get(nid, {}).items():
            o, i = outs[oi], ins[ii]
            sid[o] = sid[i]
            inplace[o] = ii
            view_entries.add(o)
            if sid[o] >= 0:
                refs[sid[o]] += readers[o]
            done.add(oi)
        for oi, o in enumerate(outs):
            if o in external and oi not in done:
                sid[o] = EXTERNAL
                done.add(oi)
            elif o in sparse and oi not in done:
                sid[o] = SPARSE
                done.add(oi)
        taken: set[int] = set()
        for ii, oi in op.inplace:
            if oi in done or ii in taken or ii >= len(ins) or oi >= len(outs):
                continue
            i, o = ins[ii], outs[oi]
            b = sid[i]
            if (b >= 0 and refs[b] == 1 and readers[o] > 0 and size[i] == size[o]
                    and ii not in ignored):
                sid[o] = b
                inplace[o] = ii
                refs[b] += readers[o]
                taken.add(ii)
                done.add(oi)
        fresh = sorted((oi for oi in range(len(outs)) if oi not in done),
                       key=lambda oi: -size[outs[oi]])
        for oi in fresh:
            o = outs[oi]
            b = pool.request(size[o])
            sid[o] = b
            refs[b] = readers[o]
        for pos, i in enumerate(ins):
            b = sid[i]
            if b >= 0 and pos not in ignored:
                refs[b] -= 1
                if refs[b] == 0:
                    pool.release(b)
        for o in outs:
            b = sid[o]
            if b >= 0 and readers[o] == 0 and refs[b] == 0 and o not in view_entries:
                pool.release(b)
    return MemoryPlan(tuple(sid), tuple(inplace), tuple(pool.sizes), frozenset(view_entries))
