"""MXNet's random image operators: ``_image_random_flip_left_right``/``_top_bottom``,
``_image_random_brightness``/``contrast``/``saturation``/``hue``, ``_image_random_color_jitter``
and ``_image_random_lighting``, over one (H, W, C) image with 1 or 3 channels.

Each run draws its factors from the run's seed (``Launch.seed_slot``, from
``nnsym.ops.common.rng``; ``random.seed(n)`` reproduces them): a flip happens with probability
1/2, a factor is uniform in [min_factor, max_factor], color_jitter applies each transform whose
amount is positive (brightness, contrast and saturation by 1 + U(-x, x), hue by U(-x, x)) in a
random order, and lighting's alphas are normal(0, alpha_std). The numpy references draw the same
distributions from numpy's generator (not the same values). No gradients (as MXNet).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from nnsym.errors import NoKernelError
from nnsym.ir.opdef import DENSE, Example, Kernel, OpDef, RuleError, register
from nnsym.ir.params import NoParams, Params, field
from nnsym.ir.spec import KernelCall, KernelSpec, Launch, Lowered, size
from nnsym.ops.common.grad import no_gradient
from nnsym.ops.common.rng import next_seed
from nnsym.ops.image.image import (
    KERNEL_DTYPES,
    comp_type,
    flip_lowering,
    hwc_shape,
    lighting_shift,
    same_type,
    saturate,
)
from nnsym.types import shape_str

BRIGHTNESS, CONTRAST, SATURATION, HUE, LIGHTING = range(5)
_SECTORS = ((1, 3, 0), (1, 0, 2), (3, 0, 1), (0, 2, 1), (0, 1, 3), (2, 1, 0))


def color_shape(p: Any, ins: list, outs: list) -> tuple[list, list]:
    ins, outs = hwc_shape(p, ins, outs)
    s = ins[0]
    if s is not None and s[-1] is not None and s[-1] not in (1, 3):
        raise RuleError(f"data has shape {shape_str(s)}; its last axis must have 1 or 3 "
                        "channels")
    return ins, outs


# ---------------------------------------------------------------------------------------------
# numpy model of the kernel (image_color.c.j2): the references and the tests use it


def _grey(v: np.ndarray, ct: type) -> np.ndarray:
    if v.shape[-1] == 1:
        return v[..., 0]
    w = [ct(0.299), ct(0.587), ct(0.114)]
    out: np.ndarray = w[0] * v[..., 0] + w[1] * v[..., 1] + w[2] * v[..., 2]
    return out


def _hue_pixel(px: list[np.float32], a: np.float32) -> list[np.float32]:
    f = np.float32
    r, g, b = (v / f(255) for v in px)
    vmax, vmin = max(r, g, b), min(r, g, b)
    diff, lum = vmax - vmin, (vmax + vmin) * f(0.5)
    h = s = f(0)
    if diff > f(1.1920929e-07):
        s = diff / (vmax + vmin) if lum < f(0.5) else diff / (f(2) - vmax - vmin)
        d = f(60) / diff
        if vmax == r:
            h = (g - b) * d
        elif vmax == g:
            h = (b - r) * d + f(120)
        else:
            h = (r - g) * d + f(240)
        if h < 0:
            h = h + f(360)
    h = h + a * f(360)
    p2 = lum * (f(1) + s) if lum <= f(0.5) else lum + s - lum * s
    p1 = f(2) * lum - p2
    h = h * (f(1) / f(60))
    while h < 0:
        h = h + f(6)
    while h >= 6:
        h = h - f(6)
    k = min(int(h), 5)
    h = h - f(k)
    tab = (p2, p1, p1 + (p2 - p1) * (f(1) - h), p1 + (p2 - p1) * h)
    return [tab[_SECTORS[k][2]] * f(255), tab[_SECTORS[k][1]] * f(255),
            tab[_SECTORS[k][0]] * f(255)]


def apply_steps(x: np.ndarray, steps: list[tuple[int, float]],
                shift: tuple[float, ...] = (0.0, 0.0, 0.0)) -> np.ndarray:
    """The kernel's colour steps [(step, factor), ...] on an (H, W, C) image, in numpy."""
    ct = np.float64 if comp_type(x.dtype) == "double" else np.float32
    v = x.astype(ct)
    c = x.shape[-1]
    for st, a_ in steps:
        a = ct(a_)
        if st == BRIGHTNESS:
            v = v * a
        elif st == CONTRAST:
            m = ct(np.float64(_grey(v, ct)).mean()) if v.size else ct(0)
            v = v * a + m * (ct(1) - a)
        elif st == SATURATION:
            v = v * a + _grey(v, ct)[..., None] * (ct(1) - a)
        elif st == HUE and c == 3:
            flat = v.reshape(-1, 3).astype(np.float32)
            v = np.array([_hue_pixel(list(px), np.float32(a)) for px in flat],
                         np.float32).reshape(v.shape).astype(ct)
        elif st == LIGHTING and c == 3:
            v = v + np.asarray(shift, np.float64).astype(ct)
        v = saturate(v, x.dtype).astype(ct)
    return saturate(v, x.dtype)


