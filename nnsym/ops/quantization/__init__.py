"""Quantization operators: float32 to int8/uint8 and back, and int32 accumulators to int8."""
