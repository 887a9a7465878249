"""One command-line style for every ``prbench`` subcommand (walks the argparse tree).

Every flag has help text, ``--help`` shows every non-empty default, the underscore spelling is the
one shown and the dash spelling parses too, and a command that writes files takes
``-o/--output_path``. The forms of earlier, unreleased drafts (``--output``, ``--scorer``,
``--judge ID``, ...) do not parse: their error names the form to write.
"""

from __future__ import annotations

import argparse
import re
from typing import Any

import pytest

from prbench.cli import COMMANDS, CommandParser, build_parser, main
from prbench.commands import ROLES, scorer_specs
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
    "name", ["bon", "build", "correlate", "prefs convert", "rank", "report", "rl", "sweep"]
)
def test_output_path_everywhere_and_the_old_flags_refused(
    name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    parser = SUBPARSERS[name]
    parser.format_help()
    action = parser._option_string_actions["--output_path"]
    assert action.option_strings[:2] == ["-o", "--output_path"]
    assert "-o OUTPUT_PATH, --output_path OUTPUT_PATH" in parser.format_help()
    for old in ("--output", "--output_dir", "--output-dir"):
        args, extra = parser.parse_known_args([*_required_args(parser, skip=None), old, "y"])
        assert extra == [old, "y"] and args.output_path != "y"
        with pytest.raises(SystemExit) as exc:
            parser.error(f"unrecognized arguments: {old} y")
        assert exc.value.code == 2
        assert f"({old} is now -o/--output_path)" in capsys.readouterr().err


def test_one_resamples_default_everywhere() -> None:
    from prbench.metrics import DEFAULT_RESAMPLES

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


def test_one_scorer_form(capsys: pytest.CaptureFixture[str]) -> None:
    assert _specs(["--model_args", "scorer=length", "--model_args",
                   "scorer=hf-classifier,pretrained=P,dtype=float32"]) == [
        "length", "hf-classifier:pretrained=P,dtype=float32"]
    assert capsys.readouterr().err == ""
    for command in ("bon", "serve", "rl"):  # the old --scorer is no flag of any command
        parser = SUBPARSERS[command]
        _, extra = parser.parse_known_args([*_required_args(parser, skip=None), "--scorer",
                                            "length"])
        assert extra == ["--scorer", "length"]
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


def test_unknown_flag_is_one_error_line_with_the_flag_meant(capsys: Any) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["bon", "--model_args", "scorer=length", "--profile_kk", "3"])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["error: prbench bon: unrecognized arguments: --profile_kk 3 (did you mean "
                   "'--profile_args'?) (see 'prbench bon --help')"]
    with pytest.raises(SystemExit):
        main(["rank", "sample", "-o", "r.jsonl", "--bacth-size", "4", "--builder", "dense"])
    assert capsys.readouterr().err.strip() == (
        "error: prbench rank: unrecognized arguments: --bacth-size 4 --builder dense "
        "(--bacth-size: did you mean '--batch_size'?; --builder is now --profile_args "
        "builder=ID) (see 'prbench rank --help')")
    with pytest.raises(SystemExit):  # argparse's other mistakes: the same one line
        main(["rank", "sample"])
    assert capsys.readouterr().err.strip() == (
        "error: prbench rank: the following arguments are required: -o/--output_path (see "
        "'prbench rank --help')")


def _all_help() -> dict[str, str]:
    """Every help text a user can print: ``prbench --help`` and each (sub)command's."""
    return {"": build_parser().format_help(),
            **{name: parser.format_help() for name, parser in SUBPARSERS.items()}}


@pytest.mark.parametrize("name", ["", *sorted(SUBPARSERS)])
def test_help_shows_no_docs_markup(name: str) -> None:
    """Docstrings and help strings are written with reST and backticks; --help shows plain text."""
    text = _all_help()[name]
    assert "`" not in text, f"prbench {name} --help: " + next(
        line for line in text.splitlines() if "`" in line)
    assert not re.search(r":[a-z]+:'", text)


def test_plain_text_drops_roles_and_quotes_code() -> None:
    from prbench.cli import plain_text

    assert plain_text("see :mod:`prbench.progress` and :class:`~prbench.cli.CommandParser`") == (
        "see prbench.progress and prbench.cli.CommandParser")
    assert plain_text("``prbench rank DATA -o OUT`` or `prbench scorers --options`") == (
        "'prbench rank DATA -o OUT' or 'prbench scorers --options'")


