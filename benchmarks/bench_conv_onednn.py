"""ResNet-18's convolutions (batch 8, 3x64x64) through nnsym's generated kernels and through
oneDNN, side by side: forward, backward-data and backward-weights, one row per layer shape,
weighted by how often the shape occurs in the network for the totals.

oneDNN runs through a small C helper (bench_conv_onednn.c, compiled here against the given
oneDNN's headers) in three ways: NCHW user layout given to the primitive as is ("nchw"), the
primitive's own (blocked) layout with reorders from and to NCHW in every call ("blocked+reorder"),
and the blocked primitive alone ("blocked"), which is what a network kept in the blocked
layout throughout would pay. nnsym runs its lowerings' kernels on prebound pointers.

Usage: ``python benchmarks/bench_conv_onednn.py --onednn PREFIX [--quick] [--only NAME]``
where PREFIX holds ``include/oneapi/dnnl/dnnl.h`` and ``lib/libdnnl.so`` (a venv with ``onednn`` and
``onednn-devel``, or the unpacked ``onednn-cpu-gomp`` wheels). Threads: ``NNSYM_NUM_THREADS``
for nnsym and OpenBLAS, ``OMP_NUM_THREADS`` for an OpenMP oneDNN; a TBB oneDNN follows the
process's CPU affinity (run under ``taskset -c 0`` for one thread). The ``onednn`` 2026.1 wheel
is a SYCL build: its CPU engine needs ``LD_LIBRARY_PATH=VENV/lib`` (libdnnl.so has no RUNPATH)
and ``OCL_ICD_FILENAMES=VENV/lib/libintelocl.so``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_conv_batched import bind
from harness import environment, measure, report, row

from nnsym.codegen import compiler
from nnsym.ir.spec import KernelCall
from nnsym.ops import REGISTRY
from nnsym.ops.conv.conv import convolution_backward_lowering, convolution_lowering

CONV = REGISTRY["Convolution"]
HERE = Path(__file__).resolve().parent

# (name, count in ResNet-18 v1, N, C, H=W, F, kernel, stride, pad)
LAYERS = [
    ("conv0 3->64 7x7 s2 64x64", 1, 8, 3, 64, 64, 7, 2, 3),
    ("stage1 64 3x3 16x16", 4, 8, 64, 16, 64, 3, 1, 1),
    ("stage2 down 64->128 1x1 s2", 1, 8, 64, 16, 128, 1, 2, 0),
    ("stage2 64->128 3x3 s2", 1, 8, 64, 16, 128, 3, 2, 1),
    ("stage2 128 3x3 8x8", 3, 8, 128, 8, 128, 3, 1, 1),
    ("stage3 down 128->256 1x1 s2", 1, 8, 128, 8, 256, 1, 2, 0),
    ("stage3 128->256 3x3 s2", 1, 8, 128, 8, 256, 3, 2, 1),
    ("stage3 256 3x3 4x4", 3, 8, 256, 4, 256, 3, 1, 1),
    ("stage4 down 256->512 1x1 s2", 1, 8, 256, 4, 512, 1, 2, 0),
    ("stage4 256->512 3x3 s2", 1, 8, 256, 4, 512, 3, 2, 1),
    ("stage4 512 3x3 2x2", 3, 8, 512, 2, 512, 3, 1, 1),
]

CDEF = """
int bench_init(void);
typedef struct conv conv_t;
conv_t *conv_make(int kind, int blocked, const int64_t *g, int post);
int conv_run(conv_t *c, void *p0, void *p1, void *p2, int mode);
int conv_blocked(conv_t *c);
const char *impl(conv_t *c);
"""


def load_helper(prefix: Path) -> Any:
    """Compile bench_conv_onednn.c against ``prefix``'s oneDNN and load it."""
    out = Path(tempfile.mkdtemp(prefix="nnsym-onednn-bench-")) / "helper.so"
    lib = prefix / "lib"
    subprocess.run(["gcc", "-O2", "-shared", "-fPIC", "-o", str(out),
                    str(HERE / "bench_conv_onednn.c"), f"-I{prefix / 'include'}", f"-L{lib}",
                    "-ldnnl", f"-Wl,-rpath,{lib}"], check=True)
    ffi = compiler.FFI
    ffi.cdef(CDEF, override=True)
    h = ffi.dlopen(str(out))
    if h.bench_init() != 0:
        raise SystemExit("oneDNN engine creation failed")
    return h


