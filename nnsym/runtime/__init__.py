"""The runtime: compiled calls of operators on arrays, the native kernel loader, devices."""

from nnsym.runtime import native  # noqa: F401  (installs the loader of the storage kernels)
