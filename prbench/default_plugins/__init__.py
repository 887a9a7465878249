"""Built-in components. They register through the same hooks as third-party plugins.

Each module listed in :data:`DEFAULT_PLUGINS` is a pluggy plugin loaded first by
:class:`prbench.plugins.PluginRegistry` under the name ``prbench.<module>``.
"""

DEFAULT_PLUGINS: tuple[str, ...] = (
    "prbench.default_plugins.baselines",
    "prbench.default_plugins.hf",
    "prbench.default_plugins.judges",
    "prbench.default_plugins.profiles",
    "prbench.default_plugins.embedding",
    "prbench.default_plugins.tasks",
    "prbench.default_plugins.downstream",
)