def _rng() -> np.random.Generator:
    return np.random.default_rng(next_seed())


def _jitter_steps(p: Any, rng: np.random.Generator) -> list[tuple[int, float]]:
    amounts = (p.brightness, p.contrast, p.saturation, p.hue)
    steps = [(k, (0.0 if k == HUE else 1.0) + amt * rng.uniform(-1, 1))
             for k, amt in enumerate(amounts) if amt > 0]
    order = rng.permutation(len(steps))
    return [steps[i] for i in order]


# ---------------------------------------------------------------------------------------------
# Lowering


def color_lowering(mode: str) -> Any:
    def lower(call: KernelCall) -> Lowered:
        dt = call.in_dtypes[0]
        if dt.name not in KERNEL_DTYPES:
            raise NoKernelError(f"image kernels take {KERNEL_DTYPES}, not {dt.name}")
        if size(call.out_shapes[0]) == 0:
            return Lowered()
        p = call.params
        lo, hi = (float(np.iinfo(dt).min), float(np.iinfo(dt).max)) if dt.kind in "iu" \
            else (None, None)
        spec = KernelSpec.make("image/image_color.c.j2", dtype=dt.name, comp=comp_type(dt),
                               mode=mode, req=call.req, lo=lo, hi=hi)
        if mode == "jitter":
            fa = (p.brightness, p.contrast, p.saturation, p.hue)
        elif mode == "lighting":
            fa = (p.alpha_std, 0.0, 0.0, 0.0)
        else:
            fa = (p.min_factor, p.max_factor, 0.0, 0.0)
        return Lowered((Launch(spec, tuple(call.in_shapes[0]), (*map(float, fa), 0.0),
                               seed_slot=4),))

    return lower


# ---------------------------------------------------------------------------------------------
# Registration


@dataclass(frozen=True, kw_only=True)
class FactorParams(Params):
    min_factor: float = field(lower=0.0, doc="Minimum factor.")
    max_factor: float = field(lower=0.0, doc="Maximum factor.")


@dataclass(frozen=True, kw_only=True)
class ColorJitterParams(Params):
    brightness: float = field(doc="How much to jitter brightness.")
    contrast: float = field(doc="How much to jitter contrast.")
    saturation: float = field(doc="How much to jitter saturation.")
    hue: float = field(doc="How much to jitter hue.")


@dataclass(frozen=True, kw_only=True)
class RandomLightingParams(Params):
    alpha_std: float = field(default=0.05, doc="Level of the lighting noise.")


_IMG_EXAMPLES = (
    Example(((4, 5, 3),), low=0.0, high=255.0),
    Example(((3, 2, 1),), dtype="float64", low=0.0, high=255.0),
    Example(((2, 3, 3),), dtype="uint8", ints={0: (0, 256)}),
)


def _examples(params: dict[str, Any]) -> tuple[Example, ...]:
    return tuple(Example(e.shapes, params, dtype=e.dtype, low=e.low, high=e.high, ints=e.ints)
                 for e in _IMG_EXAMPLES)


