"""Development tooling in the apps layer: it may import any part of nnsym, and nothing in nnsym
below the apps imports it. ``nnsym.devtools.cuda``: CUDA verification (variant enumeration,
nvcc checks, the host shim and the emulated device built on it); ``nnsym.devtools.stubs``: the
typed ``.pyi`` stubs of ``nnsym.sym``/``nnsym.nd``, generated from the operator registry."""
