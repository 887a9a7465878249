"""Profile embedding speed and retrieval fidelity per encoder and backend, with a projection.

Generates seeded synthetic records at the published sizes (a ~12-word question; profiles of
log-normal size with mean ~125 posts, capped by ``--max-posts``; posts of 60-200 words drawn
from a few topics per user, so retrieval has something to find) and, for each encoder model:

- ``before``: the order of work before the encoder sorted a call's texts — record order, in steps
  of 256 (each step sorted by the model itself), fp32;
- ``torch``: the encoder in fp32 (``embed_dtype=float32``; texts sorted by token count, longest
  first, over the whole call) -- the reference ranking of the overlap columns;
- ``bf16``: the same encoder under bf16 autocast (``embed_dtype=bfloat16``): weights stay fp32,
  the matrix products run in bf16 (on an H200 this row ran at 0.84-0.92x the fp32 one);
- ``bf16-weights``: the transformer's weights cast to bf16, pooling in fp32
  (``embed_dtype=bfloat16-weights``; what ``auto`` picks on a CPU with ``avx512_bf16``/AMX);
- ``openvino``: the encoder's transformer converted to OpenVINO and run in fp32
  (``embed_backend=openvino``, ``embed_dtype=float32``; :mod:`prbench.profiles.embed_openvino`);
- ``openvino-bf16``: the same in OpenVINO's bf16 (``embed_dtype=bfloat16``; what ``auto`` picks on
  a CPU with AMX);
- ``default``: exactly what prbench ships on the device: ``embed_backend=auto``,
  ``embed_dtype=auto``, the device kind's default batch size and ``embed_threads=auto``. Every
  other row runs at ``--batch-size`` (default 32, the encoder's old default) with ``--threads``
  (default torch's own count, held fixed), so ``default`` against ``torch`` is what the shipped
  choices gain over fp32;
- ``compile``: an experiment that prbench does not ship: ``torch.compile`` of a private copy of
  the transformer, run under the same bf16 autocast (the compile time is printed apart and left
  out of the rate);
- ``int8``: an experiment that prbench does not ship: the same model with PyTorch's dynamic int8
  quantisation of every linear layer (CPU only), to show whether it keeps the ranking;
- ``onnx``: an experiment that prbench does not ship either: the encoder's transformer exported
  to ONNX (``torch.onnx.export``, into a temporary folder) and run by onnxruntime on the CPU, with
  the model's own pooling after it (when onnxruntime is not importable the row says so).

Two data sets, each with its own table (``--data``): ``synthetic`` (above) and ``sample``, the
real posts of the bundled sample benchmark (its questions against their own users' posts), where
the overlap of the bf16 ranking with the fp32 one is the acceptance figure. The run ends with one
line for the first data set and model: ``default/fp32 = R.RR× top10 = O.OOO`` (posts/s of the
``default`` row over the ``torch`` row, and its mean top-10 overlap with the fp32 ranking).

Every row but ``default`` and the OpenVINO ones runs on torch (``embed_backend=torch``). The
``first s`` column is each row's warm-up: loading the model and, for ``default``, the OpenVINO
rows and ``compile``, a first pass over all the texts (``auto``'s one probe, the conversion and
one compile per shape bucket, in a fresh cache), left out of the rate.

Each row prints posts/s, the speed-up over ``before``, the top-k overlap of each record's ranking
(question vs posts, dot product) with the ``torch`` (fp32) ranking, the achieved GFLOP/s and MFU,
the fitted cost per post (time = fixed + per-post x posts, from two sizes; the shipped precisions)
and the
projected time to embed the full test set (2,830 records x ~125 posts = ~354k posts). The cache
is off for every timing.

The compute ceiling, per encoder: the FLOPs of a post are ``2 N T + 4 L d_attn T^2`` (``N``
non-embedding parameters without the pooler, ``T`` the post's real token count after truncation
at the encoder's maximum length; see ``_common``), the peak is an fp32 square matmul timed in the
same run in fp32 and in bf16 (before and after each encoder's rows; the faster counts), MFU =
achieved FLOP/s / the peak of the row's precision, and a ceiling line per precision gives the
posts/s at 100% of that peak and whether 3x the ``before`` rate lies above it.
Wall-clock timing with CUDA synchronisation; a warm-up pass loads each model first. Compare the
ratios of one run: absolute times vary between runs on a shared machine. Example::

    python benchmarks/bench_profiles.py                          # MiniLM, CPU
    python benchmarks/bench_profiles.py --models minilm,contriever --device cuda --records 40
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import random
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import FlopModel, flop_model, measure_peak_flops, timed

from prbench.profiles.embed_models import EmbeddingModel

FULL_SET_POSTS = 2830 * 125
BACKENDS = ("default", "torch", "bf16", "bf16-weights", "openvino", "openvino-bf16", "compile",
            "int8", "onnx")
#: the ``embed_dtype`` of each path (``default``: the shipped ``auto``)
PRECISION = {"before": "float32", "torch": "float32", "bf16": "bfloat16",
             "bf16-weights": "bfloat16-weights", "default": "auto", "compile": "bfloat16",
             "int8": "float32", "onnx": "float32", "openvino": "float32",
             "openvino-bf16": "bfloat16"}
#: the paths that warm up over every text first (each new shape compiles once, not in the rate)
WARM_ALL = ("default", "openvino", "openvino-bf16", "compile")
#: the paths whose cost per post is fitted from two sizes (the shipped precisions)
FITTED = ("default", "torch", "bf16", "bf16-weights")
FUNCTION = [
    "the", "a", "of", "to", "in", "and", "with", "for", "on", "my", "i", "it", "is", "was", "have",
    "do", "can", "should", "but", "so", "this", "that", "when", "about", "because", "really",
    "just", "also", "more", "than", "very", "some", "what", "how",
]
TOPICS = {
    "painting": "paint watercolor brush canvas pigment palette sketch gallery easel colour",
    "music": "guitar chord song band bass rehearsal melody lyrics amplifier concert",
    "garden": "soil tomato compost seedling pruning mulch greenhouse harvest weeds bulbs",
    "cooking": "recipe bread oven dough flour spice simmer roast sauce knife",
    "travel": "train hostel passport luggage itinerary border ferry visa backpack map",
    "money": "budget rent salary savings loan interest mortgage pension tax invoice",
    "career": "interview manager promotion resume colleague deadline meeting contract office",
    "parenting": "toddler school homework bedtime nursery tantrum teacher playground siblings",
    "running": "marathon knee stride pace trainers hill tempo injury stretching race",
    "chess": "opening endgame bishop knight rook gambit tournament rating checkmate pawn",
    "language": "grammar vocabulary accent fluency verb tense dictionary pronunciation idiom",
    "faith": "church prayer community festival tradition scripture ritual pilgrimage choir",
}


def make_records(n: int, max_posts: int, seed: int = 0) -> list:
    """Synthetic records at the published sizes (see the module docstring)."""
    from prbench.records import ProfileItem, Record

    rng = random.Random(seed)
    topics = {name: words.split() for name, words in TOPICS.items()}
    names = sorted(topics)

    def text(topic_mix: list[str], words: int) -> str:
        out = []
        for _ in range(words):
            if rng.random() < 0.45:
                out.append(rng.choice(FUNCTION))
            else:
                out.append(rng.choice(topics[rng.choice(topic_mix)]))
        return " ".join(out).capitalize() + "."

    records = []
    mu = math.log(125) - 0.9**2 / 2  # log-normal with mean ~125 posts
    for u in range(n):
        own = rng.sample(names, rng.randint(2, 4))
        size = max(2, min(max_posts, round(rng.lognormvariate(mu, 0.9))))
        profile = tuple(
            ProfileItem(id=f"u{u}-p{i}", category="General",
                        text=text([rng.choice(own)], rng.randint(60, 200)))
            for i in range(size)
        )
        records.append(Record(id=f"u{u}", question=text([own[0]], 12), profile=profile,
                              chosen="a", rejected="b"))
    return records


def _int8_copy(model):
    """A deep copy of a loaded encoder model with dynamic int8 linear layers (the experiment)."""
    import copy
    import warnings

    import torch

    clone = copy.deepcopy(model)
    with warnings.catch_warnings():  # torch points eager quantisation users at torchao
        warnings.simplefilter("ignore")
        torch.ao.quantization.quantize_dynamic(
            clone.model, {torch.nn.Linear}, dtype=torch.qint8, inplace=True
        )
    return clone


def _compiled_copy(model):
    """A deep copy of a loaded encoder model whose transformer is ``torch.compile``'d."""
    import copy

    import torch

    clone = copy.deepcopy(model)
    st = getattr(clone, "model", None)
    if hasattr(st, "tokenizer") and hasattr(st, "max_seq_length"):  # a SentenceTransformer
        st[0].auto_model = torch.compile(st[0].auto_model, dynamic=True)
    else:
        clone.model = torch.compile(clone.model, dynamic=True)
    return clone


