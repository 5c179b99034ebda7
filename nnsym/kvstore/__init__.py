"""``nnsym.kvstore``: MXNet 1.x's key-value store for parameter synchronisation.

``create('local')`` (or 'device') gives a single-process store; ``create('dist_sync')`` (or
'dist_device_sync', or 'dist_async' with a server rank) a store over MPI
(``nnsym.kvstore.dist``, ``nnsym.kvstore.dist_async``; the ``nnsym[dist]`` extra).
``KVStoreBase`` holds everything but the transport, so a distributed store subclasses it and
supplies ``_allreduce``, ``_broadcast_init``, ``rank``, ``num_workers`` and ``_barrier``.
"""

from __future__ import annotations

from nnsym.kvstore.base import KVStoreBase
from nnsym.kvstore.compression import TwoBitCompression
from nnsym.kvstore.errors import (
    DistMismatchError,
    DistributedError,
    DistUnavailableError,
    DuplicateKeyError,
    KeyNotInitializedError,
    KeyTypeError,
    KVStoreError,
    UnsupportedError,
    ValueMismatchError,
)
from nnsym.kvstore.local import KVStore


def create(name: str = "local") -> KVStoreBase:
    """A new store: a class registered with ``KVStoreBase.register`` by that name, 'local',
    'device', or MXNet's local variants ('local_update_cpu', 'local_allreduce_cpu',
    'local_allreduce_device'); names are case-insensitive."""
    if not isinstance(name, str):
        raise KeyTypeError(f"kvstore name must be a string, got {type(name).__name__}")
    kind = name.lower()
    registered = KVStoreBase.kv_registry.get(kind)
    if registered is not None:
        return registered()
    if kind.startswith("dist"):
        from nnsym.kvstore.dist import ASYNC_TYPES, DistKVStore  # noqa: PLC0415 -- MPI optional

        if kind in ASYNC_TYPES:
            from nnsym.kvstore.dist_async import get_store  # noqa: PLC0415

            return get_store(kind)
        return DistKVStore(kind)
    if kind in ("nccl", "horovod", "byteps"):
        raise UnsupportedError(f"kvstore type {name!r} is not available; use 'local', "
                               "'device', 'dist_sync', 'dist_device_sync', 'dist_async' or "
                               "'dist_device_async'")
    if kind not in ("local", "device", "local_update_cpu", "local_allreduce_cpu",
                    "local_allreduce_device"):
        raise UnsupportedError(f"unknown kvstore type {name!r}; expected 'local', 'device', "
                               "'local_update_cpu', 'local_allreduce_cpu' or "
                               "'local_allreduce_device'")
    return KVStore(kind)


__all__ = [
    "DistMismatchError",
    "DistUnavailableError",
    "DistributedError",
    "DuplicateKeyError",
    "KVStore",
    "KVStoreBase",
    "KVStoreError",
    "KeyNotInitializedError",
    "KeyTypeError",
    "TwoBitCompression",
    "UnsupportedError",
    "ValueMismatchError",
    "create",
]
