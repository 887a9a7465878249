"""lm-eval's git commit of the working directory, looked up without git's complaint.

lm-eval 0.4.13 records the commit of the folder it runs in (``results["git_hash"]``, from
``lm_eval.loggers.utils.get_git_commit_hash``): it runs ``git describe --always`` with standard
error left on the terminal, so every run outside a git checkout printed ``fatal: not a git
repository (or any of the parent directories): .git``, a line that reads like a failure and says
nothing about the evaluation. While a ``prbench`` model is open (:func:`install`, called by the
model), ``lm_eval.evaluator``'s name for that function points at :func:`git_commit_hash`: the same
command and the same fallback (lm-eval's own ``get_commit_from_path`` on the working directory),
with git's standard error discarded, so the recorded value is unchanged.

No environment variable quiets that message (``GIT_DIR`` and friends only change which folder
git complains about), and lm-eval offers no switch for the lookup; its module attribute is the
one place to reach. Nothing else of lm-eval is changed.
"""

from __future__ import annotations

import os
import subprocess
from typing import Any

_MARK = "_prbench_quiet_git"


def git_commit_hash() -> Any:
    """What lm-eval's ``get_git_commit_hash`` returns, with git's standard error discarded.

    Returns:
        ``git describe --always`` of the working directory, else the commit lm-eval's
        ``get_commit_from_path`` reads from a ``.git`` folder there, else ``None``.
    """
    from lm_eval.loggers.utils import get_commit_from_path

    try:
        out = subprocess.check_output(["git", "describe", "--always"],
                                      stderr=subprocess.DEVNULL)
        return out.strip().decode()
    except (subprocess.CalledProcessError, FileNotFoundError):
        return get_commit_from_path(os.getcwd())


def install() -> None:
    """Point ``lm_eval.evaluator``'s git lookup at :func:`git_commit_hash` (idempotent)."""
    import lm_eval.evaluator as evaluator

    if getattr(evaluator.get_git_commit_hash, _MARK, False):
        return
    setattr(git_commit_hash, _MARK, True)
    evaluator.get_git_commit_hash = git_commit_hash


__all__ = ["git_commit_hash", "install"]
