"""Writes dgl_mxnet.npz: MXNet 1.9.1's DGL graph operators on fixed graphs, deterministic cases
only (subgraphs, compaction, and neighbour sampling where num_neighbor >= every degree, so
nothing is drawn). Run in the reference venv:
``~/mxref/bin/python tests/dynamic/golden/make_dgl.py tests/dynamic/golden``."""

import sys
from pathlib import Path

import mxnet as mx
import numpy as np


def graph(n, density, seed):
    """An int64 csr graph without self loops whose stored values are edge ids 1..nnz."""
    rng = np.random.RandomState(seed)
    a = (rng.uniform(size=(n, n)) < density) & ~np.eye(n, dtype=bool)
    d = np.zeros((n, n), np.int64)
    d[a] = np.arange(1, a.sum() + 1)
    return d


def csr(d):
    return mx.nd.array(d, dtype=np.int64).tostype("csr")


def put(arrays, key, a):
    if a.stype == "csr":
        arrays[key + "/data"] = a.data.asnumpy()
        arrays[key + "/indices"] = a.indices.asnumpy()
        arrays[key + "/indptr"] = a.indptr.asnumpy()
    arrays[key] = a.asnumpy()


def main(out_dir: Path) -> None:
    arrays = {}
    g1, g2 = graph(8, 0.35, 0), graph(6, 0.5, 1)
    arrays["g1"], arrays["g2"] = g1, g2
    ids = lambda v: mx.nd.array(v, dtype=np.int64)
    # subgraphs
    v1, v2, v3 = [0, 2, 3, 5, 7], [1, 4], [0, 1, 2, 3, 4, 5, 6, 7]
    arrays["sub/v1"], arrays["sub/v2"], arrays["sub/v3"] = map(np.array, (v1, v2, v3))
    outs = mx.nd.contrib.dgl_subgraph(csr(g1), ids(v1), ids(v2), ids(v3), return_mapping=True)
    for k, o in enumerate(outs):
        put(arrays, f"sub/out{k}", o)
    # sampling with num_neighbor >= every degree: deterministic
    for name, g, seeds, hops, maxv in (("s1", g1, [0], 1, 8), ("s2", g1, [3, 0], 2, 6),
                                       ("s3", g2, [5], 3, 6), ("s4", g1, [6, 1], 2, 4)):
        arrays[f"{name}/seeds"] = np.array(seeds)
        arrays[f"{name}/params"] = np.array([hops, maxv])
        outs = mx.nd.contrib.dgl_csr_neighbor_uniform_sample(
            csr(g), ids(seeds), num_args=2, num_hops=hops, num_neighbor=100,
            max_num_vertices=maxv)
        for k, o in enumerate(outs):
            put(arrays, f"{name}/uniform{k}", o)
        prob = mx.nd.array(np.linspace(0.1, 1.0, g.shape[0]), dtype=np.float32)
        arrays[f"{name}/prob"] = prob.asnumpy()
        outs = mx.nd.contrib.dgl_csr_neighbor_non_uniform_sample(
            csr(g), prob, ids(seeds), num_args=3, num_hops=hops, num_neighbor=100,
            max_num_vertices=maxv)
        for k, o in enumerate(outs):
            put(arrays, f"{name}/non_uniform{k}", o)
        # compaction of the sampled graph
        vid, sub = outs[0], outs[1]
        size = int(vid.asnumpy()[-1])
        if not set(sub.indices.asnumpy().tolist()) <= set(vid.asnumpy()[:size].tolist()):
            continue  # truncated: edges to vertices left out (MXNet aborts on those)
        arrays[f"{name}/size"] = np.array(size)
        c = mx.nd.contrib.dgl_graph_compact(sub, vid, graph_sizes=(size,), return_mapping=True)
        for k, o in enumerate(c):
            put(arrays, f"{name}/compact{k}", o)
    np.savez_compressed(out_dir / "dgl_mxnet.npz", **arrays)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
