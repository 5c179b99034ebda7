"""GPU side-by-side benchmark: nnsym on ``nnsym.gpu(0)`` against torch CUDA eager and
torch.compile (default mode), in one process and one run (MXNet is not a peer here).

Usage::

    python benchmarks/bench_gpu.py [--quick] [--only W1,W7f] [--out FILE] [--tf32] [--dry]

Workloads (float32 unless said; definitions as in ../shared/BENCHMARKS.md, sizes as on GPU):

- W1   MLP training step, batch 64 (784 -> 512 -> 256 -> 10, SoftmaxOutput; forward with
       is_train, backward to every weight, no optimizer);
- W2   the same MLP, batch 1, inference forward;
- W3   ``relu(1.5*x*x - 0.5*x + 0.25) * 0.5 + tanh(x)`` on 16,777,216 floats, a bound graph;
- W7f  ResNet-18 v1 (tests/golden/resnet18_v1-symbol.json), batch 32, 3x224x224, forward;
- W7t  the same, training step (forward + backward to every parameter, given head gradient);
- W7hf / W7ht  the same forward / training step in float16: data and convolution/dense
       parameters float16, BatchNorm parameters and statistics float32 (what nnsym's
       BatchNorm asks for; ``type_dict`` names every float16 argument).

``--only`` takes comma-separated id prefixes (``--only W7`` runs every W7 row). Every peer uses
the same arrays (fixed seeds); torch's ResNet is bench_table.TorchResNet, the same JSON walked
with torch.nn.functional, with nnsym's parameter values. Each row's ``agree`` compares a torch
peer's result with nnsym's (outputs for W2/W3/W7*f, the weight gradients for W1 and two checked
gradients for W7*t): max abs difference and that relative to nnsym's largest magnitude.

Timing: the device is synchronised inside every timed call (nnsym: cupy's device; torch:
torch.cuda.synchronize), 3 warm-up calls plus harness.measure's own warm-up, samples of
looped calls >= 10 ms (50 ms for W7), 10 samples (5 with --quick), median and min. TF32 is
off in torch unless ``--tf32`` (nnsym computes in full float32). A failing (workload, peer)
becomes a row with ``error`` and the run goes on. Output: one JSON line per row (also
appended to ``--out``), then a table with ratio = nnsym / best other peer.

``--dry``: CPU-only sanity run with tiny sizes on ``nnsym.cpu()`` and torch on the CPU (torch
rows are skipped when torch is not importable): ``python benchmarks/bench_gpu.py --dry
--quick``.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from harness import measure  # noqa: E402

NNSYM, TORCH, COMPILE = "nnsym", "torch", "torch.compile"
PEERS = (NNSYM, TORCH, COMPILE)


@dataclass(frozen=True)
class Sizes:
    mlp_batch: int = 64
    w3_n: int = 16_777_216
    resnet: tuple[int, int] = (32, 224)  # batch, image side


FULL = Sizes()
DRY = Sizes(mlp_batch=4, w3_n=1000, resnet=(2, 32))

# id -> (title, agreement tolerance on the relative difference)
WORKLOADS: dict[str, tuple[str, float]] = {
    "W1": ("W1 MLP train step b64", 1e-3),
    "W2": ("W2 MLP infer b1", 1e-4),
    "W3": ("W3 elementwise chain 16M", 1e-4),
    "W7f": ("W7 ResNet-18 fwd b32 224", 1e-2),
    "W7t": ("W7 ResNet-18 train b32 224", 5e-2),
    "W7hf": ("W7 ResNet-18 fwd b32 224 fp16", 5e-2),
    "W7ht": ("W7 ResNet-18 train b32 224 fp16", 1e-1),
}


class Env:
    """The devices of one run: nnsym's context and sync, torch's device and sync."""

    def __init__(self, dry: bool, tf32: bool):
        import nnsym

        self.dry = dry
        self.sizes = DRY if dry else FULL
        self.ctx = nnsym.cpu() if dry else nnsym.gpu(0)
        self.nn_sync: Callable[[], None] = lambda: None
        if not dry:
            try:  # without cupy the nnsym rows fail with nnsym's own error; torch still runs
                import cupy

                self.nn_sync = cupy.cuda.Device(0).synchronize
            except Exception as e:
                print(f"# cupy: {type(e).__name__}: {e}", flush=True)
        self.torch: Any = None
        self.torch_error: str | None = None
        self.t_sync: Callable[[], None] = lambda: None
        self.tdev = "cpu"
        try:
            import torch

            if not dry:
                if not torch.cuda.is_available():
                    raise RuntimeError("torch.cuda.is_available() is False")
                self.tdev = "cuda"
                self.t_sync = torch.cuda.synchronize
                torch.backends.cuda.matmul.allow_tf32 = tf32
                torch.backends.cudnn.allow_tf32 = tf32
                torch.backends.cudnn.benchmark = True
            else:
                torch.set_num_threads(2)
            self.torch = torch
        except Exception as e:  # ImportError in --dry, or no CUDA device for torch
            self.torch_error = f"{type(e).__name__}: {e}"

    def info(self) -> dict[str, Any]:
        import nnsym

        out: dict[str, Any] = {"python": platform.python_version(),
                               "nnsym": getattr(nnsym, "__version__", "?"),
                               "nnsym_ctx": str(self.ctx), "dry": self.dry}
        if not self.dry:
            try:
                import cupy

                out["cupy"] = cupy.__version__
                props = cupy.cuda.runtime.getDeviceProperties(0)
                out["gpu"] = props["name"].decode() if isinstance(props["name"], bytes) \
                    else str(props["name"])
            except Exception as e:
                out["cupy"] = f"{type(e).__name__}: {e}"
        if self.torch is not None:
            t = self.torch
            out["torch"] = t.__version__
            out["torch_device"] = (t.cuda.get_device_name(0) if self.tdev == "cuda" else "cpu")
            if self.tdev == "cuda":
                out["torch_tf32"] = bool(t.backends.cudnn.allow_tf32)
        else:
            out["torch"] = self.torch_error
        return out


# ---------------------------------------------------------------- data (fixed seeds)

def mlp_data(env: Env, batch: int) -> dict[str, np.ndarray]:
    from bench_executor import make_params

    rng = np.random.default_rng(0)
    params = make_params(rng)
    x = rng.standard_normal((env.sizes.mlp_batch, 784)).astype(np.float32)[:batch].copy()
    y = rng.integers(0, 10, env.sizes.mlp_batch).astype(np.int64)[:batch].copy()
    return {"x": x, "y": y, **params}


_W7: dict[tuple[int, int], dict[str, np.ndarray]] = {}


def resnet_json() -> Path:
    return HERE.parent / "tests" / "golden" / "resnet18_v1-symbol.json"


def w7_data(env: Env) -> dict[str, np.ndarray]:
    """ResNet-18's arrays (as bench_table.prepare makes them), float32, cached per size."""
    key = env.sizes.resnet
    if key not in _W7:
        from bench_table import resnet_arrays

        _W7[key] = resnet_arrays(*key, np.random.default_rng(0))
    return _W7[key]