def sample_records() -> list:
    """The bundled sample benchmark's records (real questions and posts)."""
    from prbench.records import load_records

    return [r for r in load_records("sample") if r.profile]


def _parts(model: Any) -> tuple[Any, Any, int, Any]:
    """``(transformer, tokenizer, max_length, pool)`` of a loaded encoder model.

    ``pool(hidden, mask)`` (torch tensors) turns the transformer's last hidden states into the
    embeddings the model returns: the sentence-transformers modules after the transformer, or the
    mean over real tokens.
    """
    st = getattr(model, "model", None)
    if hasattr(st, "tokenizer") and hasattr(st, "max_seq_length"):  # a SentenceTransformer
        rest = list(st)[1:]

        def st_pool(hidden: Any, mask: Any) -> Any:
            features = {"token_embeddings": hidden, "attention_mask": mask}
            for module in rest:
                features = module(features)
            return features["sentence_embedding"]

        return st[0].auto_model, st.tokenizer, int(st.max_seq_length), st_pool

    def mean_pool(hidden: Any, mask: Any) -> Any:
        m = mask.unsqueeze(-1).to(hidden.dtype)
        return (hidden * m).sum(dim=1) / m.sum(dim=1).clamp(min=1e-9)

    return model.model, model.tokenizer, int(model.max_length), mean_pool


