"""Check a component factory's call signature against its registration, without building it.

The contract is one way: a component registered with ``options=<dataclass>`` is built as
``factory(options)``; one registered without ``options=`` is built as ``factory()``. A factory that
cannot be called that way is reported when the plugin registers it (``prbench plugins`` shows the
plugin as ``partial`` with the component's name), not as a ``TypeError`` after the data loaded.

Factories given as ``"module:attribute"`` strings stay lazy: their module is read as text and its
syntax tree inspected, never imported (a reward model's module imports torch). Where the text
cannot decide (an inherited or decorated ``__init__``, a module without source), the check is left
to build time, where :func:`call_problem` gives the same message.
"""

from __future__ import annotations

import ast
import functools
import importlib.util
import inspect
from collections.abc import Callable
from typing import Any


def _arity_problem(required: int, positional: int | None, *, takes_options: bool) -> str | None:
    """A problem text from counts of positional parameters (``positional=None``: unbounded)."""
    if takes_options:
        if positional is not None and positional < 1:
            return (
                "is registered with options= but its factory takes no argument; it is built as "
                "factory(options): add an `options` parameter"
            )
        if required > 1:
            return (
                f"has a factory with {required} required arguments; it is built as "
                "factory(options) with exactly one"
            )
        return None
    if required > 0:
        return (
            "is registered without options= but its factory requires an argument; it is built "
            "as factory(): register it with options=<dataclass> (it then gets the options "
            "instance) or give the parameter a default"
        )
    return None


def callable_problem(factory: Callable[..., Any], *, takes_options: bool) -> str | None:
    """The signature problem of a callable factory, or ``None`` when it fits (or is unknowable)."""
    try:
        signature = inspect.signature(factory)
    except (TypeError, ValueError):  # some builtins have no signature: decided at build time
        return None
    required = 0
    positional: int | None = 0
    for param in signature.parameters.values():
        if param.kind is param.VAR_POSITIONAL:
            positional = None
        elif param.kind in (param.POSITIONAL_ONLY, param.POSITIONAL_OR_KEYWORD):
            if positional is not None:
                positional += 1
            if param.default is param.empty:
                required += 1
        elif param.kind is param.KEYWORD_ONLY and param.default is param.empty:
            required += 1  # can never be filled by factory() or factory(options)
    return _arity_problem(required, positional, takes_options=takes_options)


def _counts(args: ast.arguments, *, drop_self: bool) -> tuple[int, int | None]:
    params = [*args.posonlyargs, *args.args]
    if drop_self and params:
        params = params[1:]
    with_default = min(len(args.defaults), len(params))
    required = len(params) - with_default
    required += sum(1 for d in args.kw_defaults if d is None)  # keyword-only without default
    return required, (None if args.vararg is not None else len(params))


@functools.lru_cache(maxsize=128)
def _module_tree(module_name: str) -> ast.Module | None:
    try:
        spec = importlib.util.find_spec(module_name)
    except (ImportError, ValueError):  # a missing parent package: reported at build time
        return None
    origin = getattr(spec, "origin", None) if spec is not None else None
    if not origin or not str(origin).endswith(".py"):
        return None
    try:
        with open(origin, encoding="utf-8") as fh:
            return ast.parse(fh.read(), filename=origin)
    except (OSError, SyntaxError, ValueError):
        return None


def _missing_module(module_name: str) -> str | None:
    """Why ``module_name`` cannot be imported (found without importing it), or ``None``.

    Only the module's parent packages run (as any import of it would run them); the module
    itself is not executed, so a factory module that imports torch stays unimported.
    """
    try:
        spec = importlib.util.find_spec(module_name)
    except ModuleNotFoundError as exc:  # a parent package is missing
        return f"no module named {exc.name or module_name!r}"
    except (ImportError, ValueError):
        return None  # a parent package that fails on import: reported at build time
    return None if spec is not None else f"no module named {module_name!r}"


def string_problem(target: str, *, takes_options: bool) -> str | None:
    """The problem of a ``"module:attribute"`` factory, found without importing its module.

    A module that cannot be found, or a signature that does not fit (read from the module's
    source text).
    """
    module_name, _, attr = target.partition(":")
    if not module_name or not attr:
        return None
    missing = _missing_module(module_name)
    if missing:
        return (f"has the factory {target!r}, whose module cannot be imported ({missing}); "
                "install the plugin's package (pip install -e FOLDER) or load its file from "
                "inside its package folder (--plugin PACKAGE/plugin.py)")
    if "." in attr:
        return None
    tree = _module_tree(module_name)
    if tree is None:
        return None
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == attr:
            if node.decorator_list:
                return None
            required, positional = _counts(node.args, drop_self=False)
            return _arity_problem(required, positional, takes_options=takes_options)
        if isinstance(node, ast.ClassDef) and node.name == attr:
            if node.decorator_list:
                return None  # e.g. a dataclass: its __init__ is generated
            init = next(
                (n for n in node.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"),
                None,
            )
            if init is None:
                if node.bases or node.keywords:
                    return None  # inherited __init__: decided at build time
                required, positional = 0, 0
            else:
                required, positional = _counts(init.args, drop_self=True)
            return _arity_problem(required, positional, takes_options=takes_options)
    return None


def factory_problem(factory: Any, *, takes_options: bool) -> str | None:
    """The signature problem of a factory given as a callable or a ``"module:attribute"`` string.

    Args:
        factory: what the plugin passed to ``register``.
        takes_options: whether it was registered with ``options=``.

    Returns:
        A sentence fragment (``"is registered with options= but ..."``) to follow the
        component's name, or ``None`` when the factory fits or cannot be checked yet.
    """
    if callable(factory):
        return callable_problem(factory, takes_options=takes_options)
    if isinstance(factory, str):
        return string_problem(factory, takes_options=takes_options)
    return f"has a factory that is neither callable nor a 'module:attribute' string: {factory!r}"


__all__ = ["callable_problem", "factory_problem", "string_problem"]