def layer(h: Any, name: str, count: int, n: int, c: int, hw: int, f: int, k: int, s: int,
          pd: int, samples: int) -> list[dict[str, Any]]:
    ffi = compiler.FFI
    p, _ = CONV.parse_params({"kernel": (k, k), "num_filter": f, "stride": (s, s),
                              "pad": (pd, pd), "no_bias": True})
    oh = (hw + 2 * pd - k) // s + 1
    dt = np.dtype("float32")
    rng = np.random.default_rng(0)
    x = rng.standard_normal((n, c, hw, hw)).astype(dt)
    w = rng.standard_normal((f, c, k, k)).astype(dt)
    gy = rng.standard_normal((n, f, oh, oh)).astype(dt)
    y_ref = np.empty(gy.shape, dt)
    gx_ref, gw_ref = np.empty(x.shape, dt), np.empty(w.shape, dt)
    fcall = KernelCall(p, (x.shape, w.shape), (dt, dt), (gy.shape,), (dt,))

    def bcall(reqs: tuple[str, str]) -> KernelCall:
        return KernelCall(p, (gy.shape, x.shape, w.shape), (dt,) * 3, (x.shape, w.shape),
                          (dt,) * 2, reqs=reqs)

    runs: dict[tuple[str, str], Callable[[], None]] = {
        ("fwd", "nnsym"): bind(convolution_lowering(fcall), [x, w, y_ref]),
        ("bwd_data", "nnsym"): bind(convolution_backward_lowering(bcall(("write", "null"))),
                                    [gy, x, w, gx_ref, gw_ref]),
        ("bwd_weights", "nnsym"): bind(convolution_backward_lowering(bcall(("null", "write"))),
                                       [gy, x, w, gx_ref, gw_ref]),
    }
    for fn in list(runs.values()):
        fn()
    g = ffi.new("int64_t[]", [n, c, hw, hw, f, k, k, s, s, pd, pd, oh, oh])
    keep = []
    impls = {}
    for kind, what in enumerate(("fwd", "bwd_data", "bwd_weights")):
        ins = [(x, w), (gy, w), (x, gy)][kind]
        want = [y_ref, gx_ref, gw_ref][kind]
        for blocked, mode, label in ((0, 0, "onednn nchw"), (1, 0, "onednn blocked+reorder"),
                                     (1, 1, "onednn blocked")):
            prim = h.conv_make(kind, blocked, g, 0)
            if prim == ffi.NULL:
                print(f"# {name} {what} {label}: no primitive")
                continue
            impls[f"{what} {label}"] = ffi.string(h.impl(prim)).decode()
            out = np.empty(want.shape, dt)
            ptrs = [ffi.from_buffer(a) for a in (*ins, out)]
            keep += [prim, ptrs, out]

            def run(prim: Any = prim, ptrs: list[Any] = ptrs, mode: int = mode) -> None:
                h.conv_run(prim, ptrs[0], ptrs[1], ptrs[2], mode)

            run()
            if mode == 0:
                np.testing.assert_allclose(out, want, rtol=1e-3, atol=1e-3 * np.abs(want).max())
            runs[(what, label)] = run
    times: dict[tuple[str, str], list[float]] = {key: [] for key in runs}
    for _ in range(samples):
        for key, fn in runs.items():
            times[key].append(measure(fn, samples=1, min_sample=0.01, warmup=0.0)[0])
    rows = [row(f"{name} {what}", peer, (statistics.median(ts), min(ts)), count=count,
                impl=impls.get(f"{what} {peer}", "nnsym"))
            for (what, peer), ts in times.items()]
    del keep
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--onednn", type=Path, required=True)
    ap.add_argument("--samples", type=int, default=9)
    ap.add_argument("--quick", action="store_true", help="3 samples")
    ap.add_argument("--only", default="", help="layers whose name contains this")
    a = ap.parse_args()
    if a.quick:
        a.samples = 3
    h = load_helper(a.onednn)
    print("#", environment(), "nnsym threads", compiler.get_num_threads(),
          "OMP_NUM_THREADS", os.environ.get("OMP_NUM_THREADS"), "load", os.getloadavg())
    results: list[dict[str, Any]] = []
    for spec in LAYERS:
        if a.only in spec[0]:
            results += layer(h, *spec, samples=a.samples)
    report(results)
    totals: dict[tuple[str, str], list[float]] = {}
    for r in results:
        what = r["workload"].rsplit(" ", 1)[1]
        t = totals.setdefault((what, r["peer"]), [0.0, 0.0])
        t[0] += r["median_ms"] * r["count"]
        t[1] += r["min_ms"] * r["count"]
    print("\n# ResNet-18's 20 convolutions: sum of each shape's median and min ms x its count")
    for (what, peer), (med, low) in sorted(totals.items()):
        print(f"{what:<12} {peer:<24} {med:8.2f} {low:8.2f}")
    print("# load", os.getloadavg())


if __name__ == "__main__":
    main()
