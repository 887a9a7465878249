"""Component options: dataclasses validated from user input.

Components declare their options as a dataclass. User input arrives as strings (``--model_args
scorer=length,prefer=shorter``) or as JSON values; :func:`parse_options` coerces each value to the
field's type, rejects unknown names (with close-match suggestions) and missing required fields.

The checking is pydantic's: each options dataclass gets a pydantic model of its input (built once
and cached; strict types, ``extra="forbid"``), and its first error is written as prbench's one
line (:mod:`prbench.typed_input`). Two things stay prbench's own. The option *text grammar*
(``yes``/``no`` for a flag, ``a|b`` for a list, ``none`` for nothing, a JSON object for a
mapping) is the ``--model_args`` language, not a type rule; pydantic's lax mode reads text
differently (``t`` as true, ``3.0`` as an integer, ``True`` as 1), so each type's grammar runs
before pydantic's strict check (:func:`_from_text`). And the dataclass itself stays the options
object: its ``__post_init__`` rules and ``check_given`` (an option another option fixes) are
semantic checks a component writes, and plugins, manifests and fingerprints read its fields
(:func:`options_to_dict` is unchanged, so cache keys are too).
"""

from __future__ import annotations

import contextlib
import dataclasses
import difflib
import functools
import json
import types
import typing
from collections.abc import Callable, Mapping
from typing import Annotated, Any, Literal, TypeVar, Union, get_args, get_origin

from prbench.errors import PrbenchUserError
from prbench.typed_input import EXPECTED, STRICT, first_error, place

T = TypeVar("T")

_TRUE = {"true", "1", "yes", "on", "y"}
_FALSE = {"false", "0", "no", "off", "n"}


class OptionsError(PrbenchUserError, ValueError):
    """An option given to a component is unknown, missing or of the wrong type."""


#: the largest file an option may name (a prompt, a template, a references file): 32 MiB
OPTION_FILE_LIMIT = 32 * 1024 * 1024


#: folders whose files the kernel makes up on reading (never an option file)
_KERNEL_FOLDERS = ("/proc", "/sys", "/dev")


def check_option_file(path: str, option: str, *, limit: int = OPTION_FILE_LIMIT
                      ) -> tuple[Any, Any]:
    """Check, without opening it, that a file an option names may be read as option text.

    The rules of :func:`read_option_file` that need no read: the path exists, is a regular
    file (not a FIFO, device, socket or folder), lives outside ``/proc``, ``/sys`` and
    ``/dev``, and is at most ``limit`` bytes. Option dataclasses call it when the options are
    read, so a bad file is refused before any model or lm-eval set-up, not when it is read.

    Returns:
        The file's ``os.stat_result`` and its ``pathlib.Path`` (``~`` expanded).

    Raises:
        OptionsError: one line naming the option, the file and the rule.
    """
    import stat
    from pathlib import Path

    from prbench.issues import shown_path

    file = Path(path).expanduser()
    where = f"{option} {shown_path(path)}"  # a 40,000-character path is cut, not repeated
    try:
        info = file.stat()
    except (OSError, ValueError) as exc:  # ValueError: a NUL byte in the path
        why = getattr(exc, "strerror", None) or exc
        raise OptionsError(f"{where}: cannot read it ({why})") from None
    if not stat.S_ISREG(info.st_mode):
        kind = ("a folder" if stat.S_ISDIR(info.st_mode) else "a FIFO (named pipe)"
                if stat.S_ISFIFO(info.st_mode) else "a device" if stat.S_ISCHR(info.st_mode)
                or stat.S_ISBLK(info.st_mode) else "a socket" if stat.S_ISSOCK(info.st_mode)
                else "not a regular file")
        raise OptionsError(f"{where}: is {kind}, not a regular file; name a text file")
    try:
        real = file.resolve()
    except (OSError, RuntimeError) as exc:
        raise OptionsError(f"{where}: cannot read it ({exc})") from None
    for root in _KERNEL_FOLDERS:
        if real == Path(root) or Path(root) in real.parents:
            shown = "" if str(real) == str(file) else f" (it resolves to {real})"
            raise OptionsError(
                f"{where}: lives under {root}{shown}, whose files the kernel makes up as they "
                "are read (rule: no option file under /proc, /sys or /dev); name a text file"
            )
    if info.st_size > limit:
        raise OptionsError(
            f"{where}: the file is {info.st_size:,} bytes, more than the {limit:,} an option "
            "file may have; is it the right file?"
        )
    return info, file


