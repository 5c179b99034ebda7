"""The runtime: compiled calls of operators on arrays, the one dispatch of storage decisions,
the native kernel loader, devices."""

from nnsym.runtime import dispatch, native  # noqa: F401  (install the Env and the loader)
