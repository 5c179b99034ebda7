"""The single-process store: 'local' and 'device' (and MXNet's local_* variants)."""

from __future__ import annotations

from nnsym.kvstore.base import KVStoreBase


class KVStore(KVStoreBase):
    """MXNet's local kvstore: every value lives in this process, reduction is a local sum.
    Gradient compression is available for the device types, as in MXNet."""

    def _compression_allowed(self) -> bool:
        return "device" in self._type
