"""Files nnsym writes replace the previous file only when complete (``nnsym.fileio``): a failed
save leaves the old file and no temporary file behind. ``.params`` headers whose element
counts overflow int64 are ``FileFormatError`` before anything is allocated."""

from __future__ import annotations

import errno
import os
import stat
import struct
import sys
from pathlib import Path

import numpy as np
import pytest

import nnsym as mx
from nnsym import cli, fileio, model
from nnsym import visualization as viz
from nnsym.errors import FileFormatError
from nnsym.ndarray import io as ndio

OLD = b"the previous file\n"


def _listing(d: Path) -> list[str]:
    return sorted(p.name for p in d.iterdir())


def _disk_full(monkeypatch):
    """Every fsync of the file being written fails as a full disk would."""
    def fsync(fd):
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(fileio.os, "fsync", fsync)


def _mlp():
    x = mx.sym.var("data")
    return mx.sym.FullyConnected(x, num_hidden=3, name="fc")


# ---------------------------------------------------------------------------------------------
# The helper


def test_atomic_write_replaces_only_when_done(tmp_path):
    p = tmp_path / "f.bin"
    p.write_bytes(OLD)
    with fileio.atomic_write(p) as f:
        f.write(b"new")
        assert p.read_bytes() == OLD  # not visible before the block ends
        assert len(_listing(tmp_path)) == 2
    assert p.read_bytes() == b"new"
    assert _listing(tmp_path) == ["f.bin"]


@pytest.mark.parametrize("exc", [RuntimeError, KeyboardInterrupt])
def test_atomic_write_failure_keeps_old_file(tmp_path, exc):
    p = tmp_path / "f.bin"
    p.write_bytes(OLD)
    with pytest.raises(exc), fileio.atomic_write(p) as f:
        f.write(b"half of it")
        raise exc()
    assert p.read_bytes() == OLD
    assert _listing(tmp_path) == ["f.bin"]


def test_atomic_write_disk_full(tmp_path, monkeypatch):
    p = tmp_path / "f.txt"
    p.write_bytes(OLD)
    _disk_full(monkeypatch)
    with pytest.raises(OSError, match="No space"):
        fileio.write_text(p, "new")
    assert p.read_bytes() == OLD
    assert _listing(tmp_path) == ["f.txt"]


def test_atomic_write_keeps_mode_and_symlink(tmp_path):
    real = tmp_path / "real.txt"
    real.write_bytes(OLD)
    real.chmod(0o640)
    link = tmp_path / "link.txt"
    link.symlink_to(real)
    fileio.write_text(link, "new")
    assert link.is_symlink() and real.read_text() == "new"
    assert stat.S_IMODE(real.stat().st_mode) == 0o640
    fresh = tmp_path / "fresh.txt"
    fileio.write_text(fresh, "x")
    umask = os.umask(0o022)
    os.umask(umask)
    assert stat.S_IMODE(fresh.stat().st_mode) == 0o666 & ~umask


def test_atomic_write_special_files(tmp_path):
    mx.nd.save(os.devnull, [mx.nd.ones((2,))])  # written in place, never replaced
    assert Path(os.devnull).is_char_device()
    with pytest.raises(IsADirectoryError):
        fileio.write_text(tmp_path, "x")
    assert _listing(tmp_path) == []


def test_atomic_write_long_name(tmp_path):
    p = tmp_path / ("n" * 240 + ".params")  # 247 of the 255 characters a name may have
    mx.nd.save(p, [mx.nd.ones((2,))])
    assert _listing(tmp_path) == [p.name]


def test_atomic_write_missing_directory(tmp_path):
    with pytest.raises(FileNotFoundError):
        fileio.write_bytes(tmp_path / "no" / "f.bin", b"x")
    assert _listing(tmp_path) == []


# ---------------------------------------------------------------------------------------------
# Every writer


def test_nd_save_failing_midway_keeps_old_file(tmp_path, monkeypatch):
    p = tmp_path / "a.params"
    p.write_bytes(OLD)
    real_encode = ndio._encode

    def encode(data):
        chunks = real_encode(data)
        return [*chunks[:2], object()]  # the third write raises

    monkeypatch.setattr(ndio, "_encode", encode)
    with pytest.raises(TypeError):
        mx.nd.save(p, {"w": mx.nd.ones((4, 4))})
    assert p.read_bytes() == OLD
    assert _listing(tmp_path) == ["a.params"]


def test_nd_save_disk_full_keeps_old_file(tmp_path, monkeypatch):
    p = tmp_path / "a.params"
    mx.nd.save(p, {"w": mx.nd.ones((2,))})
    old = p.read_bytes()
    _disk_full(monkeypatch)
    with pytest.raises(OSError):
        mx.nd.save(p, {"w": mx.nd.zeros((1000,))})
    assert p.read_bytes() == old
    assert _listing(tmp_path) == ["a.params"]
    monkeypatch.undo()
    mx.nd.save(p, {"w": mx.nd.zeros((3,))})
    assert mx.nd.load(p)["w"].shape == (3,)
    assert _listing(tmp_path) == ["a.params"]


def test_symbol_save_failure_keeps_old_file(tmp_path, monkeypatch):
    p = tmp_path / "net-symbol.json"
    _mlp().save(p)
    old = p.read_bytes()
    _disk_full(monkeypatch)
    with pytest.raises(OSError):
        mx.sym.Activation(_mlp(), act_type="relu").save(p)
    assert p.read_bytes() == old
    assert _listing(tmp_path) == ["net-symbol.json"]