def encoder_flop_model(transformer: Any) -> FlopModel:
    """The :class:`FlopModel` of an encoder: non-embedding parameters less the pooler.

    A BERT pooler runs on one token per text, not on every token, so it is left out.
    """
    pooler = getattr(transformer, "pooler", None)
    skip = sum(p.numel() for p in pooler.parameters()) if pooler is not None else 0
    whole = flop_model(transformer)
    return dataclasses.replace(whole, params=whole.params - skip)


def post_flops(flops: FlopModel, lengths: list[int]) -> int:
    """FLOPs to encode texts of these token counts, each alone and without padding."""
    return sum(flops.bidirectional(n) for n in lengths)


class _OnnxModel(EmbeddingModel):
    """The onnx experiment: the transformer on onnxruntime, then the model's own pooling."""

    def __init__(self, model: Any) -> None:
        import warnings

        import onnxruntime as ort
        import torch

        self.transformer, self.tokenizer, self.max_length, self.pool = _parts(model)
        self.dim = model.dim
        sample = self.tokenizer(["hello world", "a longer second text"], padding=True,
                                return_tensors="pt")
        self.names = list(sample.keys())
        names, transformer = self.names, self.transformer

        class Wrapper(torch.nn.Module):  # positional inputs -> the model's keyword arguments
            def __init__(self) -> None:
                super().__init__()
                self.inner = transformer

            def forward(self, *inputs: Any) -> Any:
                return self.inner(**dict(zip(names, inputs, strict=True))).last_hidden_state

        axes = {n: {0: "batch", 1: "tokens"} for n in [*names, "hidden"]}
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = torch.get_num_threads()
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        with tempfile.TemporaryDirectory(prefix="prbench-onnx-") as folder:
            path = os.path.join(folder, "encoder.onnx")
            with torch.no_grad(), warnings.catch_warnings():  # tracer notes, legacy exporter
                warnings.simplefilter("ignore")
                torch.onnx.export(Wrapper().eval(), tuple(sample[n] for n in names), path,
                                  input_names=names, output_names=["hidden"],
                                  dynamic_axes=axes, opset_version=17, dynamo=False)
            self.session = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])

    def token_counts(self, texts: Any) -> list[int]:
        """Token counts after truncation (the batches sort by them)."""
        return [len(ids) for ids in self.tokenizer(
            list(texts), truncation=True, max_length=self.max_length, verbose=False)["input_ids"]]

    def forward(self, texts: Any) -> Any:
        """One batch's embeddings: onnxruntime's hidden states, the model's pooling."""
        import numpy as np
        import torch

        batch = self.tokenizer(list(texts), padding=True, truncation=True,
                               max_length=self.max_length, return_tensors="np")
        feeds = {n: batch[n].astype(np.int64) for n in self.names}
        hidden = self.session.run(None, feeds)[0]
        with torch.inference_mode():
            pooled = self.pool(torch.from_numpy(hidden),
                               torch.from_numpy(feeds["attention_mask"]))
        return pooled.float().numpy()


