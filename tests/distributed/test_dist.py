"""The MPI kvstores: real 2-rank jobs (``mpiexec -n 2`` in a subprocess, each a few seconds)
against numpy and against single-process training on the union of the ranks' batches; a rank
killed mid-training; the launcher; data partitioning; the errors without MPI."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import nnsym as mx
from nnsym import io as mio
from nnsym import kvstore as kvs
from nnsym.cli import main
from nnsym.errors import DataIterError
from nnsym.kvstore.launch import is_hydra, launch_command

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = Path(__file__).resolve().parent / "scripts"
sys.path.insert(0, str(SCRIPTS))

try:
    import mpi4py  # noqa: F401

    MPIEXEC = shutil.which("mpiexec")
except ImportError:
    MPIEXEC = None
needs_mpi = pytest.mark.skipif(MPIEXEC is None, reason="mpi4py/mpiexec not installed "
                               "(pip install 'nnsym[dist]')")


def _env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    env.update(extra)
    return env


def _mpirun(args: list[str], timeout: float = 90, **env: str) -> subprocess.CompletedProcess:
    """Runs ``mpiexec ARGS`` in its own process group, killed whole on timeout."""
    p = subprocess.Popen([MPIEXEC, *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True, env=_env(**env), start_new_session=True)
    try:
        out, _ = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, _ = p.communicate()
        pytest.fail(f"mpiexec {args} hung:\n{out}")
    return subprocess.CompletedProcess(args, p.returncode, out)


@needs_mpi
def test_store_operations_on_two_ranks():
    r = _mpirun(["-n", "2", sys.executable, str(SCRIPTS / "kv_ops.py")])
    assert r.returncode == 0, r.stdout
    assert r.stdout.count("OK") == 2, r.stdout  # each rank prints OK once at the end


@needs_mpi
@pytest.mark.parametrize("model", ["mlp", "sparse"])
def test_fit_dist_sync_equals_one_process_on_the_union_of_batches(model, tmp_path):
    import models

    out = tmp_path / f"{model}.npz"
    r = _mpirun(["-n", "2", sys.executable, str(SCRIPTS / "fit.py"), model, str(out)])
    assert r.returncode == 0, r.stdout
    got = np.load(out)
    kv = "local" if model == "mlp" else kvs.create("local")
    want = models.fit(model, models.union_iter(model, 2), kv)
    assert set(got.files) == set(want)
    for k, v in want.items():
        np.testing.assert_allclose(got[k], v, rtol=1e-5, atol=1e-6, err_msg=k)
    # NOTE: the union matters: training on one part alone ends far away
    alone = models.fit(model, models.part_iter(model, 2, 0), "local" if model == "mlp"
                       else kvs.create("local"))
    assert max(np.abs(alone[k] - got[k]).max() for k in want) > 1e-2


def _run_with_exit_codes(n: int, script: str, stamp: Path, rc_file: Path
                        ) -> subprocess.CompletedProcess:
    """``mpiexec -disable-auto-cleanup -n N`` of a wrapper that records each rank's own exit
    status in ``rc_file.<rank>`` (mpiexec reports only the worst); NNSYM_KVSTORE_TIMEOUT=3."""
    wrap = ("import os, signal, subprocess, sys; signal.signal(signal.SIGUSR1, lambda *a: None);"
            "rc = subprocess.call(sys.argv[2:], close_fds=False); "
            "open(sys.argv[1] + '.' + os.environ['PMI_RANK'], 'w').write(str(rc))")
    return _mpirun(["-disable-auto-cleanup", "-n", str(n), sys.executable, "-c", wrap,
                    str(rc_file), sys.executable, str(SCRIPTS / script), str(stamp)],
                   timeout=60, NNSYM_KVSTORE_TIMEOUT="3")


@needs_mpi
def test_a_dead_rank_stops_the_other_with_an_error_within_the_timeout(tmp_path):
    if not is_hydra(MPIEXEC):
        pytest.skip("needs MPICH's mpiexec (-disable-auto-cleanup, PMI_RANK)")
    stamp, rc_file = tmp_path / "killed_at", tmp_path / "rc"
    r = _run_with_exit_codes(2, "kill.py", stamp, rc_file)
    done = time.time()
    assert stamp.exists(), r.stdout
    elapsed = done - float(stamp.read_text())
    assert 3.0 <= elapsed < 3.0 + 10, (elapsed, r.stdout)
    assert Path(f"{rc_file}.0").read_text() == "1", r.stdout
    assert "DistributedError: kvstore dist_sync: rank 0 of 2 waited more than 3 s" in r.stdout
    assert "another rank has died" in r.stdout
    assert "finished without noticing" not in r.stdout


@pytest.mark.slow
@needs_mpi
def test_a_dead_async_worker_ends_the_job_with_errors_within_the_timeout(tmp_path):
    if not is_hydra(MPIEXEC):
        pytest.skip("needs MPICH's mpiexec (-disable-auto-cleanup, PMI_RANK)")
    stamp, rc_file = tmp_path / "killed_at", tmp_path / "rc"
    r = _run_with_exit_codes(3, "kill_async.py", stamp, rc_file)
    done = time.time()
    assert stamp.exists(), r.stdout
    elapsed = done - float(stamp.read_text())
    assert elapsed < 3.0 + 10, (elapsed, r.stdout)
    assert "worker 0 trained" in r.stdout  # async: the live worker was not held up
    # worker 0 and the server (rank 2) both exit 1, naming the dead worker
    assert Path(f"{rc_file}.0").read_text() == "1", r.stdout
    assert Path(f"{rc_file}.2").read_text() == "1", r.stdout
    assert r.stdout.count("workers [1] did not shut down within 3 s") == 2, r.stdout


@needs_mpi
def test_launch_runs_n_ranks_and_forwards_the_exit_status(capfd, monkeypatch, tmp_path):
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    hosts = tmp_path / "hosts"
    hosts.write_text("localhost:2\n" if is_hydra(MPIEXEC) else "localhost slots=2\n")
    code = ("import os, sys; from mpi4py import MPI; c = MPI.COMM_WORLD; "
            "assert os.environ['NNSYM_KVSTORE_TIMEOUT'] == '5.0'; "
            "print(f'rank {c.rank} of {c.size}', flush=True); sys.exit(3 * c.rank)")
    assert main(["launch", "-n", "2", "--hosts", str(hosts), "--timeout", "5", sys.executable,
                 "-c", code]) == 3
    out = capfd.readouterr().out
    assert "rank 0 of 2" in out and "rank 1 of 2" in out


def test_launch_command_maps_hosts_to_the_launchers_option(tmp_path):
    hosts = tmp_path / "hosts"
    hosts.write_text("node1:4\nnode2:4\n")
    cmd = ["python", "train.py", "--lr", "0.1"]
    assert launch_command("mpiexec", 8, cmd, str(hosts), hydra=True) == [
        "mpiexec", "-n", "8", "-f", str(hosts), "-disable-auto-cleanup", *cmd]
    assert launch_command("mpirun", 2, cmd, str(hosts), hydra=False) == [
        "mpirun", "-n", "2", "--hostfile", str(hosts), *cmd]
    with pytest.raises(kvs.DistMismatchError, match="does not exist"):
        launch_command("mpiexec", 2, cmd, str(tmp_path / "nope"))
    with pytest.raises(kvs.DistMismatchError, match="-n"):
        launch_command("mpiexec", 0, cmd)


def test_without_mpi4py_the_error_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "mpi4py", None)
    monkeypatch.setitem(sys.modules, "mpi4py.MPI", None)
    with pytest.raises(kvs.DistUnavailableError, match=r"nnsym\[dist\]") as e:
        kvs.create("dist_sync")
    assert isinstance(e.value, ImportError)


def test_launch_without_mpiexec_names_the_extra(monkeypatch, capsys):
    monkeypatch.setenv("PATH", "")
    assert main(["launch", "-n", "2", "python", "x.py"]) == 1
    assert "nnsym[dist]" in capsys.readouterr().err


@needs_mpi
def test_dist_async_with_a_server_rank():
    r = _mpirun(["-n", "3", sys.executable, str(SCRIPTS / "kv_async.py")],
                NNSYM_KVSTORE_TIMEOUT="30")
    assert r.returncode == 0, r.stdout  # the server rank exits 0 once both workers stopped
    # (the ranks' lines can reach mpiexec's output without their newlines between them)
    sums = re.findall(r"OK (\d) ([-+0-9.eE]+)", r.stdout)
    assert sorted(s[0] for s in sums) == ["0", "1"], r.stdout
    assert sums[0][1] == sums[1][1], r.stdout


def test_dist_async_refuses_compression_and_sync_only_calls():
    from nnsym.kvstore.dist_async import DistAsyncKVStore

    kv = DistAsyncKVStore.__new__(DistAsyncKVStore)  # no MPI needed for these refusals
    with pytest.raises(kvs.UnsupportedError, match="dist_sync"):
        kv.set_gradient_compression({"type": "2bit"})
    with pytest.raises(kvs.UnsupportedError, match="server"):
        kv.save_optimizer_states("x")


def test_ndarrayiter_parts_are_contiguous_and_cover_the_data():
    x = np.arange(22, dtype=np.float32).reshape(11, 2)
    y = np.arange(11, dtype=np.float32)
    seen = []
    for p in range(3):
        it = mio.NDArrayIter(x, y, batch_size=2, num_parts=3, part_index=p,
                             last_batch_handle="discard")
        assert it.num_data == [3, 4, 4][p]
        labels = [b.label[0].asnumpy() for b in it]
        seen.append(np.concatenate(labels).tolist())
    assert seen == [[0.0, 1.0], [3.0, 4.0, 5.0, 6.0], [7.0, 8.0, 9.0, 10.0]]
    csr = mx.nd.array(x).tostype("csr")
    it = mio.NDArrayIter(csr, y, batch_size=2, num_parts=2, part_index=1,
                         last_batch_handle="discard")
    np.testing.assert_array_equal(next(iter(it)).data[0].asnumpy(), x[5:7])
    for bad in [{"num_parts": 2, "part_index": 2}, {"num_parts": 0}]:
        with pytest.raises(DataIterError, match="part_index"):
            mio.NDArrayIter(x, y, **bad)


@needs_mpi
def test_the_docs_training_script_runs_on_two_ranks(tmp_path):
    text = (ROOT / "docs" / "distributed.md").read_text()
    block = text.split("```python\n", 1)[1].split("```", 1)[0]
    script = tmp_path / "train.py"
    script.write_text(block)
    r = _mpirun(["-n", "2", sys.executable, str(script)])
    assert r.returncode == 0, r.stdout
    sums = re.findall(r"rank (\d) of 2 weight sum ([-+0-9.eE]+)", r.stdout)
    assert sorted(s[0] for s in sums) == ["0", "1"], r.stdout
    assert sums[0][1] == sums[1][1]  # equal weights on both ranks