def read_option_file(path: str, option: str, *, limit: int = OPTION_FILE_LIMIT) -> str:
    """The UTF-8 text of a file named by an option (``user_prompt_file=``, ``chat_template=``).

    Every option that names a file to read goes through here: the path must be a regular file
    (a FIFO would block forever, ``/dev/zero`` never ends, a folder has no text) of at most
    ``limit`` bytes, checked before it is opened; it must not live under ``/proc``, ``/sys`` or
    ``/dev`` (their "regular" files are made up by the kernel as they are read:
    ``/proc/self/environ`` would send the environment, secrets included, wherever the text
    goes); and what is read must have the size the file system reported (a kernel file reports
    0 bytes and then yields text). The error says which of these rules refused the file. A
    UTF-8 byte-order mark at the start is dropped (a warning says so, once per option and file):
    it is no part of a prompt or template and would otherwise reach the model as text.

    Args:
        path: the file (``~`` is expanded).
        option: the option's name, shown in the error.
        limit: the size cap in bytes.

    Raises:
        OptionsError: missing, not a regular file, larger than ``limit``, unreadable or not
            UTF-8; one line naming the option and the file.
    """
    import os

    from prbench.issues import shown_path

    info, file = check_option_file(path, option, limit=limit)
    where = f"{option} {shown_path(path)}"
    try:
        fd = os.open(file, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        with os.fdopen(fd, "rb") as handle:
            data = handle.read(limit + 1)
    except OSError as exc:
        raise OptionsError(f"{where}: cannot read it ({exc.strerror or exc})") from None
    if len(data) > limit:  # grew since the check
        raise OptionsError(f"{where}: the file is more than {limit:,} bytes")
    if len(data) != info.st_size:
        raise OptionsError(
            f"{where}: {len(data):,} bytes were read where the file system reports "
            f"{info.st_size:,} (rule: an option file's text is its stated size; a file being "
            "written, or one made up by the kernel, is refused); name a finished text file"
        )
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise OptionsError(
            f"{where}: not UTF-8 text (byte {exc.start}: {data[exc.start:exc.end]!r})"
        ) from None
    if text.startswith("\ufeff"):  # an editor's byte-order mark: no text of the option's
        text = text[1:]
        if (option, str(file)) not in _BOM_WARNED:
            _BOM_WARNED.add((option, str(file)))
            import logging

            logging.getLogger(__name__).warning(
                "%s: the file starts with a UTF-8 byte-order mark; it is dropped, never sent on "
                "(save the file without one to silence this warning)", where)
    return text


#: (option, file) pairs whose byte-order mark was warned about (once per process)
_BOM_WARNED: set[tuple[str, str]] = set()


def suggest(name: str, choices: typing.Iterable[str]) -> str:
    """Return a ``" (did you mean 'x'?)"`` hint for a misspelt name, or ``""``."""
    close = difflib.get_close_matches(name, list(choices), n=3, cutoff=0.6)
    if not close:
        return ""
    return " (did you mean " + " or ".join(repr(c) for c in close) + "?)"


def _from_text(kind: str) -> Callable[[Any], Any]:
    """The option text grammar of one type: what a text (or JSON) value stands for.

    What it cannot read it hands on unchanged, and pydantic's strict check of the type refuses
    it, so each rule is written once: here what a text means, in the model what a type is.
    """

    def to_bool(value: Any) -> Any:
        if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
            return value.strip().lower() in _TRUE
        if isinstance(value, int) and not isinstance(value, bool) and value in (0, 1):
            return bool(value)
        return value

    def to_int(value: Any) -> Any:
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(value, str):
            with contextlib.suppress(ValueError):
                return int(value.strip())
        return value

    def to_float(value: Any) -> Any:
        if isinstance(value, int) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, str):
            with contextlib.suppress(ValueError):
                return float(value.strip())
        return value

    def to_str(value: Any) -> Any:
        number = isinstance(value, int | float) and not isinstance(value, bool)
        return str(value) if number else value

    def to_list(value: Any) -> Any:
        if isinstance(value, str):
            text = value.strip()
            if text.startswith("["):
                try:
                    return json.loads(text)
                except json.JSONDecodeError as exc:
                    raise ValueError(f"invalid JSON list {value!r}: {exc}") from exc
            return [v for v in text.replace(";", "|").split("|") if v] if text else []
        return list(value) if isinstance(value, tuple) else value

    def to_tuple(value: Any) -> Any:
        value = to_list(value)
        return tuple(value) if isinstance(value, list) else value

    def to_dict(value: Any) -> Any:
        if isinstance(value, str):
            try:
                return json.loads(value)
            except json.JSONDecodeError as exc:
                raise ValueError(f"invalid JSON object {value!r}: {exc}") from exc
        return value

    def to_null(value: Any) -> Any:
        null = isinstance(value, str) and value.lower() in {"none", "null", ""}
        return None if null else value

    return {"bool": to_bool, "int": to_int, "float": to_float, "str": to_str, "list": to_list,
            "tuple": to_tuple, "dict": to_dict, "null": to_null}[kind]


