"""A verl custom reward function that asks a running ``prbench serve`` for rewards.

verl loads a reward function from a file or module (``reward.custom_reward_function.path``, e.g.
``pkg://prbench.downstream.verl_reward``) by name (``reward.custom_reward_function.name``) and
passes ``reward.custom_reward_function.reward_kwargs`` as keyword arguments. verl 0.9.1's
``main_ppo`` reads these keys under ``reward.`` only (the top-level ``custom_reward_function.*``
is moved there by its ``fully_async_main`` alone). Two functions are offered:

- :func:`compute_score` — the per-response signature
  ``compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs)`` used by
  verl's default ``naive`` reward manager; concurrent calls are coalesced into batches by the
  server;
- :func:`compute_score_batch` — the batch signature
  ``(data_sources, solution_strs, ground_truths, extra_infos, **kwargs)`` of the ``batch`` reward
  manager of verl releases that have one (one HTTP request per training batch); verl 0.9.1 has
  none.

The user context (who is asking) travels in each row's ``extra_info`` — put ``question`` and
``profile`` (rendered text or a list of posts ``{id, category, text}``), and optionally
``record_id``, ``category``, ``domain`` there when preparing the parquet files; a ``prbench``
sub-dict with the same keys works too. Without a question the row cannot be scored (an error).
``ground_truth`` is not used by the reward model.

Keyword arguments (``+reward.custom_reward_function.reward_kwargs.NAME=VALUE``): ``server_url``
(default ``$PRBENCH_REWARD_URL`` or ``http://127.0.0.1:8000``), ``timeout`` (seconds),
``on_nan`` (``raise`` or a number that replaces a non-finite reward, e.g. ``0``).
See docs/downstream.md, "Reward server", for the full command line (tested in tests/test_peers.py).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Any

from prbench.downstream.serve_client import RewardClient

_CLIENTS: dict[tuple[str, float], RewardClient] = {}
_LOCK = threading.Lock()
_KEYS = ("question", "profile", "record_id", "category", "domain")


def _client(server_url: str, timeout: float) -> RewardClient:
    with _LOCK:
        key = (server_url, timeout)
        if key not in _CLIENTS:
            _CLIENTS[key] = RewardClient(server_url, timeout=timeout)
        return _CLIENTS[key]


def item_from_row(solution_str: str, extra_info: Any, where: str) -> dict[str, Any]:
    """A native server item from one verl row.

    Raises:
        ValueError: ``extra_info`` carries no question.
    """
    info: Mapping[str, Any] = extra_info if isinstance(extra_info, Mapping) else {}
    if isinstance(info.get("prbench"), Mapping):
        info = {**info, **info["prbench"]}
    item = {k: info[k] for k in _KEYS if info.get(k) is not None}
    if not isinstance(item.get("question"), str):
        raise ValueError(
            f"{where}: extra_info has no 'question'; put the user's question (and 'profile') in "
            "each row's extra_info when preparing the data"
        )
    if hasattr(item.get("profile"), "tolist"):  # numpy arrays from parquet
        item["profile"] = item["profile"].tolist()
    item["response"] = solution_str
    return item


def _finish(values: Sequence[float | None], on_nan: Any) -> list[float]:
    out = []
    for i, v in enumerate(values):
        if v is None:
            if on_nan == "raise":
                raise ValueError(
                    f"the reward server returned a non-finite reward for item {i}; pass "
                    "reward_kwargs.on_nan=0 to replace such rewards"
                )
            v = float(on_nan)
        out.append(float(v))
    return out


def compute_score(
    data_source: Any,
    solution_str: str,
    ground_truth: Any,
    extra_info: Any = None,
    server_url: str = "",
    timeout: float = 300.0,
    on_nan: Any = "raise",
    **kwargs: Any,
) -> float:
    """The reward of one response (verl's per-item custom reward signature)."""
    item = item_from_row(solution_str, extra_info, f"row of {data_source!r}")
    return _finish(_client(server_url, timeout).score([item]), on_nan)[0]


def compute_score_batch(
    data_sources: Sequence[Any],
    solution_strs: Sequence[str],
    ground_truths: Sequence[Any],
    extra_infos: Sequence[Any],
    server_url: str = "",
    timeout: float = 300.0,
    on_nan: Any = "raise",
    **kwargs: Any,
) -> list[float]:
    """Rewards of a batch of responses (verl's ``batch`` reward manager signature)."""
    items = [
        item_from_row(s, e, f"row {i} of {d!r}")
        for i, (d, s, e) in enumerate(zip(data_sources, solution_strs, extra_infos, strict=True))
    ]
    return _finish(_client(server_url, timeout).score(items), on_nan)
