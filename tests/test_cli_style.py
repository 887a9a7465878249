"""One command-line style for every ``prbench`` subcommand (walks the argparse tree).

Every flag has help text, ``--help`` shows every non-empty default, the underscore spelling is the
one shown and the dash spelling parses too, and a command that writes files takes
``-o/--output_path`` (the old ``--output``/``--output_dir`` parse with a deprecation note).
"""

from __future__ import annotations

import argparse
from typing import Any

import pytest

from prbench.cli import COMMANDS, CommandParser, build_parser, main
from prbench.commands import scorer_specs
from prbench.options import OptionsError

SWITCHES = (argparse._StoreTrueAction, argparse._StoreFalseAction, argparse._HelpAction,
            argparse._VersionAction)


def _subparsers(parser: argparse.ArgumentParser, prefix: str = "") -> dict[str, Any]:
    """Every (sub)command's parser by its command words, nested ones too (``prefs convert``)."""
    out: dict[str, argparse.ArgumentParser] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                words = f"{prefix} {name}".strip()
                out[words] = child
                out.update(_subparsers(child, words))
    return out


SUBPARSERS = _subparsers(build_parser())
LEAVES = sorted(n for n, p in SUBPARSERS.items()
                if not any(isinstance(a, argparse._SubParsersAction) for a in p._actions))