def _typed(tp: Any, choices: list[Any]) -> Any:
    """``tp`` as pydantic checks it: the text grammar (:func:`_from_text`), then the strict type.

    Every choice of a ``Literal`` met on the way is added to ``choices`` (for the error line).
    A type prbench has no grammar for (``Any``, a class) takes the value as it is.
    """
    from pydantic import BeforeValidator, Field

    origin = get_origin(tp)
    if origin in (Union, types.UnionType):
        args = get_args(tp)
        arms = tuple(_typed(a, choices) for a in args if a is not type(None))
        left_first = Field(union_mode="left_to_right")  # the first type that takes the value
        inner = Annotated[Union[arms], left_first] if len(arms) > 1 else arms[0]  # noqa: UP007
        if type(None) not in args:
            return inner
        return Annotated[Union[inner, None], BeforeValidator(_from_text("null"))]  # noqa: UP007
    if origin is Literal:
        allowed = get_args(tp)
        choices.extend(allowed)
        by_text = {str(a): a for a in allowed}
        return Annotated[tp, BeforeValidator(lambda v: by_text.get(v, v) if isinstance(v, str)
                                             else v)]
    if origin in (list, tuple) or tp in (list, tuple):
        args = get_args(tp)
        item = _typed(args[0], choices) if args else Any
        kind = "tuple" if (origin is tuple or tp is tuple) else "list"
        shape = tuple[item, ...] if kind == "tuple" else list[item]  # type: ignore[valid-type]
        return Annotated[shape, BeforeValidator(_from_text(kind))]
    if origin is dict or tp is dict:
        return Annotated[dict, BeforeValidator(_from_text("dict"))]
    if tp in (bool, int, float, str):
        return Annotated[tp, BeforeValidator(_from_text(tp.__name__))]
    return Any


@functools.cache
def _input_model(cls: type) -> tuple[Any, dict[str, tuple[Any, ...]]]:
    """The pydantic model of ``cls``'s option input, and each option's ``Literal`` choices.

    The model's fields are named ``f0``, ``f1``, ... with the option names as aliases, so an
    option may have any name (``json``, ``model_config``) without meeting pydantic's own.
    Only what was given is read back (``model_fields_set``): the dataclass fills in defaults.
    """
    from pydantic import ConfigDict, Field, create_model

    hints = typing.get_type_hints(cls)
    fields: dict[str, Any] = {}
    choices: dict[str, tuple[Any, ...]] = {}
    for i, f in enumerate(option_fields(cls)):
        found: list[Any] = []
        required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        fields[f"f{i}"] = (_typed(hints[f.name], found),
                           Field(... if required else None, alias=f.name))
        choices[f.name] = tuple(found)
    config = ConfigDict(**STRICT, arbitrary_types_allowed=True)  # type: ignore[typeddict-item]
    model = create_model(f"{cls.__name__}Input", __config__=config, **fields)
    return model, choices


