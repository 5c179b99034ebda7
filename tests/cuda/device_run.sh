#!/bin/bash
# One call on a GPU machine: the gpu test suite, then the GPU benchmarks, logs under $OUT (or
# ./device-out). Run from the repository root:
#
#     bash tests/cuda/device_run.sh            # suite (200 s limit) + benchmarks
#     SUITE_ONLY=1 bash tests/cuda/device_run.sh
#
# Optional, prepared on a machine without a GPU to save device time (docs/gpu.md):
#   .whl/*.whl            wheels the device lacks (cffi, pycparser), installed to /tmp/site
#   .gpuc/cubins.tar.xz   a cubin cache from tests/cuda/precompile_device.py
#                         (tar of NNSYM_CACHE_DIR/cuda-cubin, same nvcc as the device's)
set -u
OUT=${OUT:-$PWD/device-out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
if ls .whl/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site .whl/*.whl || exit 1
    export PYTHONPATH=/tmp/site:$PWD
else
    export PYTHONPATH=$PWD
fi
export NNSYM_CACHE_DIR=${NNSYM_CACHE_DIR:-/tmp/nncache}
mkdir -p "$NNSYM_CACHE_DIR"
[ -f .gpuc/cubins.tar.xz ] && tar xJf .gpuc/cubins.tar.xz -C "$NNSYM_CACHE_DIR"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$OUT/env.txt"
python3 -c "import cupy, torch; print('cupy', cupy.__version__, 'runtime', \
cupy.cuda.runtime.runtimeGetVersion(), 'driver', cupy.cuda.runtime.driverGetVersion(), \
'torch', torch.__version__, 'cudnn', torch.backends.cudnn.version())" >> "$OUT/env.txt" 2>&1
cat "$OUT/env.txt"
T0=$(date +%s)
# SIGINT at the limit: pytest still prints its summary of what ran
timeout -s INT "${SUITE_T:-200}" python3 -m pytest -m gpu -p no:cacheprovider -p no:benchmark \
    -n "${WORKERS:-14}" --dist loadgroup -v --tb=short -rfE --durations=15 \
    tests/cuda tests/random/test_random_gpu.py 2>&1 \
    | grep -v -E "PASSED|warner|Warning" > "$OUT/gpu.log"
tail -40 "$OUT/gpu.log"
echo "suite took $(( $(date +%s) - T0 )) s"
[ -n "${SUITE_ONLY:-}" ] && exit 0
timeout -s INT "${BENCH_T:-120}" python3 benchmarks/bench_gpu.py --quick --peers nnsym,torch \
    --out "$OUT/bench.jsonl" 2>&1 | tee "$OUT/bench.log" | grep -v '^{' | tail -40
timeout -s INT "${BENCH_T:-120}" python3 benchmarks/bench_gpu.py --quick --only W1,W3 \
    --peers nnsym,torch.compile --out "$OUT/bench.jsonl" 2>&1 | tee "$OUT/bench2.log" \
    | grep -v '^{' | tail -20
echo "all took $(( $(date +%s) - T0 )) s"