def _flags(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    parser.format_help()  # adds the other spellings
    return [a for a in parser._actions if a.option_strings and a.help != argparse.SUPPRESS
            and not isinstance(a, argparse._HelpAction)]


def test_every_command_is_in_the_commands_folder() -> None:
    assert {n for n in SUBPARSERS if " " not in n} == set(COMMANDS)
    assert all(module.startswith("prbench.commands.") for module in COMMANDS.values())
    assert all(isinstance(p, CommandParser) for p in SUBPARSERS.values())


def _entry(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    """The lines ``--help`` prints for one flag (invocation and help text)."""
    formatter = parser._get_formatter()
    formatter.add_argument(action)
    return " ".join(formatter.format_help().split())


@pytest.mark.parametrize("name", sorted(SUBPARSERS))
def test_every_flag_has_help_and_its_default_is_shown(name: str) -> None:
    parser = SUBPARSERS[name]
    for action in _flags(parser):
        shown = action.option_strings[0]
        assert action.help and action.help.strip(), f"prbench {name} {shown}: no help text"
        entry = _entry(parser, action)
        assert entry in " ".join(parser.format_help().split())
        empty = action.default in (None, "", [], ()) or isinstance(action, SWITCHES)
        if not empty:
            assert "default" in entry, (
                f"prbench {name} {shown}: --help does not show its default {action.default!r}"
            )
            if not isinstance(action.default, str) or action.default:
                assert str(action.default) in entry or "default" in action.help, entry


@pytest.mark.parametrize("name", sorted(SUBPARSERS))
def test_help_shows_the_underscore_spelling_and_both_parse(name: str) -> None:
    parser = SUBPARSERS[name]
    text = parser.format_help()
    for action in _flags(parser):
        longs = [o for o in action.option_strings if o.startswith("--")]
        for flag in longs:
            body = flag[2:]
            under, dash = "--" + body.replace("-", "_"), "--" + body.replace("_", "-")
            assert parser._option_string_actions[under] is action
            assert parser._option_string_actions[dash] is action
            if "-" in body:
                assert f"{flag} " not in text and f"{flag}," not in text, (
                    f"prbench {name} --help shows the dash spelling {flag}"
                )
    # both spellings of a multi-word flag parse to the same value
    for action in _flags(parser):
        long = next((o for o in action.option_strings if "_" in o[2:]), None)
        if long is None or action.nargs not in (None,) or isinstance(action, SWITCHES):
            continue
        if action.choices:
            value = str(next(iter(action.choices)))
        elif action.type in (int, float):
            value = "1"
        else:
            value = "1" if action.type is not None else "x"
        required = _required_args(parser, skip=action)
        under = parser.parse_known_args([*required, long, value])[0]
        dash = parser.parse_known_args([*required, long.replace("_", "-"), value])[0]
        assert getattr(under, action.dest) == getattr(dash, action.dest), (name, long)


def _required_args(parser: argparse.ArgumentParser, skip: argparse.Action) -> list[str]:
    """Values for the parser's positionals and required flags (so a parse can succeed)."""
    out: list[str] = []
    for action in parser._actions:
        if action is skip:
            continue
        if not action.option_strings and not isinstance(action, argparse._SubParsersAction):
            if action.nargs not in ("?", "*"):
                out.append(str(next(iter(action.choices))) if action.choices else "x")
        elif action.required:
            out += [action.option_strings[0],
                    str(next(iter(action.choices))) if action.choices else "x"]
    return out


@pytest.mark.parametrize(
    "name", ["bon", "build", "correlate", "prefs convert", "rank", "report", "rl"]
)
def test_output_path_everywhere_and_old_flags_noted(
    name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    parser = SUBPARSERS[name]
    parser.format_help()
    action = parser._option_string_actions["--output_path"]
    assert action.option_strings[:2] == ["-o", "--output_path"]
    assert "-o OUTPUT_PATH, --output_path OUTPUT_PATH" in parser.format_help() or \
        "-o OUT, --output_path OUT" in parser.format_help()
    for old in ("--output", "--output_dir", "--output-dir"):
        args, _ = parser.parse_known_args([*_required_args(parser, skip=action), old, "there"])
        assert args.output_path == "there"
        assert f"prbench: note: {old} is deprecated; use -o/--output_path" in \
            capsys.readouterr().err
        assert f"{old} " not in parser.format_help().replace("[", " ").replace("]", " ")


def test_one_resamples_default_everywhere() -> None:
    from prbench.analysis.metrics import DEFAULT_RESAMPLES

    seen = {}
    for name, parser in SUBPARSERS.items():
        for action in _flags(parser):
            if "resamples" in action.dest:
                seen[name] = action.default
    assert set(seen) >= {"eval", "bon", "correlate", "report"}
    assert set(seen.values()) == {DEFAULT_RESAMPLES}, seen


def _specs(argv: list[str], command: str = "bon") -> list[str]:
    args, _ = SUBPARSERS[command].parse_known_args(argv)
    return scorer_specs(args)


def test_one_scorer_form_and_the_old_ones_with_a_note(capsys: pytest.CaptureFixture[str]) -> None:
    assert _specs(["--model_args", "scorer=length", "--model_args",
                   "scorer=hf-classifier,pretrained=P,dtype=float32"]) == [
        "length", "hf-classifier:pretrained=P,dtype=float32"]
    assert capsys.readouterr().err == ""
    # bon's old form
    assert _specs(["--scorer", "hf-classifier:pretrained=P"]) == ["hf-classifier:pretrained=P"]
    err = capsys.readouterr().err
    assert "'--scorer hf-classifier:pretrained=P' is the old form; write " \
        "'--model_args scorer=hf-classifier,pretrained=P'" in err
    # serve's and rl's old form
    assert _specs(["--scorer", "length", "--model_args", "unit=word"], "serve") == [
        "length:unit=word"]
    assert "write '--model_args scorer=length,unit=word'" in capsys.readouterr().err
    with pytest.raises(OptionsError, match="names no scorer: write --model_args scorer=ID,unit=w"):
        _specs(["--model_args", "unit=w"], "serve")
    with pytest.raises(OptionsError, match="no scorer given: add --model_args scorer=ID"):
        _specs([], "serve")


def test_help_of_every_command_exits_zero(capsys: pytest.CaptureFixture[str]) -> None:
    for name in LEAVES:
        with pytest.raises(SystemExit) as exc:
            main([*name.split(), "--help"])
        assert exc.value.code == 0
        out = capsys.readouterr().out
        assert "(default:" in out or name in ("plugins",), name


def test_unknown_flag_is_one_error_line(capsys: Any) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["bon", "--model_args", "scorer=length", "--profile_kk", "3"])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == "prbench: error: unrecognized arguments: --profile_kk 3"


def test_eval_passes_lm_eval_flags_in_lm_evals_spelling(capsys: pytest.CaptureFixture[str]) -> None:
    from prbench.commands.eval import lm_eval_spellings

    assert lm_eval_spellings(["--model-args", "scorer=length", "--log-samples", "--output-path=x",
                              "--tasks", "t", "--not-a-flag"]) == [
        "--model_args", "scorer=length", "--log_samples", "--output_path=x", "--tasks", "t",
        "--not-a-flag"]
    assert capsys.readouterr().err == ""
    assert lm_eval_spellings(["--output_dir", "x"]) == ["--output_path", "x"]
    assert "--output_dir is deprecated; use -o/--output_path" in capsys.readouterr().err