def _onnx_missing() -> str | None:
    """Why the onnx experiment cannot run here, or ``None``."""
    import importlib.util

    for name in ("onnxruntime", "onnx"):
        if importlib.util.find_spec(name) is None:
            return f"{name} not installed"
    return None


def _before(encoder, texts: list[str]):
    """The encoder's model fed in record order, 256 texts per step (the old order of work)."""
    import numpy as np

    model = encoder._get_model()
    step = max(encoder.batch_size * 8, 256)
    return np.concatenate([model.embed(texts[i : i + step], encoder.batch_size)
                           for i in range(0, len(texts), step)])


def _overlap(records, questions, posts, ref_q, ref_p, k: int) -> float:
    """Mean top-k overlap of each record's post ranking with the reference ranking."""
    import numpy as np

    shares, start = [], 0
    for i, r in enumerate(records):
        n = len(r.profile)
        kk = min(k, n)
        mine = np.argsort(-(posts[start : start + n] @ questions[i]), kind="stable")[:kk]
        ref = np.argsort(-(ref_p[start : start + n] @ ref_q[i]), kind="stable")[:kk]
        shares.append(len(set(mine) & set(ref)) / kk)
        start += n
    return float(sum(shares) / len(shares))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="minilm",
                        help="comma list: minilm, contriever, a hub id or a folder")
    parser.add_argument("--backends", default="default,torch,bf16,bf16-weights,compile,int8,onnx",
                        help="comma list: default (what prbench ships), torch (fp32), bf16 "
                             "(autocast), bf16-weights, openvino (fp32), openvino-bf16, "
                             "compile, int8, onnx (compile, int8 and onnx are experiments, not "
                             "shipped)")
    parser.add_argument("--data", default="sample,synthetic",
                        help="comma list: sample (the bundled sample's real posts), synthetic")
    parser.add_argument("--records", type=int, default=4, help="synthetic records")
    parser.add_argument("--max-posts", type=int, default=60, help="posts per synthetic record")
    parser.add_argument("--batch-size", type=int, default=32,
                        help="texts per forward pass of every row but default")
    parser.add_argument("--threads", type=int, default=None,
                        help="CPU threads of every row but default (default: torch's count)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--k", default="5,10")
    parser.add_argument("--repeats", type=int, default=3,
                        help="timed rounds per path, taken in turns (the fastest counts)")
    args = parser.parse_args()
    backends = args.backends.split(",")
    unknown = [b for b in backends if b not in BACKENDS]
    if unknown:
        parser.error(f"unknown backend {unknown[0]!r}; choose from {', '.join(BACKENDS)}")
    datasets = args.data.split(",")
    if bad := [d for d in datasets if d not in ("sample", "synthetic")]:
        parser.error(f"unknown data {bad[0]!r}; choose from sample, synthetic")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ["PRBENCH_CACHE_DIR"] = tempfile.mkdtemp(prefix="prbench-bench-")

    import torch

    from prbench.devices import native_bf16, torch_device

    device = torch_device(args.device)
    args.threads = args.threads or torch.get_num_threads()
    native, why = native_bf16(str(device))
    peaks = {d: measure_peak_flops(device, d, exact=True) for d in ("float32", "bfloat16")}
    print(f"device {args.device}, batch {args.batch_size}, {args.threads} thread(s) (every row "
          f"but default); cache off; bf16 native: "
          f"{'yes' if native else 'no'} ({why}); matmul peak fp32 "
          f"{peaks['float32'] / 1e9:.1f}, bf16 {peaks['bfloat16'] / 1e9:.1f} GFLOP/s; "
          f"load {os.getloadavg()[0]:.1f} (1-min), {_others()} thread(s) of other processes "
          "runnable now")
    first = None
    for data in datasets:
        records = sample_records() if data == "sample" else make_records(args.records,
                                                                          args.max_posts)
        for model in args.models.split(","):
            got = _table(model, data, records, backends, args, device, peaks)
            first = first or got
    print("overlap: share of each record's top-k posts (vs the fp32 torch ranking) kept; "
          "MFU: real-token FLOPs (no padding) / wall time / the matmul peak of the row's "
          "precision; full set: 2,830 records x ~125 posts")
    if first is not None:
        print(summary_line(*first))