def _factor_reference(step: int) -> Any:
    def ref(p: FactorParams, x: np.ndarray) -> np.ndarray:
        a = p.min_factor + (p.max_factor - p.min_factor) * _rng().random()
        return apply_steps(x, [(step, a)])

    return ref


RANDOM_OPS: dict[str, OpDef] = {}

for _name, _axis in (("flip_left_right", 1), ("flip_top_bottom", 0)):
    RANDOM_OPS[_name] = register(OpDef(
        name=f"_image_random_{_name}",
        params=NoParams,
        inputs=("data",),
        infer_shape=hwc_shape,
        infer_type=same_type,
        reference=lambda p, x, _a=_axis: (np.flip(x, axis=_a) if _rng().random() < 0.5
                                          else x).copy(),
        kernels={DENSE: Kernel(flip_lowering(_axis, coin=True))},
        grad=no_gradient,
        differentiable=False,
        random=True,
        doc=f"{'Left-right' if _axis else 'Top-bottom'} flip of an (H, W, C) image with "
            "probability 1/2.",
        examples=_examples({}),
        bad_params=({"p": 0.5},),
    ))

for _name, _step in (("brightness", BRIGHTNESS), ("contrast", CONTRAST),
                     ("saturation", SATURATION), ("hue", HUE)):
    RANDOM_OPS[_name] = register(OpDef(
        name=f"_image_random_{_name}",
        params=FactorParams,
        inputs=("data",),
        infer_shape=color_shape,
        infer_type=same_type,
        reference=_factor_reference(_step),
        kernels={DENSE: Kernel(color_lowering(_name))},
        grad=no_gradient,
        differentiable=False,
        random=True,
        doc=f"Random {_name} of an (H, W, C) image: factor uniform in [min_factor, max_factor]"
            + (" (a hue turn of factor * 360 degrees)." if _step == HUE else "."),
        examples=_examples({"min_factor": 0.0 if _step == HUE else 0.5, "max_factor": 0.4
                            if _step == HUE else 1.5}),
        bad_params=({"min_factor": -1.0, "max_factor": 1.0}, {"min_factor": 0.5},
                    {"min_factor": 0.5, "max_factor": 1.0, "alpha": 1.0}),
    ))


def jitter_reference(p: ColorJitterParams, x: np.ndarray) -> np.ndarray:
    return apply_steps(x, _jitter_steps(p, _rng()))


RANDOM_OPS["color_jitter"] = register(OpDef(
    name="_image_random_color_jitter",
    params=ColorJitterParams,
    inputs=("data",),
    infer_shape=color_shape,
    infer_type=same_type,
    reference=jitter_reference,
    kernels={DENSE: Kernel(color_lowering("jitter"))},
    grad=no_gradient,
    differentiable=False,
    random=True,
    doc="Random brightness, contrast, saturation and hue changes of an (H, W, C) image, in a "
        "random order.",
    examples=_examples({"brightness": 0.3, "contrast": 0.3, "saturation": 0.3, "hue": 0.1}),
    bad_params=({"brightness": 0.1}, {"brightness": 0.1, "contrast": 0.1, "saturation": 0.1,
                                      "hue": "x"}),
))


def lighting_reference(p: RandomLightingParams, x: np.ndarray) -> np.ndarray:
    alpha = tuple(float(v) for v in _rng().normal(0.0, abs(p.alpha_std), 3))
    return apply_steps(x, [(LIGHTING, 0.0)], lighting_shift(alpha))


RANDOM_OPS["lighting"] = register(OpDef(
    name="_image_random_lighting",
    params=RandomLightingParams,
    inputs=("data",),
    infer_shape=color_shape,
    infer_type=same_type,
    reference=lighting_reference,
    kernels={DENSE: Kernel(color_lowering("lighting"))},
    grad=no_gradient,
    differentiable=False,
    random=True,
    doc="AlexNet-style PCA lighting noise on an (H, W, 3) image: alphas normal(0, alpha_std).",
    examples=_examples({"alpha_std": 0.1}),
    bad_params=({"alpha_std": "x"}, {"std": 0.1}),
))

__all__ = ["RANDOM_OPS", "apply_steps"]