def is_bn(name: str) -> bool:
    return name.endswith(("_gamma", "_beta", "_running_mean", "_running_var"))


def w7_dtype(name: str, half: bool) -> Any:
    """float16 for data, head gradient and conv/dense parameters when ``half``."""
    return np.float16 if half and not is_bn(name) else np.float32


# ---------------------------------------------------------------- one case = (step, result)

Case = tuple[Callable[[], Any], Callable[[], np.ndarray]]


def nnsym_case(env: Env, wid: str) -> Case:
    from nnsym import nd, sym

    ctx, sync = env.ctx, env.nn_sync
    if wid in ("W1", "W2"):
        from bench_executor import mlp_symbol

        train = wid == "W1"
        f = mlp_data(env, env.sizes.mlp_batch if train else 1)
        params = {k: v for k, v in f.items() if k.startswith("fc")}
        net = mlp_symbol()
        reqs = {k: ("write" if train and k in params else "null") for k in net.list_arguments()}
        exe = net.simple_bind(ctx=ctx, grad_req=reqs, data=f["x"].shape,
                              softmax_label=(len(f["x"]),))
        for k, v in params.items():
            exe.arg_dict[k][:] = v
        exe.arg_dict["data"][:] = f["x"]
        exe.arg_dict["softmax_label"][:] = f["y"].astype(np.float32)
        names = sorted(params)

        def step() -> None:
            exe.forward(is_train=train)
            if train:
                exe.backward()
            sync()

        def result() -> np.ndarray:
            if train:
                return np.concatenate([exe.grad_dict[k].asnumpy().ravel() for k in names])
            return np.asarray(exe.outputs[0].asnumpy())
        return step, result

    if wid == "W3":
        from bench_fusion import w3_symbol

        x = np.random.default_rng(0).standard_normal(env.sizes.w3_n).astype(np.float32)
        exe = w3_symbol().simple_bind(ctx=ctx, grad_req="null", x=x.shape)
        exe.arg_dict["x"][:] = x

        def step() -> None:
            exe.forward(is_train=False)
            sync()
        return step, lambda: np.asarray(exe.outputs[0].asnumpy())

    # W7*
    from bench_table import CHECK_GRADS

    train, half = wid.endswith("t"), wid.startswith("W7h")
    arrays = w7_data(env)
    net = sym.load(str(resnet_json()))
    reqs = {n: ("write" if train and n != "data" else "null") for n in net.list_arguments()}
    type_dict = ({n: "float16" for n in net.list_arguments() if not is_bn(n)} if half
                 else None)
    exe = net.simple_bind(ctx=ctx, grad_req=reqs, type_dict=type_dict,
                          data=arrays["data"].shape)
    for k, a in {**exe.arg_dict, **exe.aux_dict}.items():
        a[:] = arrays[k].astype(np.dtype(a.dtype))
    hd = nd.array(arrays["head_grad"].astype(np.dtype(exe.outputs[0].dtype)), ctx=ctx,
                  dtype=np.dtype(exe.outputs[0].dtype))

    def step() -> None:
        exe.forward(is_train=train)
        if train:
            exe.backward(hd)
        sync()

    def result() -> np.ndarray:
        if train:
            return np.concatenate([exe.grad_dict[k].asnumpy().astype(np.float32).ravel()
                                   for k in CHECK_GRADS])
        return np.asarray(exe.outputs[0].asnumpy(), dtype=np.float32)
    return step, result


