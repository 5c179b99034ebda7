"""W7's numpy peer: a hand-written numpy forward and backward for the operators of the ResNet-18
v1 export (Convolution, BatchNorm, Activation relu, Pooling max / global avg, elemwise_add,
Flatten, FullyConnected), walking the same symbol JSON node by node.

Written as a numpy user would for speed: convolution by im2col (a strided window view copied
into one matrix) and one float32 GEMM; its data gradient by a GEMM and col2im (one strided add
per kernel offset); BatchNorm with batch statistics in training (running statistics at
inference); max pooling by the window view, its gradient to the first maximum of each window.
Only the operators and attributes this network uses are supported (anything else raises).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

Arr = np.ndarray


def _tuple(text: str) -> tuple[int, ...]:
    return tuple(int(v) for v in text.strip("()[] ").split(",") if v.strip())


def _windows(x: Arr, k: tuple[int, int], s: tuple[int, int], p: tuple[int, int],
             fill: float = 0.0) -> Arr:
    """(N, C, Ho, Wo, kh, kw) view of the padded input."""
    if p != (0, 0):
        x = np.pad(x, ((0, 0), (0, 0), (p[0], p[0]), (p[1], p[1])), constant_values=fill)
    return sliding_window_view(x, k, axis=(2, 3))[:, :, ::s[0], ::s[1]]


def conv_forward(x: Arr, w: Arr, k: tuple[int, int], s: tuple[int, int],
                 p: tuple[int, int]) -> tuple[Arr, Arr]:
    n = x.shape[0]
    win = _windows(x, k, s, p)
    ho, wo = win.shape[2], win.shape[3]
    cols = np.ascontiguousarray(win.transpose(0, 2, 3, 1, 4, 5)).reshape(n * ho * wo, -1)
    y = cols @ w.reshape(w.shape[0], -1).T  # (N*Ho*Wo, F)
    return np.ascontiguousarray(y.reshape(n, ho, wo, -1).transpose(0, 3, 1, 2)), cols


def conv_backward(dy: Arr, x_shape: tuple[int, ...], w: Arr, cols: Arr, k: tuple[int, int],
                  s: tuple[int, int], p: tuple[int, int], need_dx: bool) -> tuple[Arr | None, Arr]:
    n, c, h, wd = x_shape
    f = w.shape[0]
    ho, wo = dy.shape[2], dy.shape[3]
    dy2 = dy.transpose(0, 2, 3, 1).reshape(-1, f)
    dw = (dy2.T @ cols).reshape(w.shape)
    if not need_dx:
        return None, dw
    dcols = (dy2 @ w.reshape(f, -1)).reshape(n, ho, wo, c, k[0], k[1])
    dxp = np.zeros((n, c, h + 2 * p[0], wd + 2 * p[1]), dy.dtype)
    for i in range(k[0]):
        for j in range(k[1]):
            dxp[:, :, i:i + s[0] * ho:s[0], j:j + s[1] * wo:s[1]] += \
                dcols[:, :, :, :, i, j].transpose(0, 3, 1, 2)
    return dxp[:, :, p[0]:p[0] + h, p[1]:p[1] + wd], dw


class NumpyNet:
    """The network of a symbol JSON with numpy arrays for its arguments and auxiliary states."""

    def __init__(self, json_path: Path, arrays: dict[str, Arr]):
        doc = json.loads(Path(json_path).read_text())
        self.nodes = doc["nodes"]
        self.heads = doc["heads"]
        self.arrays = arrays

    def forward(self, is_train: bool) -> Arr:
        vals: list[Any] = [None] * len(self.nodes)
        self.saved: list[Any] = [None] * len(self.nodes)
        for i, nd in enumerate(self.nodes):
            op, a = nd["op"], nd.get("attrs", {})
            if op == "null":
                vals[i] = self.arrays[nd["name"]]
                continue
            ins = [vals[e[0]] for e in nd["inputs"]]
            if op == "Convolution":
                k, s, p = _tuple(a["kernel"]), _tuple(a.get("stride", "(1,1)")), \
                    _tuple(a.get("pad", "(0,0)"))
                y, cols = conv_forward(ins[0], ins[1], k, s, p)  # type: ignore[arg-type]
                if a.get("no_bias", "False") != "True":
                    y += ins[2].reshape(1, -1, 1, 1)
                self.saved[i] = cols if is_train else None
            elif op == "BatchNorm":
                x, gamma, beta, mm, mv = ins
                eps = float(a.get("eps", "1e-3"))
                if is_train:
                    mean = x.mean(axis=(0, 2, 3))
                    var = x.var(axis=(0, 2, 3))
                else:
                    mean, var = mm, mv
                inv = 1.0 / np.sqrt(var + eps)
                xhat = (x - mean.reshape(1, -1, 1, 1)) * inv.reshape(1, -1, 1, 1)
                y = xhat * gamma.reshape(1, -1, 1, 1) + beta.reshape(1, -1, 1, 1)
                self.saved[i] = (xhat, inv) if is_train else None
            elif op == "Activation":
                if a["act_type"] != "relu":
                    raise NotImplementedError(a["act_type"])
                y = np.maximum(ins[0], 0)
            elif op == "Pooling":
                if a.get("global_pool") == "True":
                    y = ins[0].mean(axis=(2, 3), keepdims=True)
                else:
                    k, s, p = _tuple(a["kernel"]), _tuple(a["stride"]), _tuple(a["pad"])
                    win = _windows(ins[0], k, s, p, -np.inf)
                    y = win.max(axis=(4, 5))
                    self.saved[i] = (k, s, p) if is_train else None
            elif op == "elemwise_add":
                y = ins[0] + ins[1]
            elif op == "Flatten":
                y = ins[0].reshape(ins[0].shape[0], -1)
            elif op == "FullyConnected":
                y = ins[0].reshape(ins[0].shape[0], -1) @ ins[1].T + ins[2]
            else:
                raise NotImplementedError(op)
            vals[i] = y
        self.vals = vals
        return vals[self.heads[0][0]]  # type: ignore[no-any-return]

    def backward(self, head: Arr) -> dict[str, Arr]:
        grads: list[Any] = [None] * len(self.nodes)
        grads[self.heads[0][0]] = head
        out: dict[str, Arr] = {}
        for i in range(len(self.nodes) - 1, -1, -1):
            nd, g = self.nodes[i], grads[i]
            if g is None:
                continue
            op, a = nd["op"], nd.get("attrs", {})
            if op == "null":
                out[nd["name"]] = g
                continue
            src = [e[0] for e in nd["inputs"]]
            ins = [self.vals[e] for e in src]
            res: list[Any]
            if op == "Convolution":
                k, s, p = _tuple(a["kernel"]), _tuple(a.get("stride", "(1,1)")), \
                    _tuple(a.get("pad", "(0,0)"))
                need_dx = self.nodes[src[0]]["op"] != "null"
                dx, dw = conv_backward(g, ins[0].shape, ins[1], self.saved[i], k, s, p, need_dx)
                res = [dx, dw] + ([g.sum(axis=(0, 2, 3))] if len(src) > 2 else [])
            elif op == "BatchNorm":
                xhat, inv = self.saved[i]
                gamma = ins[1].reshape(1, -1, 1, 1)
                m = g.shape[0] * g.shape[2] * g.shape[3]
                dbeta = g.sum(axis=(0, 2, 3))
                dgamma = (g * xhat).sum(axis=(0, 2, 3))
                dx = (gamma * inv.reshape(1, -1, 1, 1) / m) * (
                    m * g - dbeta.reshape(1, -1, 1, 1) - xhat * dgamma.reshape(1, -1, 1, 1))
                res = [dx, dgamma, dbeta]
            elif op == "Activation":
                res = [g * (self.vals[i] > 0)]
            elif op == "Pooling":
                x = ins[0]
                if a.get("global_pool") == "True":
                    res = [np.broadcast_to(g / (x.shape[2] * x.shape[3]), x.shape).copy()]
                else:
                    k, s, p = self.saved[i]
                    y = self.vals[i]
                    ho, wo = y.shape[2], y.shape[3]
                    xp = np.pad(x, ((0, 0), (0, 0), (p[0], p[0]), (p[1], p[1])),
                                constant_values=-np.inf)
                    dxp = np.zeros_like(xp)
                    taken = np.zeros(y.shape, bool)
                    for di in range(k[0]):
                        for dj in range(k[1]):
                            sl = (slice(None), slice(None), slice(di, di + s[0] * ho, s[0]),
                                  slice(dj, dj + s[1] * wo, s[1]))
                            hit = (xp[sl] == y) & ~taken
                            taken |= hit
                            dxp[sl] += g * hit
                    res = [dxp[:, :, p[0]:p[0] + x.shape[2], p[1]:p[1] + x.shape[3]]]
            elif op == "elemwise_add":
                res = [g, g]
            elif op == "Flatten":
                res = [g.reshape(ins[0].shape)]
            elif op == "FullyConnected":
                x2 = ins[0].reshape(ins[0].shape[0], -1)
                res = [(g @ ins[1]).reshape(ins[0].shape), g.T @ x2, g.sum(axis=0)]
            else:
                raise NotImplementedError(op)
            for e, r in zip(src, res):
                name = self.nodes[e]["name"]
                if r is None or name == "data" or name.endswith(("_running_mean",
                                                                 "_running_var")):
                    continue
                grads[e] = r if grads[e] is None else grads[e] + r
        return out
