"""Component options: dataclasses validated from user input.

Components declare their options as a dataclass. User input arrives as strings (``--model_args
scorer=length,prefer=shorter``) or as JSON values; :func:`parse_options` coerces each value to the
field's type, rejects unknown names (with close-match suggestions) and missing required fields.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import types
import typing
from collections.abc import Mapping
from typing import Any, Literal, TypeVar, Union, get_args, get_origin

from prbench.errors import PrbenchUserError

T = TypeVar("T")

_TRUE = {"true", "1", "yes", "on", "y"}
_FALSE = {"false", "0", "no", "off", "n"}


class OptionsError(PrbenchUserError, ValueError):
    """An option given to a component is unknown, missing or of the wrong type."""


#: the largest file an option may name (a prompt, a template, a references file): 32 MiB
OPTION_FILE_LIMIT = 32 * 1024 * 1024


#: folders whose files the kernel makes up on reading (never an option file)
_KERNEL_FOLDERS = ("/proc", "/sys", "/dev")


def read_option_file(path: str, option: str, *, limit: int = OPTION_FILE_LIMIT) -> str:
    """The UTF-8 text of a file named by an option (``user_prompt_file=``, ``chat_template=``).

    Every option that names a file to read goes through here: the path must be a regular file
    (a FIFO would block forever, ``/dev/zero`` never ends, a folder has no text) of at most
    ``limit`` bytes, checked before it is opened; it must not live under ``/proc``, ``/sys`` or
    ``/dev`` (their "regular" files are made up by the kernel as they are read:
    ``/proc/self/environ`` would send the environment, secrets included, wherever the text
    goes); and what is read must have the size the file system reported (a kernel file reports
    0 bytes and then yields text). The error says which of these rules refused the file.

    Args:
        path: the file (``~`` is expanded).
        option: the option's name, shown in the error.
        limit: the size cap in bytes.

    Raises:
        OptionsError: missing, not a regular file, larger than ``limit``, unreadable or not
            UTF-8; one line naming the option and the file.
    """
    import os
    import stat
    from pathlib import Path

    file = Path(path).expanduser()
    where = f"{option} {path}"
    try:
        info = file.stat()
    except OSError as exc:
        raise OptionsError(f"{where}: cannot read it ({exc.strerror or exc})") from None
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
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise OptionsError(
            f"{where}: not UTF-8 text (byte {exc.start}: {data[exc.start:exc.end]!r})"
        ) from None


def suggest(name: str, choices: typing.Iterable[str]) -> str:
    """Return a ``" (did you mean 'x'?)"`` hint for a misspelt name, or ``""``."""
    close = difflib.get_close_matches(name, list(choices), n=3, cutoff=0.6)
    if not close:
        return ""
    return " (did you mean " + " or ".join(repr(c) for c in close) + "?)"


def _coerce(value: Any, tp: Any, where: str) -> Any:
    origin = get_origin(tp)
    if tp is Any:
        return value
    if origin in (Union, types.UnionType):
        args = get_args(tp)
        is_null = value is None or (
            isinstance(value, str) and value.lower() in {"none", "null", ""}
        )
        if is_null and type(None) in args:
            return None
        errors = []
        for arg in args:
            if arg is type(None):
                continue
            try:
                return _coerce(value, arg, where)
            except OptionsError as exc:
                errors.append(str(exc))
        raise OptionsError(errors[0] if errors else f"{where}: invalid value {value!r}")
    if origin is Literal:
        allowed = get_args(tp)
        for choice in allowed:
            if value == choice or (isinstance(value, str) and str(choice) == value):
                return choice
        raise OptionsError(
            f"{where}: {value!r} is not one of {', '.join(repr(a) for a in allowed)}"
            + suggest(str(value), [str(a) for a in allowed])
        )
    if tp is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
            return value.strip().lower() in _TRUE
        if isinstance(value, int) and value in (0, 1):
            return bool(value)
        raise OptionsError(f"{where}: expected true/false, got {value!r}")
    if tp is int:
        if isinstance(value, bool):
            raise OptionsError(f"{where}: expected an integer, got {value!r}")
        if isinstance(value, int):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(value, str):
            try:
                return int(value.strip())
            except ValueError:
                pass
        raise OptionsError(f"{where}: expected an integer, got {value!r}")
    if tp is float:
        if isinstance(value, bool):
            raise OptionsError(f"{where}: expected a number, got {value!r}")
        if isinstance(value, int | float):
            return float(value)
        if isinstance(value, str):
            try:
                return float(value.strip())
            except ValueError:
                pass
        raise OptionsError(f"{where}: expected a number, got {value!r}")
    if tp is str:
        if isinstance(value, str):
            return value
        if isinstance(value, int | float) and not isinstance(value, bool):
            return str(value)
        raise OptionsError(f"{where}: expected a string, got {value!r}")
    if origin in (list, tuple) or tp in (list, tuple):
        if isinstance(value, str):
            text = value.strip()
            if text.startswith("["):
                try:
                    value = json.loads(text)
                except json.JSONDecodeError as exc:
                    raise OptionsError(f"{where}: invalid JSON list {value!r}: {exc}") from exc
            else:
                value = [v for v in text.replace(";", "|").split("|") if v] if text else []
        if not isinstance(value, list | tuple):
            raise OptionsError(f"{where}: expected a list, got {value!r}")
        args = get_args(tp)
        item_tp = args[0] if args else Any
        items = [_coerce(v, item_tp, f"{where}[{i}]") for i, v in enumerate(value)]
        return tuple(items) if (origin is tuple or tp is tuple) else items
    if origin is dict or tp is dict:
        return as_mapping(value, where)
    return value


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
    fields = option_fields(cls)
    known = {f.name for f in fields}
    unknown = [k for k in raw if k not in known]
    if unknown:
        key = unknown[0]
        listing = ", ".join(sorted(known)) or "none"
        raise OptionsError(
            f"{component}: unknown option {key!r}{suggest(key, known)}; its options are: {listing}"
        )
    if cls is None:
        return None
    hints = typing.get_type_hints(cls)
    values: dict[str, Any] = {}
    for f in fields:
        if f.name in raw:
            values[f.name] = _coerce(raw[f.name], hints[f.name], f"{component}: option {f.name!r}")
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise OptionsError(f"{component}: missing required option {f.name!r}")
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
    """One row per option: name, type, default and help (from ``field(metadata={"help": ...})``)."""
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
    """``text`` split at its commas, except those inside a JSON value (``k={"a": 1, "b": 2}``).

    A value that starts with ``{`` or ``[`` runs to its closing bracket; one that never closes
    is split at every comma, as any other value.
    """
    pieces = text.split(",")
    items: list[str] = []
    i = 0
    while i < len(pieces):
        item = pieces[i]
        value = item.partition("=")[2].lstrip()
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
