"""The checked-in sym/nd stubs are what the registry gives now (CI fails when an operator was
added or changed and the stubs were not regenerated)."""

from __future__ import annotations

import ast

import pytest

from nnsym.devtools import stubs
from nnsym.ir.opdef import all_names


@pytest.fixture(scope="module")
def files():
    return stubs.render()


def test_checked_in_stubs_match_the_registry(files):
    bad = [str(p.relative_to(stubs.ROOT.parent)) for p in stubs.stale(files)]
    assert not bad, f"stubs out of date: {bad}; regenerate them with: {stubs.COMMAND}"


def test_stub_names_every_operator_with_its_parameters(files):
    tree = ast.parse(files[stubs.ROOT / "symbol" / "__init__.pyi"])
    defs = {d.name: d for d in tree.body if isinstance(d, ast.FunctionDef)}
    assert set(all_names()) <= set(defs)
    args = defs["FullyConnected"].args
    positional = [a.arg for a in args.args]
    assert positional[:4] == ["data", "weight", "bias", "num_hidden"]  # MXNet's order
    defaults = dict(zip(positional[-len(args.defaults):], args.defaults))
    assert ast.literal_eval(defaults["no_bias"]) is False
    assert ast.literal_eval(defaults["flatten"]) is True
    assert ast.unparse(args.args[4].annotation) == "bool"
    assert {a.arg for a in args.kwonlyargs} >= {"name", "attr", "lr_mult"}


def test_stub_types_follow_the_param_specs():
    from nnsym.ir.params import FieldSpec

    def spec(base: str, optional: bool = False, choices=None) -> FieldSpec:
        return FieldSpec("p", base, optional, False, None, "", None, None, choices)

    assert stubs.param_type(spec("int", optional=True)) == "int | None"
    assert stubs.param_type(spec("tuple")) == "int | _abc.Sequence[int]"
    assert stubs.param_type(spec("str", choices=("a", "b"))) == "_t.Literal['a', 'b'] | str"
    assert stubs.literal(float("inf")) == "..."
    assert stubs.literal((1, None)) == "(1, None)"


def test_check_mode_names_the_command(tmp_path, monkeypatch, capsys):
    target = tmp_path / "x.pyi"
    monkeypatch.setattr(stubs, "render", lambda: {target: "def f() -> int: ...\n"})
    monkeypatch.setattr(stubs, "ROOT", tmp_path / "pkg")
    assert stubs.main(["--check"]) == 1
    assert stubs.COMMAND in capsys.readouterr().out
    assert stubs.main([]) == 0
    assert target.read_text() == "def f() -> int: ...\n"
    assert stubs.main(["--check"]) == 0


def test_package_is_marked_typed():
    """PEP 561: without py.typed, type checkers ignore the installed package."""
    assert (stubs.ROOT / "py.typed").is_file()
    pyproject = (stubs.ROOT.parent / "pyproject.toml").read_text()
    # package data: setuptools before 69 (the build needs >= 68) ships neither by itself
    assert '"py.typed"' in pyproject and '"**/*.pyi"' in pyproject