def _option_error(error: Mapping[str, Any], component: str, known: set[str],
                  choices: Mapping[str, tuple[Any, ...]]) -> OptionsError:
    """One pydantic error as prbench's line: unknown, missing, or the wrong type of value."""
    name, value = str(error["loc"][0]), error.get("input")
    if error["type"] == "extra_forbidden":
        listing = ", ".join(sorted(known)) or "none"
        return OptionsError(f"{component}: unknown option {name!r}{suggest(name, known)}; "
                            f"its options are: {listing}")
    if error["type"] == "missing":
        return OptionsError(f"{component}: missing required option {name!r}")
    at = f"{component}: option {name!r}{place(error['loc'][1:], indices_only=True)}"
    if error["type"] == "literal_error":
        allowed = choices.get(name, ())
        return OptionsError(f"{at}: {value!r} is not one of {', '.join(map(repr, allowed))}"
                            + suggest(str(value), [str(a) for a in allowed]))
    if error["type"] == "dict_type":
        return OptionsError(f"{at}: expected a JSON object (a mapping), got {value!r}")
    if error["type"] in EXPECTED:
        return OptionsError(f"{at}: expected {EXPECTED[error['type']]}, got {value!r}")
    if error["type"] == "value_error":  # the text grammar's own line (a JSON list that is not)
        return OptionsError(f"{at}: {error['ctx']['error']}")
    return OptionsError(f"{at}: {error['msg']}")


def as_mapping(value: Any, where: str) -> dict[str, Any]:
    """A mapping given as a dict or as a JSON object string (``--metadata`` / ``model_args``).

    Raises:
        OptionsError: invalid JSON, or JSON that is not an object; the message starts with
            ``where``.
    """
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise OptionsError(f"{where}: invalid JSON object {value!r}: {exc}") from exc
    if not isinstance(value, dict):
        raise OptionsError(f"{where}: expected a JSON object (a mapping), got {value!r}")
    return dict(value)


def option_fields(cls: type | None) -> list[dataclasses.Field[Any]]:
    """The option fields of an options dataclass (empty for ``None``).

    Keyword-only fields (those of a shared base such as
    :class:`~prbench.backends.chat_options.ChatRenderOptions`) come after the others, as in the
    dataclass's ``__init__``: a scorer's own options are listed first.
    """
    if cls is None:
        return []
    fields = [f for f in dataclasses.fields(cls) if f.init]
    return sorted(fields, key=lambda f: f.kw_only is True)


#: the bound keys a numeric option's ``field(metadata=...)`` may give, and how each reads
_BOUNDS = {"ge": ">=", "gt": ">", "le": "<=", "lt": "<"}


def option_range(f: dataclasses.Field[Any]) -> str:
    """A numeric option's documented range as text (``">= 1"``, ``"> 0, <= 1"``), or ``""``.

    The bounds are the field's ``metadata`` keys ``ge``, ``gt``, ``le``, ``lt`` (inclusive or
    strict); :func:`parse_options` checks them when the options are read, and ``prbench
    scorers --options`` shows them.
    """
    return ", ".join(f"{sign} {f.metadata[key]:g}" if isinstance(f.metadata[key], float)
                     else f"{sign} {f.metadata[key]}"
                     for key, sign in _BOUNDS.items() if f.metadata.get(key) is not None)


def _check_bounds(cls: type, values: Mapping[str, Any], component: str) -> None:
    """Refuse a given value outside its option's ``ge``/``gt``/``le``/``lt`` bounds."""
    import operator

    tests = {"ge": operator.ge, "gt": operator.gt, "le": operator.le, "lt": operator.lt}
    for f in option_fields(cls):
        value = values.get(f.name)
        if f.name not in values or isinstance(value, bool) or not isinstance(value, int | float):
            continue
        for key, test in tests.items():
            bound = f.metadata.get(key)
            if bound is not None and not test(value, bound):
                raise OptionsError(f"{component}: option {f.name!r} must be {option_range(f)}, "
                                   f"got {value!r}")


def parse_options(cls: type[T] | None, raw: Mapping[str, Any], *, component: str) -> T | None:
    """Build an options instance from user input.

    Args:
        cls: the component's options dataclass, or ``None`` for a component without options.
        raw: option names to values (strings are coerced to the declared field types).
        component: the component id, used in error messages.

    Returns:
        The options instance, or ``None`` when ``cls`` is ``None`` and ``raw`` is empty.

    Raises:
        OptionsError: an unknown option (with close matches), a missing required option, or a value
            that cannot be converted to the field's type.
    """
    if cls is None:
        if raw:
            key = next(iter(raw))
            raise OptionsError(f"{component}: unknown option {key!r}; its options are: none")
        return None
    from pydantic import ValidationError

    model, choices = _input_model(cls)
    try:
        given = model.model_validate(dict(raw))
    except ValidationError as exc:
        known = {f.name for f in option_fields(cls)}
        raise _option_error(first_error(exc.errors()), component, known, choices) from None
    values = {info.alias: getattr(given, name) for name, info in type(given).model_fields.items()
              if name in given.model_fields_set}
    _check_bounds(cls, values, component)
    try:
        instance = cls(**values)
        # an options class that must tell a value given from its default (an option another
        # option fixes may not be written with any other value, even the default's)
        check_given = getattr(instance, "check_given", None)
        if callable(check_given):
            check_given(values)
    except (TypeError, ValueError) as exc:
        raise OptionsError(f"{component}: {exc}") from exc
    return instance


