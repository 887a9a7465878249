"""The factory contract checked at registration: ``factory(options)`` or ``factory()``."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from prbench.factory_check import callable_problem, factory_problem, string_problem

SOURCE = '''
import dataclasses

def takes_one(options): ...
def takes_none(): ...
def optional(options=None): ...
def star(*args): ...
def two(options, extra): ...
def kw_only(options, *, device): ...

class WithInit:
    def __init__(self, options):
        self.options = options

class NoInit:
    pass

class Inherits(WithInit):
    pass

@dataclasses.dataclass
class Decorated:
    x: int = 1
'''


@pytest.fixture
def module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    (tmp_path / "fc_probe_mod.py").write_text(SOURCE)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield "fc_probe_mod"
    sys.modules.pop("fc_probe_mod", None)


@pytest.mark.parametrize(
    ("attr", "with_options", "without_options"),
    [
        ("takes_one", None, "requires an argument"),
        ("takes_none", "takes no argument", None),
        ("optional", None, None),
        ("star", None, None),
        ("two", "2 required arguments", "requires an argument"),
        ("kw_only", "2 required arguments", "requires an argument"),
        ("WithInit", None, "requires an argument"),
        ("NoInit", "takes no argument", None),
    ],
)
def test_source_and_callable_give_the_same_verdict(
    module: str, attr: str, with_options: str | None, without_options: str | None
) -> None:
    import importlib

    target = f"{module}:{attr}"
    for takes_options, expected in ((True, with_options), (False, without_options)):
        from_source = string_problem(target, takes_options=takes_options)
        assert (from_source is None) == (expected is None), (attr, takes_options, from_source)
        if expected is not None:
            assert expected in from_source
    assert module not in sys.modules  # the source was read, never imported
    obj = getattr(importlib.import_module(module), attr)
    for takes_options, expected in ((True, with_options), (False, without_options)):
        from_callable = callable_problem(obj, takes_options=takes_options)
        assert (from_callable is None) == (expected is None), (attr, takes_options)


def test_undecidable_from_source_is_left_to_build_time(module: str) -> None:
    assert string_problem(f"{module}:Inherits", takes_options=False) is None
    assert string_problem(f"{module}:Decorated", takes_options=True) is None
    assert module not in sys.modules


def test_a_module_that_cannot_be_found_is_reported_at_registration() -> None:
    """A factory string naming a module nobody can import is found when the plugin loads (it
    was a ModuleNotFoundError when the scorer was built, after the data loaded)."""
    for target, missing in (("no_such_module_xyz:Thing", "no_such_module_xyz"),
                            ("no_such_pkg_xyz.sub:Thing", "no_such_pkg_xyz"),
                            ("prbench.no_such_module_xyz:Thing", "prbench.no_such_module_xyz")):
        problem = string_problem(target, takes_options=True)
        assert problem is not None and f"(no module named {missing!r})" in problem, problem
        assert problem.startswith(f"has the factory {target!r}, whose module cannot be imported")


def test_a_factory_that_is_neither_callable_nor_a_string() -> None:
    problem = factory_problem(42, takes_options=False)
    assert problem == "has a factory that is neither callable nor a 'module:attribute' string: 42"