def _others() -> str:
    """Threads of other processes that want a core now (what ``embed_threads=auto`` reads)."""
    from prbench.devices import runnable_elsewhere

    seen = runnable_elsewhere()
    return "?" if seen is None else f"{seen:.1f}"


def summary_line(speedup: float, top10: float) -> str:
    """The last line: posts/s of ``default`` over ``torch`` and default's top-10 overlap."""
    return f"default/fp32 = {speedup:.2f}× top10 = {top10:.3f}"


def _encoder(model: str, path: str, args: argparse.Namespace):
    """The encoder of one row, warmed up (``None`` with the reason printed when it cannot run)."""
    from prbench.profiles.embed import Encoder, EncoderSpec

    if path == "default":  # exactly what prbench ships: every encoder option at its default
        return Encoder(EncoderSpec(model=model), device=args.device, cache=False)
    backend = "openvino" if path.startswith("openvino") else "torch"
    enc = Encoder(EncoderSpec(model=model, embed_dtype=PRECISION[path], embed_backend=backend),
                  device=args.device, batch_size=args.batch_size, cache=False,
                  threads=args.threads)
    if path == "int8":  # a private copy of the model, quantised in place
        enc._model = _int8_copy(enc._get_model())
    elif path == "onnx":  # exported into a temporary folder, then loaded
        enc._model = _OnnxModel(enc._get_model())
    elif path == "compile":  # a private copy, compiled (the first calls compile)
        enc._model = _compiled_copy(enc._get_model())
    return enc


