"""``nnsym launch``: start a training script on N MPI ranks through the MPI launcher
(``mpiexec``), as MXNet's ``tools/launch.py`` started its workers."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Sequence

from nnsym.kvstore.dist import TIMEOUT_ENV
from nnsym.kvstore.errors import DistMismatchError, DistUnavailableError


def find_mpiexec() -> str:
    """The ``mpiexec`` on PATH (the ``mpich`` wheel of ``nnsym[dist]`` installs one)."""
    exe = shutil.which("mpiexec") or shutil.which("mpirun")
    if exe is None:
        raise DistUnavailableError("nnsym launch: no mpiexec on PATH; install MPI with "
                                   "pip install 'nnsym[dist]' (mpi4py and mpich)")
    return exe


def is_hydra(mpiexec: str) -> bool:
    """Whether ``mpiexec`` is MPICH's Hydra (else Open MPI's flags are used)."""
    try:
        out = subprocess.run([mpiexec, "--version"], capture_output=True, text=True,
                             timeout=30, check=False)
    except (OSError, subprocess.SubprocessError):
        return False
    return "hydra" in (out.stdout + out.stderr).lower()


def launch_command(mpiexec: str, num: int, command: Sequence[str], hosts: str | None = None,
                   hydra: bool = True) -> list[str]:
    """The launcher's argument list: ``num`` ranks of ``command``, hosts from ``hosts``.
    Under Hydra, a dead rank does not make the launcher kill the others at once
    (``-disable-auto-cleanup``): they report the failure themselves (DistributedError)."""
    if not isinstance(num, int) or num < 1:
        raise DistMismatchError(f"nnsym launch: -n must be a positive integer, got {num!r}")
    if not command:
        raise DistMismatchError("nnsym launch: no command given (e.g. python train.py)")
    cmd = [mpiexec, "-n", str(num)]
    if hosts is not None:
        if not os.path.isfile(hosts):  # noqa: PTH113 -- a plain str path from argparse
            raise DistMismatchError(f"nnsym launch: hosts file {hosts!r} does not exist")
        cmd += ["-f", hosts] if hydra else ["--hostfile", hosts]
    if hydra:
        cmd.append("-disable-auto-cleanup")
    return cmd + list(command)


def launch(num: int, command: Sequence[str], hosts: str | None = None,
           timeout: float | None = None) -> int:
    """Runs ``command`` on ``num`` ranks; the launcher's exit status (128 + signal number
    for a launcher killed by a signal). Without ``hosts`` every rank runs here, and
    ``NNSYM_NUM_THREADS`` (unless set) gives each rank its share of the cores."""
    exe = find_mpiexec()
    cmd = launch_command(exe, num, command, hosts, is_hydra(exe))
    env = dict(os.environ)
    if hosts is None and "NNSYM_NUM_THREADS" not in env:
        # All ranks on this machine: share its cores between them. Each rank's worker pool
        # and BLAS would otherwise take every core, and the oversubscribed pools spin against
        # each other (a 2-rank step on 2 cores measured 60x slower).
        env["NNSYM_NUM_THREADS"] = str(max(1, (os.cpu_count() or 1) // num))
    if timeout is not None:
        if not timeout > 0:
            raise DistMismatchError(f"nnsym launch: --timeout must be positive, got {timeout}")
        env[TIMEOUT_ENV] = repr(float(timeout))
    rc = subprocess.run(cmd, env=env, check=False).returncode
    return 128 - rc if rc < 0 else rc
