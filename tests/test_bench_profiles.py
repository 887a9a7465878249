"""The profile benchmark's FLOP count for an encoder, checked against a hand count.

No timing is asserted: this checks the arithmetic behind the compute ceiling only.
"""

from __future__ import annotations

import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent.parent / "benchmarks"
sys.path.insert(0, str(BENCH))

import bench_profiles  # noqa: E402


def _tiny_bert() -> object:
    import torch
    from transformers import BertConfig, BertModel

    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=20, hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
                     intermediate_size=12, max_position_embeddings=16, type_vocab_size=2)
    return BertModel(cfg).eval()


def test_encoder_flops_match_a_hand_count() -> None:
    flops = bench_profiles.encoder_flop_model(_tiny_bert())
    # embedding LayerNorm 16; per layer: q, k, v, o 4 x (8x8 + 8) = 288, attention LayerNorm 16,
    # intermediate 8x12 + 12 = 108, output 12x8 + 8 = 104, output LayerNorm 16 -> 532.
    # Word, position and type embeddings are lookups; the pooler (8x8 + 8) sees one token.
    assert (flops.params, flops.layers, flops.attn_dim) == (548, 1, 8)
    # 3 tokens: 2*548*3 + 4*1*8*3*3 = 3288 + 288; 5 tokens: 5480 + 800 (every token sees all)
    assert flops.bidirectional(3) == 3576
    assert bench_profiles.post_flops(flops, [3, 5]) == 3576 + 6280
    assert bench_profiles.post_flops(flops, []) == 0


def test_encoder_flops_leave_out_the_pooler() -> None:
    from transformers import BertModel

    with_pooler = _tiny_bert()
    without = BertModel(with_pooler.config, add_pooling_layer=False)
    assert bench_profiles.encoder_flop_model(without).params == 548
    assert bench_profiles.encoder_flop_model(with_pooler).params == 548


def test_onnx_row_says_when_onnxruntime_is_missing(monkeypatch) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "onnxruntime" else real(name, *a))
    assert bench_profiles._onnx_missing() == "onnxruntime not installed"


def test_the_default_row_is_what_prbench_ships_and_the_run_ends_with_its_ratio() -> None:
    import argparse

    from _profiles_fixtures import minilm_dir

    minilm_dir()  # skips when the MiniLM package is missing
    args = argparse.Namespace(device="cpu", batch_size=32, threads=2)
    shipped = bench_profiles._encoder("minilm", "default", args)
    assert (shipped.spec.embed_dtype, shipped.batch_size_option, shipped.threads_option) == (
        "auto", None, "auto")
    fp32 = bench_profiles._encoder("minilm", "torch", args)
    assert (fp32.dtype, fp32.batch_size, fp32.threads_option) == ("float32", 32, 2)
    weights = bench_profiles._encoder("minilm", "bf16-weights", args)
    assert weights.dtype == "bfloat16-weights"
    # every row but default and the OpenVINO ones runs on torch, whatever auto would pick
    assert (shipped.spec.embed_backend, fp32.spec.embed_backend) == ("auto", "torch")
    for path, dtype in (("openvino", "float32"), ("openvino-bf16", "bfloat16")):
        row = bench_profiles._encoder("minilm", path, args)
        assert (row.spec.embed_backend, row.spec.embed_dtype) == ("openvino", dtype)
    assert bench_profiles.summary_line(3.214, 0.99512) == "default/fp32 = 3.21× top10 = 0.995"