def test_checkpoint_failure_keeps_old_files(tmp_path, monkeypatch):
    prefix = str(tmp_path / "net")
    args = {"fc_weight": mx.nd.ones((3, 4)), "fc_bias": mx.nd.zeros((3,))}
    model.save_checkpoint(prefix, 1, _mlp(), args, {})
    before = {n: (tmp_path / n).read_bytes() for n in _listing(tmp_path)}
    _disk_full(monkeypatch)
    with pytest.raises(OSError):
        model.save_checkpoint(prefix, 1, _mlp(), {k: v * 2 for k, v in args.items()}, {})
    assert {n: (tmp_path / n).read_bytes() for n in _listing(tmp_path)} == before
    monkeypatch.undo()
    _, arg, _ = model.load_checkpoint(prefix, 1)
    assert np.array_equal(arg["fc_weight"].asnumpy(), np.ones((3, 4), np.float32))


def test_cli_infer_json_failure_keeps_old_file(tmp_path, monkeypatch, capsys):
    sym_file = tmp_path / "net-symbol.json"
    _mlp().save(sym_file)
    out = tmp_path / "inferred.json"
    out.write_bytes(OLD)
    _disk_full(monkeypatch)
    rc = cli.main(["infer", str(sym_file), "--shape", "data=2,4", "--json", str(out)])
    assert rc == 1 and "No space" in capsys.readouterr().err
    assert out.read_bytes() == OLD
    assert _listing(tmp_path) == ["inferred.json", "net-symbol.json"]
    monkeypatch.undo()
    assert cli.main(["infer", str(sym_file), "--shape", "data=2,4", "--json", str(out)]) == 0
    assert b"__inferred_shape__" in out.read_bytes()


def test_plot_save_failure_keeps_old_file(tmp_path, monkeypatch):
    monkeypatch.setattr(viz, "_graphviz", lambda: None)  # nnsym's Digraph, even with graphviz
    d = viz.plot_network(_mlp(), shape={"data": (1, 4)})
    p = tmp_path / "net.dot"
    p.write_bytes(OLD)
    _disk_full(monkeypatch)
    with pytest.raises(OSError):
        d.save(p)
    assert p.read_bytes() == OLD
    assert _listing(tmp_path) == ["net.dot"]
    monkeypatch.undo()
    assert d.save(p).read_text() == d.source


def test_failed_render_keeps_old_picture(tmp_path, monkeypatch):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    dot = bindir / "dot"
    dot.write_text(f"#!{sys.executable}\nimport sys\nsys.stdout.write('partial')\nsys.exit(3)\n")
    dot.chmod(0o755)
    monkeypatch.setattr(viz, "dot_program", lambda: str(dot))
    monkeypatch.setattr(viz, "_graphviz", lambda: None)  # nnsym's Digraph, even with graphviz
    work = tmp_path / "out"
    work.mkdir()
    pic = work / "net.svg"
    pic.write_bytes(OLD)
    d = viz.plot_network(_mlp(), shape={"data": (1, 4)})
    with pytest.raises(viz.RenderError):
        d.render(pic)
    assert pic.read_bytes() == OLD
    assert _listing(work) == ["net.dot", "net.svg"]


# ---------------------------------------------------------------------------------------------
# .params element counts


def _params_file(record: bytes) -> bytes:
    return struct.pack("<QQQ", ndio.LIST_MAGIC, 0, 1) + record + struct.pack("<Q", 0)


def _dense_v2(shape, flag=0):
    dims = struct.pack(f"<i{len(shape)}q", len(shape), *shape)
    return struct.pack("<Ii", ndio.V2_MAGIC, 0) + dims + struct.pack("<iii", 1, 0, flag)


@pytest.mark.parametrize(
    "record",
    [
        _dense_v2((2**40, 2**20), flag=1),  # 2**60 float64: 2**63 bytes overflow int64
        _dense_v2((2**62, 4)),
        _dense_v2((0, 2**62, 2**62)),  # zero elements, but the other dims overflow
        _dense_v2((2**63 - 1, 2**63 - 1)),
        _dense_v2((2**31, 2**31, 2**2)),
        # V1 (int64 dims) and V0 (uint32 dims) legacy records
        struct.pack("<I", ndio.V1_MAGIC) + struct.pack("<i2q", 2, 2**40, 2**30)
        + struct.pack("<iii", 1, 0, 0),
        struct.pack("<I3I", 3, 2**32 - 1, 2**32 - 1, 2**32 - 1) + struct.pack("<iii", 1, 0, 0),
        # a row_sparse record whose storage shape overflows
        struct.pack("<Ii", ndio.V2_MAGIC, 1) + struct.pack("<i2q", 2, 2**62, 2**62)
        + struct.pack("<i2q", 2, 2**62, 2**62) + struct.pack("<iii", 1, 0, 0)
        + struct.pack("<i", 6) + struct.pack("<iq", 1, 2**62),
    ],
)
def test_params_element_count_overflowing_int64(record):
    with pytest.raises(FileFormatError, match=r"too large|do not fit"):
        mx.nd.load_frombuffer(_params_file(record))


def test_params_overflow_file(tmp_path):
    p = tmp_path / "huge.params"
    p.write_bytes(_params_file(_dense_v2((2**40, 2**20), flag=1)))
    with pytest.raises(FileFormatError, match=r"huge\.params"):
        mx.nd.load(p)