def describe_options(cls: type | None) -> list[dict[str, str]]:
    """One row per option: name, type, default, help and range.

    The help is ``field(metadata={"help": ...})``; the range is :func:`option_range` (``""``
    for an option without bounds).
    """
    rows = []
    if cls is None:
        return rows
    hints = typing.get_type_hints(cls)
    for f in option_fields(cls):
        if f.default is not dataclasses.MISSING:
            default = repr(f.default)
        elif f.default_factory is not dataclasses.MISSING:
            default = repr(f.default_factory())
        else:
            default = "(required)"
        tp = hints[f.name]
        type_name = getattr(tp, "__name__", None) if get_origin(tp) is None else None
        rows.append(
            {
                "name": f.name,
                "type": type_name or str(tp).replace("typing.", ""),
                "default": default,
                "help": str(f.metadata.get("help", "")),
                "range": option_range(f),
            }
        )
    return rows


def options_to_dict(options: object | None) -> dict[str, Any]:
    """The options as a JSON-ready dict (for manifests and fingerprints)."""
    if options is None:
        return {}
    return json.loads(json.dumps(dataclasses.asdict(options), default=str))  # type: ignore[call-overload]


def _depth(text: str) -> int:
    """Open ``{``/``[`` minus closed ones in ``text``, outside double-quoted JSON strings."""
    depth, quoted, escaped = 0, False, False
    for ch in text:
        if quoted:
            escaped, quoted = (False, True) if escaped else (ch == "\\", ch != '"')
        elif ch == '"':
            quoted = True
        elif ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
    return depth


def _kv_items(text: str) -> list[str]:
    """``text`` split at its commas, except inside a JSON value or a quoted one.

    ``k={"a": 1, "b": 2}`` and ``k="a, b"`` keep their commas. A value that starts with ``{``
    or ``[`` runs to its closing bracket, a quoted one to its closing quote; one that never
    closes is split at every comma, as any other value.
    """
    pieces = text.split(",")
    items: list[str] = []
    i = 0
    while i < len(pieces):
        item = pieces[i]
        value = item.partition("=")[2].lstrip()
        quote = value[:1] if value[:1] in ("'", '"') else ""
        if quote and not (len(value.rstrip()) > 1 and value.rstrip().endswith(quote)):
            j = i  # a quoted value runs to its closing quote, commas and all
            while j + 1 < len(pieces) and not pieces[j + 1].rstrip().endswith(quote):
                j += 1
            if j + 1 < len(pieces):
                items.append(",".join(pieces[i:j + 2]))
                i = j + 2
                continue
        if value[:1] in ("{", "["):
            j = i
            while _depth(item.partition("=")[2]) > 0 and j + 1 < len(pieces):
                j += 1
                item += "," + pieces[j]
            if _depth(item.partition("=")[2]) == 0:
                items.append(item)
                i = j + 1
                continue
            item = pieces[i]
        items.append(item)
        i += 1
    return items


def parse_kv_string(text: str) -> dict[str, str]:
    """Parse ``"a=1,b=x"`` (lm-eval's ``--model_args`` style) into a dict of strings.

    The one parser of every ``--<role>_args K=V,...`` list. A value written as JSON keeps its
    commas (``profile_builder_options={"k": 5, "model": "minilm"}``).

    Raises:
        OptionsError: an item without ``=``, or a key given twice (the last would silently win).
    """
    out: dict[str, str] = {}
    for item in (p.strip() for p in _kv_items(text)):
        if not item:
            continue
        if "=" not in item:
            raise OptionsError(f"expected key=value, got {item!r} in {text!r}")
        key, value = item.split("=", 1)
        key = key.strip()
        if key in out:
            raise OptionsError(
                f"{key!r} is given twice in {text!r} ({key}={out[key]} and {key}={value.strip()}); "
                "give each option once"
            )
        out[key] = value.strip()
    return out
