"""lm-eval command-line values as the user typed them, and clear errors for bad JSON values.

lm-eval 0.4.13 types every ``--model_args key=value`` value itself (``00123456`` becomes the int
123456, ``1e3`` the float 1000.0) and raises a bare ``ValueError: Invalid JSON`` for a flag value
that starts with ``{`` but is not JSON. prbench reads each option by the type its options
dataclass declares, so it puts the user's text back (:func:`restore_option_text`), and it names
the flag and the position of a JSON error (:func:`json_flag_problem`, checked by ``prbench eval``
before lm-eval parses). Under plain ``lm_eval`` the ``prbench`` model restores the text itself.
lm-eval's ``--use_cache`` (a pickle cache) is refused for the ``prbench`` model
(:func:`check_no_use_cache`): prbench's score cache does that job.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

#: lm-eval flags whose value may be a JSON object (lm-eval raises a bare ValueError on bad JSON)
#: the lm-eval model name of prbench's scorers (``--model prbench``)
MODEL_NAME = "prbench"
JSON_FLAGS = ("--model_args", "-a", "--metadata", "--gen_kwargs")


def running_lm_eval_cli() -> bool:
    """True in a process started as the ``lm_eval`` command (or ``python -m lm_eval``)."""
    first = Path(sys.argv[0]) if sys.argv and sys.argv[0] else None
    if first is None:
        return False
    return first.name in ("lm_eval", "lm-eval") or (
        first.name == "__main__.py" and first.parent.name == "lm_eval"
    )


def json_flag_problem(argv: Sequence[str]) -> str | None:
    """A one-line error for a JSON-object flag value that is not valid JSON, else ``None``.

    lm-eval reads ``--model_args``, ``--metadata`` and ``--gen_kwargs`` as a JSON object when the
    value starts with ``{`` and otherwise raises ``ValueError: Invalid JSON: ...`` without naming
    the flag or the position. The message here names both. A JSON array (``'[1, 2]'``) is
    refused as not an object (lm-eval would call it a malformed ``key=value``).
    """
    args = list(argv)
    for i, arg in enumerate(args):
        flag, eq, value = arg.partition("=")
        if flag not in JSON_FLAGS:
            continue
        if not eq:
            value = args[i + 1] if i + 1 < len(args) else ""
        if value.lstrip().startswith("["):
            try:
                parsed = json.loads(value)
            except json.JSONDecodeError:
                continue  # not JSON: lm-eval's own key=value message applies
            return (
                f"{flag} must be a JSON object ({{\"key\": value, ...}}) or key=value pairs, "
                f"got a JSON {'array' if isinstance(parsed, list) else type(parsed).__name__}: "
                f"{_cut(value)!r}"
            )
        if not value.lstrip().startswith("{"):
            continue
        try:
            json.loads(value)
        except json.JSONDecodeError as exc:
            return (
                f"{flag}: invalid JSON at line {exc.lineno} column {exc.colno} (character "
                f"{exc.pos}): {exc.msg}, in {_cut(value)!r}; JSON needs double quotes around keys "
                "and strings"
            )
    return None


def allow_braces_in_values() -> bool:
    """Let a ``key=value`` flag value hold ``{`` (``--model_args user_format={question}``).

    lm-eval 0.4.13 reads every ``--model_args``/``--metadata``/``--gen_kwargs`` value as JSON
    first and raises ``Invalid JSON`` for any value that is not JSON but holds a ``{`` anywhere,
    so an option whose documented value holds a placeholder (``user_format``,
    ``system_format``) could not be given as ``K=V``. After this, a value that does not itself
    start with ``{`` or ``[`` is ``key=value`` text whatever it holds; one that does is still
    JSON (a bad one is :func:`json_flag_problem`'s error).

    Returns:
        ``True`` if lm-eval's reader was replaced now (``False``: before).
    """
    import lm_eval._cli.utils as cli_utils

    parse = cli_utils.try_parse_json
    if getattr(parse, "_prbench_braces", False):
        return False

    def try_parse_json(value: Any) -> Any:
        if isinstance(value, str) and not value.lstrip().startswith(("{", "[")):
            try:
                return json.loads(value)
            except json.JSONDecodeError:
                return value  # key=value text, braces and all
        return parse(value)

    try_parse_json._prbench_braces = True  # type: ignore[attr-defined]
    cli_utils.try_parse_json = try_parse_json
    return True


def _keys_of(value: str) -> list[str]:
    """The keys of one ``--model_args`` value, in order, repeats kept (JSON or ``k=v,...``)."""
    from lm_eval._cli.utils import split_top_level

    text = value.strip()
    if text.startswith("{"):
        try:
            pairs = json.loads(text, object_pairs_hook=lambda items: items)
        except json.JSONDecodeError:
            return []
        return [str(k) for k, _ in pairs] if isinstance(pairs, list) else []
    return [item.split("=", 1)[0].strip() for item in split_top_level(text) if "=" in item]


def _unclosed(text: str) -> tuple[str, str] | None:
    """``(character, key)`` when a quote or bracket in ``k=v,...`` text never closes, else None.

    lm-eval splits ``--model_args`` on commas outside quotes and brackets, so an apostrophe
    (``user_format=It's {question},pretrained=M``) or a lone ``(`` turns every pair after it
    into part of that value, without a word. This scan follows lm-eval's splitter.
    """
    quote: str | None = None
    depth, opened, start = 0, None, 0
    for i, char in enumerate(text):
        if quote is not None:
            if char == quote:
                quote = None
        elif char in "\"'":
            quote, opened = char, (opened if depth else i)
        elif char in "[({":
            opened = opened if depth else i
            depth += 1
        elif char in "])}":
            depth = max(depth - 1, 0)
        elif char == "," and depth == 0:
            start = i + 1
    if (quote is None and depth == 0) or opened is None:
        return None
    item = text[start:opened]
    return text[opened], item.split("=", 1)[0].strip() if "=" in item else item.strip()


def model_args_problem(argv: Sequence[str], flag: str = "model_args") -> str | None:
    """A one-line error for ``--model_args`` text lm-eval would read otherwise than written.

    Two cases, else ``None``: a key given twice (``model=A,model=B``, or in two ``--model_args``
    values: lm-eval keeps the last value with a log line at most, so a run would be labelled
    with one model and score another); a quote or bracket that never closes in ``k=v`` text
    (lm-eval would swallow every later pair into that value). The raw values are read with
    lm-eval's own parser.
    """
    import lm_eval._cli.utils as cli_utils
    from lm_eval._cli.harness import HarnessCLI

    allow_braces_in_values()
    seen: list[str] = []
    unclosed: list[tuple[str, str]] = []
    action = cli_utils.MergeDictAction
    original = action.__call__

    def record(self: Any, parser: Any, namespace: Any, values: Any, option_string: Any = None
               ) -> None:
        if self.dest == flag and values:
            for value in [values] if isinstance(values, str) else values:
                seen.extend(_keys_of(str(value)))
                if not str(value).strip().startswith("{"):
                    unclosed.extend(filter(None, [_unclosed(str(value))]))
        original(self, parser, namespace, values, option_string)

    import contextlib
    import io

    action.__call__ = record  # type: ignore[method-assign]
    try:
        with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
            HarnessCLI()._parser.parse_args(run_argv(argv))
    except SystemExit:
        pass  # lm-eval's own error comes later
    finally:
        action.__call__ = original  # type: ignore[method-assign]
    for char, key in unclosed:
        other = "'" if char == '"' else '"'
        return (f"--{flag}: the {char} in the value of {key} never closes, so lm-eval would "
                f"read every pair after it as part of {key} without a word; put the whole "
                f"value in {other}quotes{other} ({key}={other}...{other}) or drop the {char}")
    for i, key in enumerate(seen):
        if key in seen[:i]:
            return (f"--{flag}: the key {key!r} is given twice (lm-eval would keep the last "
                    f"value without a word); give {key} once")
    return None


def check_model_args_text(argv: Sequence[str] | None = None) -> None:
    """Refuse ``--model_args`` text lm-eval would misread under plain ``lm_eval`` (see
    :func:`model_args_problem`); nothing is checked outside the ``lm_eval`` command.

    Raises:
        OptionsError: a key is given twice, or a quote or bracket never closes.
    """  # noqa: D205
    from prbench.options import OptionsError

    if argv is None:
        if not running_lm_eval_cli():
            return
        argv = sys.argv[1:]
    problem = model_args_problem(argv)
    if problem:
        raise OptionsError(problem)


def _cut(value: str) -> str:
    return value if len(value) <= 80 else value[:79] + "…"


def option_text(text: str) -> str:
    """A ``key=value`` value as text: stripped, one pair of surrounding quotes removed."""
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    return text


def run_argv(argv: Sequence[str]) -> list[str]:
    """``argv`` as lm-eval's top-level parser takes it: the ``run`` subcommand first, once."""
    args = list(argv)
    return ["run", *(args[1:] if args and args[0] == "run" else args)]


def parse_text(argv: Sequence[str]) -> Any:
    """``argv`` parsed by lm-eval's own ``run`` parser, ``key=value`` values kept as text.

    Returns:
        The namespace, or ``None`` when ``argv`` does not parse (nothing is printed).
    """
    import contextlib
    import io

    import lm_eval._cli.utils as cli_utils
    from lm_eval._cli.harness import HarnessCLI

    allow_braces_in_values()
    typed = cli_utils.handle_cli_value_string
    cli_utils.handle_cli_value_string = option_text
    try:
        with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
            return HarnessCLI()._parser.parse_args(run_argv(argv))
    except SystemExit:
        return None
    finally:
        cli_utils.handle_cli_value_string = typed


def model_args_text(
    argv: Sequence[str], flags: Sequence[str] = ("model_args",)
) -> dict[str, str]:
    """The ``key=value`` values of ``--model_args`` (or other dict flags) as the user typed them.

    lm-eval's parser turns ``revision=00123456`` into the int 123456 and ``kind=1e3`` into the
    float 1000.0 before any model or task sees them. This parses ``argv`` with lm-eval's own
    parser but keeps each ``key=value`` value as text (surrounding quotes removed); values given
    as a JSON object are not included (JSON has its own types). Empty when ``argv`` does not
    parse.

    Args:
        argv: the lm-eval command line.
        flags: the dict flags to read, by their argparse name (``model_args``, ``metadata``); a
            key in two of them keeps the first flag's text.
    """
    ns = parse_text(argv)
    out: dict[str, str] = {}
    for flag in flags:
        given = getattr(ns, flag, None)
        if isinstance(given, dict):
            for key, value in given.items():
                if isinstance(value, str):
                    out.setdefault(str(key), value)
    return out


#: Why prbench refuses lm-eval's ``--use_cache`` (one ``error:`` line).
USE_CACHE_REFUSED = (
    "--use_cache is refused: lm-eval's response cache stores pickles, and reading a tampered "
    "cache file runs its code; prbench's own score cache already keeps every score safely "
    "(SQLite, no pickles; runtime option cache=true by default, cache_path=FILE to choose the "
    "file, e.g. --model_args scorer=length,cache_path=scores.sqlite)"
)


def check_no_use_cache(argv: Sequence[str] | None = None) -> None:
    """Refuse lm-eval's ``--use_cache`` for the ``prbench`` model.

    Args:
        argv: the lm-eval command line (default: this process's, under the ``lm_eval`` command;
            nothing is checked otherwise).

    Raises:
        OptionsError: ``--use_cache`` (or an abbreviation argparse accepts) was given.
    """
    from prbench.options import OptionsError

    if argv is None:
        if not running_lm_eval_cli():
            return
        argv = sys.argv[1:]
    if getattr(parse_text(argv), "use_cache", None):
        raise OptionsError(USE_CACHE_REFUSED)


def check_output_path(argv: Sequence[str] | None = None) -> None:
    """Check plain ``lm_eval``'s ``--output_path`` before any work, as ``prbench eval`` does.

    lm-eval writes its files only after the whole run (and only logs a failed write); a path
    under a file or in a folder that cannot be written is refused here, when the ``prbench``
    model is built. A path ending in ``.json`` names a file whose folder is checked (lm-eval's
    own rule for such a path).

    Args:
        argv: the lm-eval command line (default: this process's, under the ``lm_eval`` command;
            nothing is checked otherwise).

    Raises:
        prbench.outputs.OutputPathError: the location cannot take lm-eval's files.
    """
    from prbench.outputs import check_output_dir

    if argv is None:
        if not running_lm_eval_cli():
            return
        argv = sys.argv[1:]
    value = getattr(parse_text(argv), "output_path", None)
    if not value:
        return
    target = Path(str(value))
    if target.suffix == ".json":
        check_output_dir(target.parent, flag=f"--output_path {target}: its folder")
    else:
        check_output_dir(target, flag="--output_path")


def restore_option_text(
    model_args: Mapping[str, Any],
    argv: Sequence[str] | None = None,
    *,
    flags: Sequence[str] = ("model_args",),
) -> dict[str, Any]:
    """``model_args`` with every value lm-eval typed from text put back as the user's text.

    A value is restored only where lm-eval's own typing of the typed text gives exactly the value
    received, so JSON values and values set in code are left alone. The scorer's options then
    coerce the text to each option's declared type: a ``str`` option keeps ``00123456`` and
    ``1e3`` exactly, an ``int`` option still reads ``8`` as 8.

    Args:
        model_args: the values lm-eval passes on (model arguments, or a task's keyword
            arguments).
        argv: the lm-eval command line (default: this process's, under the ``lm_eval`` command;
            nothing is restored otherwise).
        flags: the dict flags whose text is restored (``model_args``, ``metadata``).
    """
    from lm_eval._cli.utils import handle_cli_value_string

    if argv is None:
        if not running_lm_eval_cli():
            return dict(model_args)
        argv = sys.argv[1:]
    text = model_args_text(argv, flags)
    out = dict(model_args)
    for key, value in model_args.items():
        raw = text.get(key)
        if raw is None or isinstance(value, str):
            continue
        typed = handle_cli_value_string(raw)
        if type(typed) is type(value) and typed == value:
            out[key] = raw
    return out


__all__ = [
    "JSON_FLAGS",
    "MODEL_NAME",
    "USE_CACHE_REFUSED",
    "allow_braces_in_values",
    "check_model_args_text",
    "check_no_use_cache",
    "check_output_path",
    "json_flag_problem",
    "model_args_problem",
    "model_args_text",
    "option_text",
    "parse_text",
    "restore_option_text",
    "run_argv",
    "running_lm_eval_cli",
]
