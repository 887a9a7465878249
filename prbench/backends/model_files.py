"""Where a transformers model's files are, checked before transformers is asked for them.

transformers reports a missing model in ways that mislead or drown the cause: a local path that
does not exist becomes "Repo id must use alphanumeric chars" (the path is read as a hub id), and
a hub model that is not in the local cache while ``HF_HUB_OFFLINE`` is set ends in a 120-line
traceback. :func:`check_model_files` says either in one line before anything is loaded, and
:func:`loading` turns transformers' refusal of a model that needs its own code (an ``auto_map``)
into the one line :func:`prbench.model_ref.remote_code_error` gives everywhere.

The backends that load weights from transformers (``hf-classifier`` and the plugins built on it,
the ``hf`` causal-LM backend of ``llm-judge``, ``rm-r1`` and the other generative judges) call
these; the embedding models of the profile builders have their own resolver
(:func:`prbench.model_ref.resolve_model`), which follows the same rules.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from pathlib import Path

from prbench.errors import PrbenchUserError

#: what a hub id looks like (``org/name`` or ``name``); anything else is taken for a path
HUB_ID = re.compile(r"^[A-Za-z0-9][\w.\-]*(/[\w.\-]+)?$")


class ModelFilesError(PrbenchUserError, OSError):
    """A model that cannot be found: no such local folder, or not cached while offline."""


def _looks_like_path(model: str) -> bool:
    return model.startswith((".", "/", "~")) or not HUB_ID.match(model) or model.count("/") > 1


def check_model_files(model: str, revision: str | None, *, what: str,
                      marker: str = "config.json") -> None:
    """Refuse, in one line, a model transformers could not find.

    Args:
        model: a local folder or a hub id (a ``.gguf`` file is accepted as it is).
        revision: the hub revision (``None``: the default branch).
        what: how the message names the model's owner, e.g. ``"hf-classifier pretrained"``.
        marker: a file every copy of the model has (looked up in the hub cache when offline).

    Raises:
        ModelFilesError: a path that does not exist or is a file, a folder without ``marker``
            (a folder that is not a saved model), or a hub model that is not in
            the local Hugging Face cache while ``HF_HUB_OFFLINE``/``TRANSFORMERS_OFFLINE`` is set.
    """
    from prbench.model_ref import HUB_ID_MAX, hub_offline, model_name_problem

    problem = model_name_problem(model)
    if problem:  # the file system would answer "File name too long", an OSError
        raise ModelFilesError(f"{what}: {problem}; name a local folder or a hub id (org/name)")
    local = Path(model).expanduser()
    if local.is_dir():
        if (local / marker).is_file():
            return
        raise ModelFilesError(
            f"{what}: the folder {model} has no {marker}, so it is not a saved model; name the "
            f"folder that holds {marker} (the one `save_pretrained` wrote)"
        )
    if local.is_file() and local.suffix == ".gguf":
        return
    if local.exists():
        raise ModelFilesError(f"{what}: {model} is a file, not a model folder")
    if _looks_like_path(model) or len(model) > HUB_ID_MAX:
        raise ModelFilesError(
            f"{what}: no such local folder {model} (a path is read as a local folder; a hub id "
            "looks like org/name)"
        )
    if not hub_offline():
        return  # transformers downloads it (its own errors name the hub id)
    from huggingface_hub import try_to_load_from_cache

    if isinstance(try_to_load_from_cache(model, marker, revision=revision), str):
        return
    at = f" at revision {revision!r}" if revision not in (None, "", "main") else ""
    raise ModelFilesError(
        f"{what}: {model!r}{at} is not in the local Hugging Face cache and HF_HUB_OFFLINE (or "
        "TRANSFORMERS_OFFLINE) is set, so it cannot be downloaded; fetch it on a machine with "
        f"internet (`hf download {model}`) and copy the cache here, or pass a local folder"
    )


@contextlib.contextmanager
def loading(model: str) -> Iterator[None]:
    """Around transformers' ``from_pretrained``: a model that needs its own code is one line.

    Raises:
        prbench.model_ref.ModelUnavailableError: the model needs ``trust_remote_code``
            (the message names the option); other errors pass through unchanged.
    """
    from prbench.model_ref import remote_code_error

    try:
        yield
    except (ValueError, OSError) as exc:
        error = remote_code_error(model, exc)
        if error is None:
            raise
        raise error from exc


__all__ = ["HUB_ID", "ModelFilesError", "check_model_files", "loading"]
