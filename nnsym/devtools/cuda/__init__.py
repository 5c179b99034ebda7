"""CUDA verification tooling: the variants of every kernel family with a CUDA twin and
``nnsym codegen`` (``codegen``), their sparse counterparts (``sparse``), nvcc checks, and a
host shim that runs the CUDA source as C++ on the CPU (``shim``). cupy is never imported here.

Importing this package registers the emulated device (``emulate``: device memory in host
memory, kernels through the host shim) with the GPU runtime, ``nnsym.cuda.runtime``, so that
``NNSYM_CUDA=emulate`` and ``use_backend("emulate")`` select it."""

from nnsym.devtools.cuda import emulate as emulate