def test_each_command_line_of_top_level_help_is_its_whole_first_paragraph() -> None:
    import importlib

    from prbench.cli import plain_text

    shown = " ".join(build_parser().format_help().split())
    for name, module in COMMANDS.items():
        doc = importlib.import_module(module).__doc__ or ""
        first = " ".join(doc.strip().split("\n\n")[0].split())
        assert f"{name} {plain_text(first).rstrip('.')}" in shown, name
    assert "'prbench prefs convert' turns PRISM or personalised Chatbot Arena data into records" \
        in shown  # the line that used to stop mid-sentence


def test_eval_declares_the_lm_eval_flags_it_takes_and_reads_each_once() -> None:
    from prbench.scoring.spec import DEFAULT_SCORER

    parser = SUBPARSERS["eval"]
    text = " ".join(parser.format_help().split())
    assert "--tasks TASK [TASK ...]" in text and "--model_args scorer=ID,K=V,..." in text
    assert f"(default: scorer={DEFAULT_SCORER})" in text
    args, extra = parser.parse_known_args(
        ["--limit", "2", "--model-args", "scorer=length", "--tasks", "a,b", "c", "--log-samples",
         "--seed", "5"])
    assert extra == [] and args.limit == 2.0 and args.model_args == ["scorer=length"]
    assert args.tasks == ["a,b", "c"] and args.log_samples and args.seed == (5, 1234, 1234, 1234)


def test_build_shows_the_defaults_its_shortcut_flags_leave_to_the_generator() -> None:
    """--backend, --device, --seed, ... default to None (the generator's option then applies):
    the help names the value that applies for the default generator, and it is the real one."""
    import dataclasses

    from prbench.commands.build import SHORTCUTS
    from prbench.pairs.generator import RubricContrastOptions

    parser = SUBPARSERS["build"]
    assert parser.get_default("prbench_default_generator") == "rubric-contrast"
    defaults = {f.name: f.default for f in dataclasses.fields(RubricContrastOptions)}
    for dest, option in SHORTCUTS.items():
        action = parser._option_string_actions[f"--{dest}"]
        entry = _entry(parser, action)
        assert "default" in entry or "required" in entry, entry
        if defaults[option] not in ("", None):
            assert f"(default: the generator's, {defaults[option]})" in entry, entry
    limit = _entry(parser, parser._option_string_actions["--limit"])
    assert "(default: all of them)" in limit


# -- one form for every component option: --<role>_args KEY=ID,K=V,... -------------------------

#: flags named after a component role or its id key: the old forms, never shown in --help
_COMPONENT_WORDS = {*ROLES, *(key for key in ROLES.values() if key)} - {"model"}
#: flags named after a component word that are not a component (none left: rl's policy is
#: ``--policy_args model=PATH`` now)
_NOT_COMPONENTS: set[tuple[str, str]] = set()
#: lm-eval's own flags that prbench eval declares as lm-eval spells them: not component options
_LM_EVAL_FLAGS = {("eval", "--metadata"), ("eval", "--hf_hub_log_args"), ("eval", "--wandb_args")}


@pytest.mark.parametrize("name", sorted(SUBPARSERS))
def test_every_component_option_is_in_the_role_args_form(name: str) -> None:
    parser = SUBPARSERS[name]
    for action in _flags(parser):
        shown = next(o for o in action.option_strings if o.startswith("--"))
        metavar = str(action.metavar or "")
        lm_evals = (name, shown) in _LM_EVAL_FLAGS
        takes_options = not lm_evals and not isinstance(action, SWITCHES) and (
            "=" in metavar or metavar.upper() == "JSON" or shown.endswith(("_args", "_options")))
        if takes_options:
            role = shown[2:].removesuffix("_args")
            assert shown.endswith("_args") and role in ROLES, (
                f"prbench {name} {shown} {metavar}: component options are given as "
                f"--<role>_args with a role of {sorted(ROLES)}")
            key = ROLES[role]
            assert metavar == (f"{key}=ID,K=V,..." if key else "K=V,..."), (name, shown, metavar)
        body = shown[2:]
        word, _, rest = body.partition("_")
        if (name, shown) not in _NOT_COMPONENTS:
            assert body not in _COMPONENT_WORDS and not (
                word in _COMPONENT_WORDS and rest in ("k", "options", "option", "args")
                and _not_role_args(body)), (
                f"prbench {name} {shown}: a component is given as --<role>_args KEY=ID,...")


def _not_role_args(body: str) -> bool:
    """True for a flag body that is not itself a ``<role>_args`` of :data:`ROLES`."""
    return body.removesuffix("_args") not in ROLES or not body.endswith("_args")


