"""Code generation: kernel specs -> C source (jinja2) -> one shared object per build (cffi ABI)."""
