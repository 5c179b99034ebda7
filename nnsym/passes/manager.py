"""A small pass manager: passes declare what they require and provide; a pipeline is a list."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from nnsym.errors import NNSymError, PassError, PassOrderError
from nnsym.fileio import write_text
from nnsym.ir.graph import FIELDS, Graph
from nnsym.ir.json import graph_to_json

log = logging.getLogger("nnsym.passes")


@dataclass(frozen=True)
class GraphPass:
    fn: Callable[[Graph], Graph]
    requires: frozenset[str]
    provides: frozenset[str]

    @property
    def name(self) -> str:
        return self.fn.__name__

    def __call__(self, g: Graph) -> Graph:
        return run_passes(g, [self])


def graph_pass(
    requires: Sequence[str] = (), provides: Sequence[str] = ()
) -> Callable[[Callable[[Graph], Graph]], GraphPass]:
    """Declare a pass; the attribute names are checked against ``GraphAttrs`` here, at import."""
    unknown = (set(requires) | set(provides)) - FIELDS
    if unknown:
        raise ValueError(f"unknown graph attributes {sorted(unknown)}; known: {sorted(FIELDS)}")

    def wrap(fn: Callable[[Graph], Graph]) -> GraphPass:
        return GraphPass(fn, frozenset(requires), frozenset(provides))

    return wrap


def run_passes(g: Graph, passes: Sequence[GraphPass], dump_dir: Path | None = None) -> Graph:
    """Run ``passes`` in order; errors say which pass failed after which.

    ``NNSYM_DUMP_PASSES=dir`` writes the inferred JSON after each pass.
    """
    if dump_dir is None and os.environ.get("NNSYM_DUMP_PASSES"):
        dump_dir = Path(os.environ["NNSYM_DUMP_PASSES"])
    done: list[str] = []
    for p in passes:
        missing = p.requires - g.attrs.present()
        if missing:
            raise PassOrderError(f"pass {p.name} needs {sorted(missing)}; ran so far: {done}")
        t0 = time.perf_counter()
        try:
            g = p.fn(g)
        except NNSymError:
            raise  # already names the node
        except Exception as e:
            raise PassError(f"pass {p.name} failed after {done}: {type(e).__name__}: {e}") from e
        log.debug("%s: %.2f ms", p.name, 1e3 * (time.perf_counter() - t0))
        lacking = p.provides - g.attrs.present()
        if lacking:
            raise PassError(f"pass {p.name} did not provide {sorted(lacking)} (after {done})")
        done.append(p.name)
        if dump_dir is not None:
            dump_dir.mkdir(parents=True, exist_ok=True)
            write_text(dump_dir / f"{len(done):02d}_{p.name}.json",
                       graph_to_json(g, inferred=True))
    return g
