"""OpenRLHF reward function that asks a ``prbench serve`` started with ``--api_key_env``.

OpenRLHF's own HTTP client (``--reward.remote_url http://HOST:8000/get_reward``) sends no
``Authorization`` header, so a server that needs a token answers it 401. Give OpenRLHF this file
instead: ``--reward.remote_url /path/to/openrlhf_reward_func.py``. Its agent executor loads
``reward_func`` and calls it with ``(queries, prompts, labels)``; the function posts them to the
server with the token from ``$PRBENCH_REWARD_API_KEY`` and returns the server's answer
(``rewards``, ``scores``, ``extra_logs``). The server's address comes from ``$PRBENCH_REWARD_URL``
(default ``http://127.0.0.1:8000``). Needs ``prbench`` importable in the rollout workers.
"""

from typing import Any

from prbench.downstream.serve_client import RewardClient

_CLIENT = RewardClient()  # reads $PRBENCH_REWARD_URL now and $PRBENCH_REWARD_API_KEY per request


def reward_func(queries: list[str], prompts: list[str], labels: list[Any]) -> dict[str, Any]:
    """Rewards of ``queries`` (prompt + response) from the prbench reward server."""
    return _CLIENT.reward_answer(queries, prompts, labels)
