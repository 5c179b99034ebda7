"""The errors a kvstore raises; each message names the key at fault."""

from __future__ import annotations

from nnsym.errors import NNSymError


class KVStoreError(NNSymError):
    """Base of the kvstore's errors."""


class KeyNotInitializedError(KVStoreError, KeyError):
    """A push, pull or row_sparse_pull of a key that was never ``init``-ed."""

    def __str__(self) -> str:  # KeyError would print the message in quotes
        return str(self.args[0]) if self.args else ""


class DuplicateKeyError(KVStoreError, ValueError):
    """``init`` of a key that the store already holds."""


class KeyTypeError(KVStoreError, TypeError):
    """A key that is neither an int nor a str, or int and str keys mixed in one store."""


class ValueMismatchError(KVStoreError, ValueError):
    """Keys and values that do not pair up, or a value of the wrong kind for the call."""


class UnsupportedError(KVStoreError, NotImplementedError):
    """A store type or a feature this store does not have (distributed stores, compression on
    'local', an unknown capability, optimizer states without an optimizer)."""


class DistUnavailableError(KVStoreError, ImportError):
    """A distributed store without MPI: mpi4py (the ``nnsym[dist]`` extra) is not installed."""


class DistMismatchError(KVStoreError, ValueError):
    """Ranks that disagree: different keys, shapes, dtypes or optimizer settings."""


class DistributedError(KVStoreError, RuntimeError):
    """A collective that failed or timed out: another rank died or stopped calling the store."""
