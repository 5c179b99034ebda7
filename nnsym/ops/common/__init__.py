"""Helpers shared by the operator families: gradient builders, storage-type inference."""
