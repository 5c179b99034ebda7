"""Convolution on a GPU through cuBLAS (``nnsym.ops.common.device``): im2col as one strided
gather, one batched GEMM per block of images, and for the data gradient col2im as one strided
add per kernel tap. Channel-first layouts (1-D, 2-D, 3-D), any groups, strides, pads and
dilations; the ``per_image`` and ``batched`` algorithms of conv_forward.c.j2 /
conv_backward.c.j2 (depthwise and channel-last layouts keep the generated kernels).

Same pointers and ``ia`` as the C kernels: the forward p = [data, weight, (bias), out,
workspace], the backward p = [ograd, data, weight, data grad, weight grad, (bias grad),
workspace]; ia starts with [n, c, f, groups, d, h, w, od, oh, ow, kd, kh, kw, sd, sh, sw, pd,
ph, pw, dd, dh, dw] (spatial sizes padded to three with leading 1s)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from nnsym.ir.spec import KernelSpec
from nnsym.ops.common.device import ArrayAt, DeviceFn, Run, register_device, store

# Elements of one block's column matrix (images are processed in blocks of at most this many
# columns' worth): bounds the temporary device memory of a call to 256 MiB in float32.
COL_ELEMS = 1 << 26


class _Geo:
    def __init__(self, ia: Sequence[int]) -> None:
        v = [int(x) for x in ia[:22]]
        self.n, self.c, self.f, self.g = v[0:4]
        self.x, self.o, self.k = tuple(v[4:7]), tuple(v[7:10]), tuple(v[10:13])
        self.s, self.p, self.d = tuple(v[13:16]), tuple(v[16:19]), tuple(v[19:22])
        self.cg, self.fg = self.c // self.g, self.f // self.g
        self.kk = self.cg * math.prod(self.k)  # rows of a group's column matrix
        self.pp = math.prod(self.o)  # output positions per image
        self.block = max(1, min(self.n, COL_ELEMS // max(1, self.c * math.prod(self.k)
                                                         * self.pp)))

    def padded(self, xp: Any, x: Any) -> Any:
        """x (nb, c, d, h, w) with its zero padding."""
        if not any(self.p):
            return x
        nb = x.shape[0]
        shape = (nb, self.c, *(xs + 2 * ps for xs, ps in zip(self.x, self.p)))
        out = xp.zeros(shape, x.dtype)
        pd, ph, pw = self.p
        d, h, w = self.x
        out[:, :, pd:pd + d, ph:ph + h, pw:pw + w] = x
        return out

    def columns(self, xp: Any, xpad: Any) -> Any:
        """im2col of padded images: (nb, g, cg * kd * kh * kw, od * oh * ow), one gather."""
        nb = xpad.shape[0]
        st = xpad.strides
        view = xp.lib.stride_tricks.as_strided(
            xpad, (nb, self.c, *self.k, *self.o),
            (st[0], st[1], *(st[2 + i] * self.d[i] for i in range(3)),
             *(st[2 + i] * self.s[i] for i in range(3))))
        return xp.ascontiguousarray(view).reshape(nb, self.g, self.kk, self.pp)

    def add_columns(self, xp: Any, cols: Any, xpad: Any) -> None:
        """col2im: xpad (nb, c, padded dims) += the columns, one strided add per tap."""
        nb = cols.shape[0]
        cols = cols.reshape(nb, self.c, *self.k, *self.o)
        od, oh, ow = self.o
        for i in range(self.k[0]):
            for j in range(self.k[1]):
                for q in range(self.k[2]):
                    z, y, x = i * self.d[0], j * self.d[1], q * self.d[2]
                    xpad[:, :, z:z + (od - 1) * self.s[0] + 1:self.s[0],
                         y:y + (oh - 1) * self.s[1] + 1:self.s[1],
                         x:x + (ow - 1) * self.s[2] + 1:self.s[2]] += cols[:, :, i, j, q]

    def unpadded(self, xpad: Any) -> Any:
        pd, ph, pw = self.p
        d, h, w = self.x
        return xpad[:, :, pd:pd + d, ph:ph + h, pw:pw + w]


def _usable(spec: KernelSpec) -> bool:
    ctx = spec.context()
    return (ctx.get("algo") in ("per_image", "batched") and not ctx.get("channel_last")
            and ctx["dtype"] in ("float16", "float32", "float64"))


@register_device("conv/conv_forward.c.j2")
def _choose_forward(spec: KernelSpec) -> DeviceFn | None:
    return _forward if _usable(spec) else None


@register_device("conv/conv_backward.c.j2")
def _choose_backward(spec: KernelSpec) -> DeviceFn | None:
    return _backward if _usable(spec) else None


def _forward(xp: Any, at: ArrayAt, spec: KernelSpec, ptrs: Sequence[int], ia: Sequence[int],
             fa: Sequence[float]) -> Run:
    ctx = spec.context()
    dt = np.dtype(ctx["dtype"])
    geo = _Geo(ia)
    bias, req = bool(ctx["bias"]), ctx["req"]
    x = at(ptrs[0], dt, (geo.n, geo.c, *geo.x))
    w = at(ptrs[1], dt, (geo.g, geo.fg, geo.kk))
    out = at(ptrs[3 if bias else 2], dt, (geo.n, geo.g, geo.fg, geo.pp))
    b = at(ptrs[2], dt, (1, geo.g, geo.fg, 1)) if bias else None

    def run() -> None:
        for lo in range(0, geo.n, geo.block):
            hi = min(geo.n, lo + geo.block)
            cols = geo.columns(xp, geo.padded(xp, x[lo:hi]))
            if req != "add" and b is None:
                xp.matmul(w, cols, out=out[lo:hi])
                continue
            y = xp.matmul(w, cols)
            if b is not None:
                y += b
            store(xp, out[lo:hi], y, req)
    return run


def _backward(xp: Any, at: ArrayAt, spec: KernelSpec, ptrs: Sequence[int], ia: Sequence[int],
              fa: Sequence[float]) -> Run:
    ctx = spec.context()
    dt = np.dtype(ctx["dtype"])
    geo = _Geo(ia)
    req_x, req_w, req_b = ctx["req_x"], ctx["req_w"], ctx["req_b"]
    gy = at(ptrs[0], dt, (geo.n, geo.g, geo.fg, geo.pp))
    x = at(ptrs[1], dt, (geo.n, geo.c, *geo.x))
    wt = at(ptrs[2], dt, (geo.g, geo.fg, geo.kk)).swapaxes(1, 2)  # (g, kk, fg)
    dx = at(ptrs[3], dt, (geo.n, geo.c, *geo.x))
    dw = at(ptrs[4], dt, (geo.g, geo.fg, geo.kk))
    db = at(ptrs[5], dt, (geo.g, geo.fg)) if req_b != "null" else None
    padded = tuple(xs + 2 * ps for xs, ps in zip(geo.x, geo.p))

    def run() -> None:
        if db is not None:
            store(xp, db, gy.sum(axis=(0, 3)), req_b)
        wsum = None
        for lo in range(0, geo.n, geo.block):
            hi = min(geo.n, lo + geo.block)
            g = gy[lo:hi]
            if req_w != "null":
                cols = geo.columns(xp, geo.padded(xp, x[lo:hi]))
                part = xp.matmul(g, cols.swapaxes(2, 3)).sum(axis=0)  # (g, fg, kk)
                wsum = part if wsum is None else wsum + part
            if req_x != "null":
                dcols = xp.matmul(wt, g)  # (nb, g, kk, pp)
                if any(geo.p):  # col2im into the padded images, then the inner part
                    acc = xp.zeros((hi - lo, geo.c, *padded), dt)
                    geo.add_columns(xp, dcols, acc)
                    store(xp, dx[lo:hi], geo.unpadded(acc), req_x)
                else:  # col2im straight into the gradient (add mode: onto what is there)
                    if req_x != "add":
                        dx[lo:hi] = 0
                    geo.add_columns(xp, dcols, dx[lo:hi])
        if req_w != "null":  # no images: the weight gradient is zero
            store(xp, dw, xp.zeros(dw.shape, dt) if wsum is None else wsum, req_w)
    return run