def torch_case(env: Env, wid: str, compiled: bool) -> Case:
    torch, dev, sync = env.torch, env.tdev, env.t_sync
    if torch is None:
        raise RuntimeError(f"torch unavailable: {env.torch_error}")
    F = torch.nn.functional

    def compile_(f: Any) -> Any:
        return torch.compile(f) if compiled else f

    if wid in ("W1", "W2"):
        from bench_table import torch_mlp

        train = wid == "W1"
        f = mlp_data(env, env.sizes.mlp_batch if train else 1)
        names = sorted(k for k in f if k.startswith("fc"))
        tp = {k: torch.tensor(f[k], device=dev, requires_grad=train) for k in names}
        x = torch.tensor(f["x"], device=dev)
        y = torch.tensor(f["y"], device=dev)

        net = compile_(torch_mlp(torch, tp))

        def w1() -> None:
            for v in tp.values():
                v.grad = None
            F.cross_entropy(net(x), y, reduction="sum").backward()
            sync()

        def w2() -> Any:
            with torch.no_grad():
                out = torch.softmax(net(x), 1)
            sync()
            return out

        if train:
            return w1, lambda: np.concatenate(
                [tp[k].grad.detach().cpu().numpy().ravel() for k in names])
        return w2, lambda: w2().cpu().numpy()

    if wid == "W3":
        from bench_fusion import A, B, C

        x = np.random.default_rng(0).standard_normal(env.sizes.w3_n).astype(np.float32)
        t = torch.tensor(x, device=dev)

        def chain(t: Any) -> Any:
            return torch.relu(A * t * t + B * t + C) * 0.5 + torch.tanh(t)

        g = compile_(chain)
        last: list[Any] = [None]

        def step() -> None:
            last[0] = g(t)
            sync()

        def result() -> np.ndarray:
            step()
            return np.asarray(last[0].cpu().numpy())
        return step, result

    # W7*: bench_table's TorchResNet, its tensors moved to the device (as new leaves)
    from bench_table import CHECK_GRADS, TorchResNet

    train, half = wid.endswith("t"), wid.startswith("W7h")
    arrays = w7_data(env)
    tnet = TorchResNet(torch, arrays, train)
    tnet.t = {k: v.detach().to(device=dev, dtype=torch.float16 if w7_dtype(k, half) ==
                               np.float16 else torch.float32).requires_grad_(v.requires_grad)
              for k, v in tnet.t.items()}
    x = tnet.t["data"]
    th = tnet.t["head_grad"]
    f = compile_(tnet.__call__)
    last: list[Any] = [None]

    def step7() -> None:
        if train:
            for v in tnet.t.values():
                v.grad = None
            out = f(x, True)
            out.backward(th)
        else:
            with torch.no_grad():
                out = f(x, False)
        last[0] = out
        sync()

    def result7() -> np.ndarray:
        if train:
            return np.concatenate([tnet.t[k].grad.detach().float().cpu().numpy().ravel()
                                   for k in CHECK_GRADS])
        step7()
        return np.asarray(last[0].detach().float().cpu().numpy())
    return step7, result7


