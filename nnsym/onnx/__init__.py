"""ONNX export and import (MXNet's ``mx.onnx``); needs the optional extra ``nnsym[onnx]``.

``import nnsym.onnx`` does not import ``onnx``: the functions load it when they run.
"""

from nnsym.onnx._lazy import OPSET, OnnxError, OnnxMissingError
from nnsym.onnx.export import export_checkpoint, export_model
from nnsym.onnx.importer import get_model_metadata, import_model

__all__ = ["OPSET", "OnnxError", "OnnxMissingError", "export_checkpoint", "export_model",
           "get_model_metadata", "import_model"]
