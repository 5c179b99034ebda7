"""``mx.base`` names that user code catches: ``MXNetError`` is nnsym's base error, so
``except mx.base.MXNetError`` catches every error nnsym raises on purpose."""

from __future__ import annotations

from nnsym.errors import NNSymError

MXNetError = NNSymError

__all__ = ["MXNetError"]