# ---------------------------------------------------------------- running and reporting

def agreement(got: np.ndarray, ref: np.ndarray, tol: float) -> dict[str, Any]:
    got = np.asarray(got, np.float64).ravel()
    ref = np.asarray(ref, np.float64).ravel()
    if got.shape != ref.shape:
        return {"ok": False, "why": f"sizes differ: {got.size} vs nnsym {ref.size}"}
    diff = float(np.max(np.abs(got - ref))) if got.size else 0.0
    scale = float(np.max(np.abs(ref))) if ref.size else 0.0
    rel = diff / scale if scale > 0 else diff
    return {"max_abs": diff, "rel": rel, "tol": tol, "ok": bool(rel <= tol),
            "finite": bool(np.isfinite(got).all())}


def run_case(env: Env, wid: str, peer: str, samples: int,
             refs: dict[str, np.ndarray]) -> dict[str, Any]:
    title, tol = WORKLOADS[wid]
    r: dict[str, Any] = {"workload": wid, "title": title, "peer": peer, "median_ms": None,
                         "min_ms": None, "error": None, "agree": None}
    t0 = time.perf_counter()
    try:
        step, result = (nnsym_case(env, wid) if peer == NNSYM
                        else torch_case(env, wid, peer == COMPILE))
        for _ in range(3):  # warm-up: kernel builds, torch.compile, cudnn autotuning
            step()
        res = result()
        if peer == NNSYM:
            refs[wid] = res
        elif wid in refs:
            r["agree"] = agreement(res, refs[wid], tol)
        med, best = measure(step, min_sample=0.05 if wid.startswith("W7") else 0.01,
                            samples=samples)
        r["median_ms"], r["min_ms"] = med * 1e3, best * 1e3
    except Exception as e:
        msg = f"{type(e).__name__}: {e}"
        r["error"] = msg[:2000]
        tb = traceback.format_exc().strip().splitlines()
        print(f"# {wid} / {peer} failed: {msg[:300]}\n#   " + "\n#   ".join(tb[-6:]),
              flush=True)
    r["process_s"] = round(time.perf_counter() - t0, 2)
    return r