def test_every_output_path_shows_one_metavar() -> None:
    for parser in SUBPARSERS.values():
        parser.add_spellings()
    with_output = [n for n, p in SUBPARSERS.items() if "--output_path" in p._option_string_actions]
    assert set(with_output) == {"bon", "build", "correlate", "eval", "plugins new", "prefs convert",
                                "rank", "report", "rl", "sweep"}
    for name in with_output:
        assert "-o OUTPUT_PATH, --output_path OUTPUT_PATH" in SUBPARSERS[name].format_help(), name


def _components(command: str, argv: list[str], role: str) -> tuple[tuple[str, dict], str]:
    """(id, options) of ``role`` for ``prbench COMMAND ARGV``, and what it printed."""
    import contextlib
    import io

    from prbench.commands import component_args

    parser = SUBPARSERS[command]
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        args, extra = parser.parse_known_args([*_required_args(parser, skip=None), *argv])
        assert extra == [], extra
        found = component_args(args, role)
    return found, err.getvalue()


#: (command, an old form of an unreleased draft, the form its error names)
OLD_FORMS = [
    ("rl", "--judge rubric-judge:backend=hf,model=P", "--judge is now --judge_args judge=ID,K=V"),
    ("rl", "--profile dense", "--profile is now --profile_args builder=ID,K=V"),
    ("rl", "--policy P", "--policy is now --policy_args model=PATH"),
    ("rl", "--gguf_file F", "--gguf_file is now --policy_args model=PATH,gguf_file=F"),
    ("bon", "--profile_k 3", "--profile_k is now --profile_args builder=ID,k=N"),
    ("bon", '--profile_options {"k":3}', "--profile_options is now --profile_args builder=ID,K=V"),
    ("bon", "--policy backend=hf,model=P", "--policy is now --policy_args model=PATH"),
    ("rank", "--builder-args model=minilm", "--builder-args is now --profile_args builder=ID,K=V"),
    ("build", "--generator scripted", "--generator is now --generator_args generator=ID,K=V"),
    ("build", "-O leak_check=both", "-O is now --generator_args generator=ID,K=V"),
]


@pytest.mark.parametrize(("command", "old", "says"), OLD_FORMS)
def test_old_component_forms_are_refused_naming_the_form_to_write(
    command: str, old: str, says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    parser = SUBPARSERS[command]
    _, extra = parser.parse_known_args([*_required_args(parser, skip=None), *_split(old)])
    assert extra == _split(old)
    with pytest.raises(SystemExit):
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    assert f"({says})" in capsys.readouterr().err
    assert f"{_split(old)[0]} " not in parser.format_help().replace("[", " ")


def _split(text: str) -> list[str]:
    """``text`` split at spaces outside JSON braces (the way a shell would with quotes)."""
    words: list[str] = []
    for word in text.split(" "):
        if words and words[-1].count("{") > words[-1].count("}"):
            words[-1] += " " + word
        else:
            words.append(word)
    return words


def test_the_default_component_needs_no_flag_and_a_list_must_name_one() -> None:
    assert _components("bon", [], "profile") == (("dense", {}), "")
    assert _components("bon", [], "judge") == (("rubric-judge", {}), "")
    assert _components("bon", [], "policy") == (("", {}), "")
    assert _components("rl", [], "judge") == (("oracle-rubric", {}), "")
    assert _components("rl", [], "profile") == (("none", {}), "")
    assert _components("build", [], "generator") == (("rubric-contrast", {}), "")
    with pytest.raises(OptionsError, match="--profile_args 'k=2' names no builder: write "
                       "--profile_args builder=ID,k=2"):
        _components("bon", ["--profile_args", "k=2"], "profile")
    with pytest.raises(OptionsError, match="--policy_args 'P' is not a K=V list: write "
                       "--policy_args model=P"):
        _components("bon", ["--policy_args", "P"], "policy")


def test_one_parser_reads_every_options_list_and_keeps_json_values_whole() -> None:
    from prbench.commands import kv_text
    from prbench.options import parse_kv_string

    text = 'builder=dense,model_kwargs={"a": [1, 2], "b": "x,}y"},stop=[",", "."],k=5'
    parsed = parse_kv_string(text)
    assert parsed == {"builder": "dense", "model_kwargs": '{"a": [1, 2], "b": "x,}y"}',
                      "stop": '[",", "."]', "k": "5"}
    assert kv_text({k: v for k, v in parsed.items() if k != "builder"},
                   builder="dense") == text
    # a value that only starts like JSON and never closes is split as any other
    assert parse_kv_string("template=[INST,k=2") == {"template": "[INST", "k": "2"}
    with pytest.raises(OptionsError, match="expected key=value, got 'x'"):
        parse_kv_string("a=1,x")
