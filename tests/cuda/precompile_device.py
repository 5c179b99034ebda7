"""Build, on a machine without a GPU, the cubins that the ``gpu``-marked CUDA tests load, into
nnsym's cubin cache (``NNSYM_CACHE_DIR``), so that a device run compiles nothing: the cache
is keyed by the source's digest and the arch, and a cubin from the same nvcc loads anywhere.

    NNSYM_CACHE_DIR=DIR python tests/cuda/precompile_device.py --arch sm_90 [--jobs N]

Then copy DIR to the device machine and point ``NNSYM_CACHE_DIR`` there at it. nvcc must be
the device's CUDA version or older (``nvcc --version``)."""

from __future__ import annotations

import argparse
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import test_cuda_families as fam
import test_cuda_gpu as gpu

from nnsym.cuda import runtime
from nnsym.devtools.cuda import codegen as cg


def sources() -> list[str]:
    """The translation units of test_cuda_gpu's Device and test_device_agrees_with_c."""
    out = []
    variants = cg.unique_specs(v for v in cg.all_variants() if v.family in cg.ELEMWISE)
    for i in range(0, len(variants), gpu.UNIT):
        out.append(cg.render_unit(variants[i:i + gpu.UNIT], "cuda"))
    for family in fam._families():
        vs = cg.unique_specs(cg.variants(family=family))
        out.extend(runtime.kernel_source(u) for u in fam.device_units(vs))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--arch", default="sm_90")
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args()
    units = sources()
    t0 = time.perf_counter()
    done = 0
    with ThreadPoolExecutor(args.jobs) as pool:
        for _ in pool.map(lambda s: runtime.cubin(s, args.arch), units):
            done += 1
            if done % 20 == 0:
                print(f"{done}/{len(units)} units, {time.perf_counter() - t0:.0f} s", flush=True)
    print(f"{len(units)} units in {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
