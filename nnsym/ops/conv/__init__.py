"""Convolution, Deconvolution, Pooling and UpSampling."""
