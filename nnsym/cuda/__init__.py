"""The GPU runtime: CUDA twins of the operators' C kernel templates, rendered from the same
kernel specs (``nnsym.cuda.source``), built with nvcc or NVRTC and launched through cupy
(``nnsym.cuda.runtime``). cupy is never imported here. The verification tooling (variant
enumeration, nvcc checks, the host shim and the emulated device) is ``nnsym.devtools.cuda``."""
