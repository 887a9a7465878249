"""The interpreter start-up hook that makes plain ``lm_eval`` see prbench (lm-eval 0.4.13).

lm-eval 0.4.13 discovers no plugins: it knows only its own models and task folders. The wheel
installs ``prbench_lm_eval.pth`` into site-packages; Python runs that one line at every start, and
it imports this file (shipped as the top-level module ``_prbench_lm_eval_startup``). This file only
puts a small finder at the front of ``sys.meta_path``; it imports nothing but ``os`` and ``sys``
(both already loaded by then), so an interpreter that never imports ``lm_eval`` pays for one tiny
module and one set lookup per later import.

When ``lm_eval.models`` or ``lm_eval.tasks.manager`` is imported (or lm-eval's command-line
modules ``lm_eval._cli.utils`` and ``lm_eval.config.evaluate_config``), the finder lets the real
loader run the module and then calls :func:`prbench.harness.lm_eval_compat.on_lm_eval_import`, which
registers the ``prbench`` model *after* lm-eval's built-in models and adds prbench's task folders
to every ``TaskManager``. The bridge stands aside where lm-eval discovers the ``lm_eval.models`` /
``lm_eval.tasks`` entry points itself.

Opt out with ``PRBENCH_NO_LM_EVAL_HOOK=1``. A failure in the bridge is reported on stderr and never
stops lm-eval.
"""

import os
import sys

OPT_OUT_VARIABLE = "PRBENCH_NO_LM_EVAL_HOOK"
#: modules after whose import the bridge runs
TARGETS = frozenset(
    # evaluate_config checks lm_eval's flags and _cli.utils parses their JSON values (before any
    # model or task is imported): importing either installs the clean-errors hook in time
    {"lm_eval.models", "lm_eval.tasks.manager", "lm_eval.config.evaluate_config",
     "lm_eval._cli.utils"}
)
_MARK = "_prbench_lm_eval_hook"


def opted_out(environ=None):
    """True when ``PRBENCH_NO_LM_EVAL_HOOK`` is set to a true value (1, true, yes, on)."""
    value = (os.environ if environ is None else environ).get(OPT_OUT_VARIABLE, "")
    return value.strip().lower() in {"1", "true", "yes", "on"}


def _after_import(name, module):
    try:
        from prbench.harness.lm_eval_compat import on_lm_eval_import
    except Exception as exc:  # prbench missing or broken: lm-eval must still work
        sys.stderr.write(f"prbench: lm-eval hook disabled, cannot import prbench: {exc}\n")
        return
    try:
        on_lm_eval_import(name, module)
    except Exception as exc:
        sys.stderr.write(f"prbench: lm-eval hook failed after importing {name}: {exc!r}\n")


class _LoaderProxy:
    """Wraps a module's real loader and calls the bridge once the module has run."""

    def __init__(self, loader, name):
        self._loader = loader
        self._name = name

    def create_module(self, spec):
        """Let the real loader create the module (or use the default)."""
        create = getattr(self._loader, "create_module", None)
        return create(spec) if create is not None else None

    def exec_module(self, module):
        """Run the module with the real loader, then call the bridge."""
        module.__loader__ = self._loader
        if getattr(module, "__spec__", None) is not None:
            module.__spec__.loader = self._loader
        self._loader.exec_module(module)
        _after_import(self._name, module)

    def __getattr__(self, attr):
        return getattr(self._loader, attr)


class LmEvalHookFinder:
    """A meta-path finder that only ever answers for :data:`TARGETS`, by delegation."""

    _prbench_lm_eval_hook = True

    def find_spec(self, fullname, path=None, target=None):
        """Find the real spec with the other finders and wrap its loader (targets only)."""
        if fullname not in TARGETS:
            return None
        for finder in sys.meta_path:
            if getattr(finder, _MARK, False):
                continue
            find = getattr(finder, "find_spec", None)
            if find is None:
                continue
            spec = find(fullname, path, target)
            if spec is not None:
                break
        else:
            return None
        if spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        spec.loader = _LoaderProxy(spec.loader, fullname)
        return spec

    def invalidate_caches(self):
        """Nothing cached here."""


def installed():
    """True when a finder of this hook is on ``sys.meta_path``."""
    return any(getattr(f, _MARK, False) for f in sys.meta_path)


def install():
    """Put the finder first on ``sys.meta_path`` (once), unless opted out.

    Returns:
        True when the finder is (now) installed.
    """
    if opted_out():
        return False
    if not installed():
        sys.meta_path.insert(0, LmEvalHookFinder())
    return True


def uninstall():
    """Remove every finder of this hook from ``sys.meta_path`` (tests)."""
    sys.meta_path[:] = [f for f in sys.meta_path if not getattr(f, _MARK, False)]


install()