def free(env: Env) -> None:
    import gc

    gc.collect()
    if env.dry:
        return
    try:
        import cupy

        cupy.get_default_memory_pool().free_all_blocks()
    except Exception:
        pass
    if env.torch is not None and env.tdev == "cuda":
        env.torch.cuda.empty_cache()


def table(rows: list[dict[str, Any]]) -> list[str]:
    lines = [f"{'workload':<32} {'peer':<14} {'median ms':>10} {'min ms':>10} "
             f"{'agree rel':>10}  note"]
    for wid, (title, _) in WORKLOADS.items():
        rs = [r for r in rows if r["workload"] == wid]
        if not rs:
            continue
        for r in rs:
            ag = r.get("agree")
            ags = (f"{ag['rel']:.2e}" if ag and "rel" in ag else "—")
            if ag and not ag.get("ok"):
                ags += "!"
            if r["median_ms"] is None:
                lines.append(f"{title:<32} {r['peer']:<14} {'—':>10} {'—':>10} {ags:>10}  "
                             f"ERROR {(r['error'] or '')[:100]}")
            else:
                lines.append(f"{title:<32} {r['peer']:<14} {r['median_ms']:>10.4g} "
                             f"{r['min_ms']:>10.4g} {ags:>10}")
        mine = next((r for r in rs if r["peer"] == NNSYM and r["median_ms"]), None)
        others = [r for r in rs if r["peer"] != NNSYM and r["median_ms"]]
        if mine and others:
            best = min(others, key=lambda r: r["median_ms"])
            lines.append(f"{'':<32} ratio nnsym / {best['peer']}: "
                         f"{mine['median_ms'] / best['median_ms']:.2f}")
        else:
            lines.append(f"{'':<32} ratio: — (no nnsym row or no other peer)")
    return lines


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="5 samples instead of 10")
    ap.add_argument("--only", default="", help="comma-separated workload id prefixes")
    ap.add_argument("--out", default="", help="also append the JSON lines to this file")
    ap.add_argument("--tf32", action="store_true", help="let torch use TF32 (default off)")
    ap.add_argument("--dry", action="store_true", help="CPU-only sanity run, tiny sizes")
    ap.add_argument("--peers", default=",".join(PEERS),
                    help=f"comma-separated peers to run (default: {','.join(PEERS)})")
    args = ap.parse_args(argv)
    peers = [q for q in PEERS if q in args.peers.split(",")]
    only = [s for s in args.only.split(",") if s]
    wids = [w for w in WORKLOADS if not only or any(w.startswith(o) for o in only)]
    if not wids:
        ap.error(f"--only {args.only}: no workload id starts with that; ids: "
                 f"{', '.join(WORKLOADS)}")
    samples = 5 if args.quick else 10
    t0 = time.perf_counter()
    env = Env(args.dry, args.tf32)
    print("#", json.dumps(env.info()), flush=True)
    out = Path(args.out).open("a") if args.out else None
    rows: list[dict[str, Any]] = []
    refs: dict[str, np.ndarray] = {}
    try:
        for wid in wids:
            for peer in peers:
                if peer != NNSYM and env.torch is None:
                    print(f"# {wid} / {peer}: skipped (torch: {env.torch_error})", flush=True)
                    continue
                r = run_case(env, wid, peer, samples, refs)
                r["device"] = "cpu (dry)" if args.dry else "gpu"
                rows.append(r)
                line = json.dumps(r)
                print(line, flush=True)
                if out is not None:
                    out.write(line + "\n")
                    out.flush()
                free(env)
            refs.pop(wid, None)
    finally:
        if out is not None:
            out.close()
    print()
    print("\n".join(table(rows)))
    bad = [f"{r['workload']}/{r['peer']}" for r in rows
           if r.get("agree") and not r["agree"].get("ok")]
    errs = [f"{r['workload']}/{r['peer']}" for r in rows if r["error"]]
    print(f"\n# agreement with nnsym: {'all within tolerance' if not bad else 'DIFFER: '}"
          f"{', '.join(bad)}")
    if errs:
        print(f"# errors: {', '.join(errs)}")
    print(f"# wall time {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
