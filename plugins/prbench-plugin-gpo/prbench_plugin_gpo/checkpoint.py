"""GPO checkpoints: the format tag, reading one safely, and describing how it was trained.

The scorer and the ``prbench-gpo`` command both read checkpoints through this module, so neither
imports the other.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from prbench_plugin_gpo.errors import GPOError

#: Checkpoint format tag (bumped when the layout changes; 3: the ``tnp`` network of
#: ``config=paper`` and the training pairs' content hashes).
FORMAT = "prbench-gpo/3"


def load_checkpoint(path: str | Path) -> dict[str, Any]:
    """Read a ``prbench-gpo train`` checkpoint (tensors and plain data only).

    The file is read with ``torch.load(weights_only=True)``: a checkpoint that would run code
    when unpickled is refused, never loaded.

    Raises:
        GPOError: the file cannot be read, is not a safe tensor-and-data file, or is not a GPO
            checkpoint of this format (one line naming the file).
    """
    import torch

    try:
        ckpt = torch.load(Path(path).expanduser(), map_location="cpu", weights_only=True)
    except Exception as exc:
        reason = " ".join(str(exc).split())[:300]
        if "weights_only" in reason or "Unsupported global" in reason:
            reason = ("it holds objects that would run code when loaded (only tensors and plain "
                      "data are accepted)")
        raise GPOError(f"gpo: cannot read checkpoint {path}: {reason}") from None
    if not isinstance(ckpt, dict) or ckpt.get("format") != FORMAT:
        found = ckpt.get("format") if isinstance(ckpt, dict) else None
        hint = f" (it is {found}: train it again)" if isinstance(found, str) else ""
        raise GPOError(f"gpo: {path} is not a {FORMAT} checkpoint (from `prbench-gpo "
                       f"train`){hint}")
    if not ckpt.get("folds"):
        raise GPOError(f"gpo: checkpoint {path} holds no trained fold")
    return ckpt


def file_sha256(path: Path) -> str:
    """The sha256 of a file, read in blocks."""
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def trained_on(checkpoint: dict[str, Any]) -> str:
    """How a checkpoint was trained, in words (results, manifests and the summary say it)."""
    data = checkpoint.get("data") or {}
    if checkpoint.get("mode") == "train-file":
        users = len(checkpoint.get("train_users") or [])
        sha = str(data.get("sha256") or "unknown")[:12]
        return (f"trained on train file sha256:{sha} ({users} users, "
                f"{checkpoint.get('n_train_pairs', '?')} labelled pairs)")
    return (f"trained on benchmark pairs, k-fold ({checkpoint['config']['folds']} folds over "
            "users; each record scored by the network that held its user out)")


def summary(checkpoint: dict[str, Any]) -> dict[str, Any]:
    """The checkpoint without weights (what ``prbench-gpo info`` prints)."""
    return {
        "format": checkpoint["format"], "mode": checkpoint.get("mode"),
        "trained_on": trained_on(checkpoint), "config": checkpoint["config"],
        "net": checkpoint["net"], "embedder": checkpoint.get("embedder"),
        "data": checkpoint.get("data"),
        "folds": [{k: v for k, v in f.items() if k != "state_dict"} | {
            "n_train": len(f["train_ids"]), "n_eval": len(f["eval_ids"])}
            for f in checkpoint["folds"]],
        "n_pool_posts": len(checkpoint["pool_owners"]),
    }
