"""The CUDA backend (first slice): CUDA twins of the elementwise C kernel templates, rendered
from the same kernel specs (``nnsym.cuda.codegen``), and a host shim that runs the CUDA source
as C++ on the CPU (``nnsym.cuda.shim``). cupy is never imported here."""
