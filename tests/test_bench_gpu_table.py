"""The GPU-table benchmark: its FLOP count, its simulated device, and one tiny run of the table.

No timing, and no figure computed from one, is bounded: the run checks the table's shape (sections,
rows, columns) and invariants that hold under any load (every MFU positive and finite, and MFU x
wall equal to the FLOP floor's time at the measured peak within a section).
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "benchmarks"
sys.path.insert(0, str(BENCH))

import _common  # noqa: E402
import bench_gpu_table  # noqa: E402


def _hand_config() -> object:
    from transformers import LlamaConfig

    return LlamaConfig(vocab_size=20, hidden_size=8, intermediate_size=12, num_hidden_layers=1,
                       num_attention_heads=2, num_key_value_heads=1, head_dim=4, num_labels=1,
                       pad_token_id=0, bos_token_id=1, max_position_embeddings=64)


def test_flop_formula_matches_a_hand_count() -> None:
    import torch

    model = _common.build_shape_model(_hand_config(), torch.device("cpu"), "float32")
    # one layer: q 8x8 + k 8x4 + v 8x4 + o 8x8 = 192; MLP 3 x 8x12 = 288; two norms 16;
    # final norm 8; score head 8x1 = 8 -> 512 (the 20x8 embedding is not counted)
    flops = _common.flop_model(model)
    assert (flops.params, flops.layers, flops.attn_dim) == (512, 1, 8)
    # 5 tokens alone: 2*512*5 + 4*1*8*(1+2+3+4+5) = 5120 + 480
    assert flops.forward(5) == 5600
    # 2 tokens after 3 cached: 2*512*2 + 4*8*(4+5) = 2048 + 288
    assert flops.forward(2, 3) == 2336
    # a shared prompt counts once: [1,2,3,4,5] and [1,2,3,6,7] share 3 tokens (prefix once,
    # two 2-token answers from its cache), plus one sequence of 4 on its own
    total, tokens = _common.floor_flops(
        flops, [[1, 2, 3, 4, 5], [1, 2, 3, 6, 7], [9, 9, 9, 9]], ["a", "a", "b"]
    )
    prefix = 2 * 512 * 3 + 4 * 8 * 6
    assert total == prefix + 2 * 2336 + flops.forward(4) and tokens == 3 + 2 + 2 + 4


def test_shapes_are_written_out_from_the_public_configs() -> None:
    cfg = _common.shape_config(_common.SHAPES["llama-3.1-8b"], vocab=100, pad_id=0, bos_id=1)
    assert (cfg.model_type, cfg.hidden_size, cfg.num_hidden_layers, cfg.num_attention_heads,
            cfg.num_key_value_heads, cfg.intermediate_size, cfg.vocab_size, cfg.num_labels) == (
        "llama", 4096, 32, 32, 8, 14336, 128256, 1)
    cut = _common.shape_config(_common.SHAPES["gemma-2-27b"], layers=2, vocab=100, pad_id=0,
                               bos_id=1)
    assert (cut.model_type, cut.num_hidden_layers, cut.head_dim) == ("gemma2", 2, 128)
    tiny = _common.shape_config(_common.SHAPES["tiny"], vocab=123, pad_id=0, bos_id=1)
    assert tiny.vocab_size == 123  # the tokenizer's size


def test_token_slot_limit_refuses_calls_past_the_limit_and_restores_the_forward() -> None:
    import torch

    from prbench.testing import token_slot_limit

    model = _common.build_shape_model(_hand_config(), torch.device("cpu"), "float32")
    base = model.model
    ids = torch.ones(2, 5, dtype=torch.long)
    with token_slot_limit(base, 9) as counts:
        base(input_ids=ids[:1])  # 5 slots fit
        with pytest.raises(torch.OutOfMemoryError):
            base(input_ids=ids)  # 10 do not
    assert counts == {"failures": 1, "calls": 2, "max_slots": 10}
    assert "forward" not in base.__dict__
    base(input_ids=ids)  # the real forward again


@pytest.mark.slow  # the whole table on a tiny model: `make test-fast` leaves it out
def test_the_table_runs_on_a_cpu_with_every_section(tmp_path: Path) -> None:
    import logging

    out = tmp_path / "table.json"
    prbench_log = logging.getLogger("prbench")
    level = prbench_log.level
    result = bench_gpu_table.main([
        "--device", "cpu", "--shape", "tiny", "--pairs", "3", "--profile-pairs", "1",
        "--bon-prompts", "1", "--n", "3", "--chunks", "2,4", "--drift-pairs", "3",
        "--peak-size", "256", "--json", str(out),
    ])
    assert json.loads(out.read_text())["rows"] == json.loads(json.dumps(result["rows"]))
    assert prbench_log.level == level  # the table quiets prbench's log only while it runs
    assert result["meta"]["dtype"] == "float32" and result["meta"]["device"] == "cpu"
    rows = result["rows"]
    sections = list(dict.fromkeys(r["section"] for r in rows))
    assert sections == ["question-only", "top-10 profile", "chunk sweep", "drift (float32)",
                        "oom back-off", "best-of-3"]
    names = {s: [r["name"] for r in rows if r["section"] == s] for s in sections}
    for s in ("question-only", "top-10 profile"):
        assert names[s] == ["released path (HF forward, batch 8)", "prbench runtime",
                            "prbench runtime, packed", "FLOP floor (at the measured peak)"]
    assert names["chunk sweep"] == ["chunk_size 2", "chunk_size 4"]
    assert names["drift (float32)"][0] == "alone (one sequence per forward)"
    assert len(names["drift (float32)"]) == 4
    assert names["best-of-3"] == ["no sharing", "prefix sharing", "prefix sharing, packed",
                                  "FLOP floor (at the measured peak)"]
    # MFU is the floor's FLOPs over (wall x the peak timed in this run): positive and finite under
    # any load, but not at most 1 (the peak is timed while other work may slow it down, issue 28)
    peak = result["meta"]["peak_flops"]
    assert math.isfinite(peak) and peak > 0
    for r in rows:
        if r["wall"] is not None:
            assert math.isfinite(r["mfu"]) and r["mfu"] > 0, r
            assert r["rate"] == pytest.approx(r["items"] / r["wall"])
    for s in ("question-only", "top-10 profile"):  # one floor per section: MFU x wall is fixed
        released, ours, packed, floor = (r for r in rows if r["section"] == s)
        assert floor["mfu"] == 1.0 and floor["wall"] == pytest.approx(
            floor["figures"]["flops"] / peak)
        for r in (released, ours, packed):
            assert r["mfu"] * r["wall"] == pytest.approx(floor["wall"]), r
    alone, *drift = [r for r in rows if r["section"].startswith("drift")]
    assert all(r["figures"]["flips"] == 0 and r["figures"]["max_diff"] < 1e-4 for r in drift)
    # the reference's scale, so a |Δ| reads against the scores it moved: a tiny random head gives
    # scores well away from 0, and no margin of 3 pairs sits within float32 rounding of a tie
    scale = alone["figures"]
    assert scale["median_abs_score"] > 0 and scale["median_abs_margin"] > 0
    assert scale["near_ties"] == 0
    oom = [r for r in rows if r["section"] == "oom back-off"][1]["figures"]
    assert oom["failures"] > 0 and oom["scorer_oom_retries"] + oom["runtime_oom_retries"] > 0
    clean = next(r for r in rows if r["name"] == "clean run")
    assert oom["real_tokens"] == clean["figures"]["real_tokens"]
    assert oom["max_diff"] < 1e-5
    assert all(r["figures"]["max_diff_vs_released"] < 1e-4 for r in rows
               if r["name"] == "prbench runtime")
    # packed rows: the padded runtime's scores (float32), without the padding
    packed_rows = [r for r in rows if r["name"].endswith(", packed")]
    assert len(packed_rows) == 3
    for r in packed_rows:
        assert r["figures"]["max_diff_vs_padded"] <= 1e-5, r
        assert r["figures"]["packing"].startswith("on (option"), r
    lines = bench_gpu_table.format_table([bench_gpu_table.Row(**{
        k: v for k, v in r.items() if k != "rate"}) for r in rows])
    assert lines[0].split() == ["section", "row", "items", "wall", "s", "items/s", "MFU", "vs",
                                "ref", "notes"]
    assert len([line for line in lines[2:] if line]) == len(rows)


def test_sections_run_alone_and_packed_best_of_n_matches_padded() -> None:
    result = bench_gpu_table.main([
        "--device", "cpu", "--shape", "tiny", "--sections", "bon", "--bon-prompts", "1",
        "--n", "3", "--peak-size", "64",
    ])
    rows = result["rows"]
    assert [r["name"] for r in rows] == ["no sharing", "prefix sharing", "prefix sharing, packed",
                                         "FLOP floor (at the measured peak)"]
    packed = rows[2]["figures"]
    assert packed["max_diff_vs_padded"] <= 1e-5
    assert packed["packing"].startswith("on (option") and "shared prompts packed too" in (
        packed["packing"])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--shape", "llama-8b"], "invalid choice: 'llama-8b'"),
        (["--chunks", "8,x"], "--chunks: expected comma-separated integers"),
        (["--pairs", "0"], "--pairs must be at least 1"),
        (["--dtype", "bf32"], "invalid choice: 'bf32'"),
        (["--json", "/no/such/folder/t.json"], "--json: folder /no/such/folder does not exist"),
        (["--sections", "throughput,packing"], "--sections: unknown section packing"),
        (["--sections", "drift"], "--sections: drift compares against the throughput"),
    ],
)
def test_mistakes_are_one_error_line(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        bench_gpu_table.parse_args(["--device", "cpu", *args])
    assert exit_info.value.code == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if "error:" in line]
    assert len(errors) == 1 and message in errors[0]


def test_scale_and_near_ties_read_pairs_in_turn() -> None:
    """Scores list chosen, rejected in turn: margins are per pair, a near tie is within bound."""
    scores = [2.0, -1.0, 0.5, 0.45, -3.0, -3.0]
    assert bench_gpu_table._scale(scores) == pytest.approx((1.5, 0.05))
    assert bench_gpu_table._near_ties(scores, 0.1) == 2
    assert bench_gpu_table._near_ties(scores, 0.0) == 1