def _table(model: str, data: str, records: list, backends: list[str],
           args: argparse.Namespace, device: Any,
           peaks: dict[str, float]) -> tuple[float, float] | None:
    """Time every path of one encoder on one data set and print its rows and ceilings.

    The paths are timed in turns, ``--repeats`` rounds, and each keeps its fastest round: on a
    shared machine a burst of other work then slows one round of one path, not a whole row.

    Returns:
        ``(default posts/s / torch posts/s, default's top-10 overlap)`` when both rows ran.
    """
    from prbench.model_ref import ModelUnavailableError

    texts = [p.text for r in records for p in r.profile]
    questions = [r.question for r in records]
    half = texts[: len(texts) // 2]
    ks = [int(k) for k in args.k.split(",")]
    words = sum(len(t.split()) for t in texts) / len(texts)
    print(f"\n== {model} on {data}: {len(records)} records, {len(texts)} posts "
          f"(mean {words:.0f} words); each path timed {args.repeats}x in turns, fastest kept")
    encoders: dict[str, Any] = {}
    first: dict[str, float] = {}
    for path in ["before", *backends]:
        if path in ("int8", "onnx") and device.type != "cpu":
            print(f"{model:<12} {path:<12} skipped: the {path} experiment runs on a CPU only")
            continue
        if path == "onnx" and (why := _onnx_missing()):
            print(f"{model:<12} {path:<12} {why}")
            continue
        try:
            enc = _encoder(model, path, args)
            warm, _ = timed(lambda enc=enc: enc.encode(texts[:8]), args.device)
            if path in WARM_ALL:  # every new shape may compile: one full pass first
                warm += timed(lambda enc=enc: enc.encode(texts), args.device)[0]
            first[path] = warm
        except ModelUnavailableError as exc:
            print(f"{model:<12} skipped: {exc}")
            return
        except Exception as exc:  # an experiment that does not run here says why
            if path in ("compile", "int8", "onnx"):
                print(f"{model:<12} {path:<12} skipped: {type(exc).__name__}: "
                      f"{' '.join(str(exc).split())[:120]}")
                continue
            raise
        encoders[path] = enc
    if "torch" not in encoders or "before" not in encoders:
        return None
    transformer, tokenizer, max_length, _ = _parts(encoders["before"]._get_model())
    lengths = [len(ids) for ids in tokenizer(
        texts, truncation=True, max_length=max_length, verbose=False)["input_ids"]]
    per_post = post_flops(encoder_flop_model(transformer), lengths) / len(texts)
    tokens = sum(lengths) / len(lengths)
    best: dict[str, float] = {}
    best_half: dict[str, float] = {}
    vectors: dict[str, Any] = {}
    for _ in range(args.repeats):
        for path, enc in encoders.items():
            run = (lambda enc=enc: _before(enc, texts)) if path == "before" else (
                lambda enc=enc: enc.encode(texts))
            secs, vectors[path] = timed(run, args.device)
            best[path] = min(best.get(path, float("inf")), secs)
            if path in FITTED:  # time = fixed + per_post x posts, from two sizes
                t_half, _ = timed(lambda enc=enc: enc.encode(half), args.device)
                best_half[path] = min(best_half.get(path, float("inf")), t_half)
    if "default" in encoders:
        enc = encoders["default"]
        described = enc.describe()
        print(f"default: embed_dtype={enc.dtype} ({described['embed_dtype_reason']}), "
              f"embed_backend={described['embed_backend']} ({described['embed_backend_reason']}), "
              f"batch {enc.batch_size}, threads {enc.threads_used}")
    print(f"{'model':<12} {'path':<12} {'posts/s':>8} {'vs before':>9} {'vs fp32':>8} " + " ".join(
        f"{'top' + str(k):>6}" for k in ks) + (f" {'GFLOP/s':>8} {'MFU':>6} {'s/post':>8} "
                                               f"{'fixed s':>8} {'full set':>9} {'first s':>7}"))
    ref_q, ref_p = encoders["torch"].encode(questions), vectors["torch"]
    base, fp32 = len(texts) / best["before"], len(texts) / best["torch"]
    # timed again after the rows: on a shared machine the best of the two is the fairer peak
    for dtype in peaks:
        peaks[dtype] = max(peaks[dtype], measure_peak_flops(device, dtype, exact=True))
    result = None
    for path, enc in encoders.items():
        rate = len(texts) / best[path]
        if path in best_half:
            cost = max(1e-9, (best[path] - best_half[path]) / max(1, len(texts) - len(half)))
            fixed = max(0.0, best[path] - cost * len(texts))
            fit = (f" {cost:>8.4f} {fixed:>8.2f} "
                   f"{(fixed + cost * FULL_SET_POSTS) / 3600:>8.2f}h")
        else:
            fit = f" {'':>8} {'':>8} {FULL_SET_POSTS / rate / 3600:>8.2f}h"
        q = enc.encode(questions)
        overlaps = [_overlap(records, q, vectors[path], ref_q, ref_p, k) for k in ks]
        if path == "default":
            result = (rate / fp32, _overlap(records, q, vectors[path], ref_q, ref_p, 10))
        achieved = rate * per_post
        peak = peaks["float32" if enc.dtype == "float32" else "bfloat16"]
        print(f"{model:<12} {path:<12} {rate:>8.1f} {rate / base:>8.2f}x {rate / fp32:>7.2f}x "
              + " ".join(f"{o:>6.3f}" for o in overlaps)
              + f" {achieved / 1e9:>8.1f} {achieved / peak:>6.1%}" + fit
              + f" {first.get(path, 0.0):>7.1f}")
    for dtype, peak in peaks.items():
        ceiling = peak / per_post
        verdict = "ABOVE the ceiling: out of reach" if 3 * base > ceiling else "below the ceiling"
        print(f"{model:<12} {dtype} ceiling: peak {peak / 1e9:.1f} GFLOP/s (best of the run), "
              f"{per_post / 1e9:.3f} GFLOP/post (mean {tokens:.0f} tokens, truncated at "
              f"{max_length}) -> {ceiling:.1f} posts/s at 100% of the {dtype} peak; 3x before = "
              f"{3 * base:.1f} posts/s is {verdict} ({3 * base / ceiling:.0%} of it)")
    return result


if __name__ == "__main__":
    main()
