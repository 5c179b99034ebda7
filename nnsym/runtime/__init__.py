"""The runtime: compiled calls of operators on arrays, the one dispatch of storage decisions,
the native kernel loader, devices, the thread setting."""

from nnsym.runtime import dispatch, native, threads  # noqa: F401  (install the Env and the loader)
from nnsym.runtime.threads import get_num_threads, set_num_threads

threads.apply_environment()

__all__ = ["get_num_threads", "set_num_threads"]
