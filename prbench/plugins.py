"""The plugin manager and the component registry.

Plugins load in a fixed order: the built-in default plugins (:mod:`prbench.default_plugins`), then
installed distributions' entry points (group ``prbench``), then ``--plugin path.py`` files. Each
plugin's hooks are called one plugin at a time, so every component knows which plugin registered
it, and a plugin whose import or hook raises is recorded with its error and skipped while the
others keep working. A single bad registration (an invalid id, an id the same plugin already used,
options that are not a dataclass, a factory whose signature does not fit, a task folder that does
not exist) is recorded against its plugin (status ``partial``) and only that component is dropped.
Two plugins may register the same id: both stay available under their qualified ids
(``<namespace>/<id>``) and only asking for the bare, now ambiguous id is an error.

Environment variables:

- ``PRBENCH_LOAD_PLUGINS``: unset loads every installed plugin; empty loads none (the built-ins
  still load); a comma list loads only those entry-point names or distribution names.
- ``PRBENCH_DISABLE_PLUGINS``: a comma list of plugin names (entry-point, distribution, file stem
  or built-in module such as ``prbench.baselines``) never to load.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.metadata
import importlib.util
import os
import sys
import traceback
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pluggy

from prbench import hookspecs
from prbench.errors import PrbenchUserError
from prbench.factory_check import callable_problem, factory_problem
from prbench.options import OptionsError, describe_options, parse_options, suggest

ENTRY_POINT_GROUP = "prbench"
BUILTIN_NAMESPACE = "prbench"

#: hook name -> component kind
COMPONENT_HOOKS: dict[str, str] = {
    "register_scorers": "scorer",
    "register_profile_builders": "profile-builder",
    "register_pair_generators": "pair-generator",
    "register_downstream_evaluators": "downstream-evaluator",
}
KINDS = tuple(COMPONENT_HOOKS.values())


class PluginError(PrbenchUserError, RuntimeError):
    """A problem with the set of loaded plugins (e.g. two plugins registered one name)."""


class UnknownComponentError(PrbenchUserError, KeyError):
    """A component id matches no registered component."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "unknown component"


class AmbiguousComponentError(UnknownComponentError):
    """A bare component id that two or more plugins registered; the message names them all."""


class _Rejected(Exception):
    """One registration a plugin made that cannot be kept (recorded against the plugin)."""


@dataclasses.dataclass
class PluginInfo:
    """What is known about one plugin: where it came from and what it did.

    Attributes:
        name: the plugin's name (entry-point name, ``prbench.<module>`` for built-ins, file stem).
        namespace: the qualifier in ``<namespace>/<id>`` component ids.
        origin: ``"builtin"``, ``"entry-point"`` or ``"file"``.
        source: the module path, entry-point value or file path.
        dist: the distribution name (``None`` for files).
        version: the distribution version (``None`` for files).
        hooks: the hook names the plugin implements.
        components: ``kind:id`` of each component it registered.
        task_dirs: task directories it registered.
        error: the error text if its import or a hook failed (the plugin is then skipped).
        problems: registrations that were dropped or are only reachable by qualified id, each
            with its reason (the plugin's other components keep working).
        disabled: why it was not loaded (env vars), or ``None``.
    """

    name: str
    namespace: str
    origin: str
    source: str
    dist: str | None = None
    version: str | None = None
    hooks: list[str] = dataclasses.field(default_factory=list)
    components: list[str] = dataclasses.field(default_factory=list)
    task_dirs: list[str] = dataclasses.field(default_factory=list)
    error: str | None = None
    problems: list[str] = dataclasses.field(default_factory=list)
    disabled: str | None = None

    @property
    def status(self) -> str:
        """``ok``, ``partial`` (some registrations dropped), ``failed`` or ``disabled``."""
        if self.disabled:
            return "disabled"
        if self.error:
            return "failed"
        if self.problems:
            return "partial" if (self.components or self.task_dirs) else "failed"
        return "ok"

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form (for ``prbench plugins --json`` and results manifests)."""
        data = dataclasses.asdict(self)
        data["status"] = self.status
        return data


@dataclasses.dataclass(frozen=True)
class Component:
    """One registered component: a lazily built scorer, profile builder, ...

    Attributes:
        kind: one of :data:`KINDS`.
        name: the component id.
        plugin: the name of the plugin that registered it.
        namespace: that plugin's namespace (for qualified ids).
        factory: ``factory(options)`` or a ``"module:attribute"`` string naming it.
        description: one line of help.
        options: the options dataclass, or ``None``.
        diagnostic: reads hidden fields; flagged in every report.
        tags: free-form labels.
        reads_profile: for a scorer, whether it reads the request's profile view; ``False``
            means the harness builds no profile for it (read without building the component).
    """

    kind: str
    name: str
    plugin: str
    namespace: str
    factory: Any
    description: str = ""
    options: type | None = None
    diagnostic: bool = False
    tags: tuple[str, ...] = ()
    reads_profile: bool = True

    @property
    def qualified_id(self) -> str:
        """``<namespace>/<name>``."""
        return f"{self.namespace}/{self.name}"

    def parse_options(self, raw: Mapping[str, Any] | None = None) -> Any:
        """Validate user options for this component (see :func:`prbench.options.parse_options`)."""
        return parse_options(self.options, dict(raw or {}), component=f"{self.kind} {self.name!r}")

    def resolve_factory(self) -> Callable[..., Any]:
        """Import the factory if it was given as a ``"module:attribute"`` string."""
        if callable(self.factory):
            return self.factory
        module_name, _, attr = str(self.factory).partition(":")
        module = importlib.import_module(module_name)
        obj: Any = module
        for part in attr.split("."):
            obj = getattr(obj, part)
        return obj

    def build(self, raw_options: Mapping[str, Any] | None = None) -> Any:
        """Validate the options and build the component.

        The factory is called as ``factory(options)`` when the component declares options and as
        ``factory()`` otherwise.

        Raises:
            OptionsError: invalid options.
            PluginError: the factory's signature does not fit that call (names the plugin).
        """
        options = self.parse_options(raw_options)
        factory = self.resolve_factory()
        problem = callable_problem(factory, takes_options=self.options is not None)
        if problem:
            raise PluginError(f"{self.kind} {self.name!r} of plugin {self.plugin!r} {problem}")
        return factory(options) if self.options is not None else factory()

    def describe_options(self) -> list[dict[str, str]]:
        """Option rows for ``prbench scorers --options``."""
        return describe_options(self.options)


def _split_env(value: str | None) -> set[str] | None:
    if value is None:
        return None
    return {v.strip() for v in value.split(",") if v.strip()}


class PluginRegistry:
    """Loads plugins and holds what they registered.

    Use :func:`get_registry` for the process-wide instance; build one directly in tests.
    """

    def __init__(
        self,
        *,
        plugin_files: Sequence[str | os.PathLike[str]] = (),
        load_entry_points: bool = True,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self._env = dict(os.environ if env is None else env)
        self.pm = pluggy.PluginManager(hookspecs.PROJECT_NAME)
        self.pm.add_hookspecs(hookspecs)
        self.plugins: dict[str, PluginInfo] = {}
        #: kind -> bare id -> the first component registered under it
        self.components: dict[str, dict[str, Component]] = {kind: {} for kind in KINDS}
        #: kind -> qualified id -> component (every component, ambiguous bare ids included)
        self.qualified: dict[str, dict[str, Component]] = {kind: {} for kind in KINDS}
        self.task_dirs: list[tuple[str, str, str]] = []  # (path, description, plugin)
        self._load_defaults()
        self.warnings: list[str] = []
        if load_entry_points:
            self._load_entry_points()
            self._check_load_list()
        for path in plugin_files:
            self._load_file(Path(path))

    # -- loading ---------------------------------------------------------------------------------

    def _disabled_reason(self, names: Iterable[str | None], *, external: bool) -> str | None:
        disabled = _split_env(self._env.get("PRBENCH_DISABLE_PLUGINS")) or set()
        names = [n for n in names if n]
        hit = [n for n in names if n in disabled]
        if hit:
            return f"PRBENCH_DISABLE_PLUGINS names {hit[0]!r}"
        if external:
            only = _split_env(self._env.get("PRBENCH_LOAD_PLUGINS"))
            if only is not None and not any(n in only for n in names):
                return "not in PRBENCH_LOAD_PLUGINS" if only else "PRBENCH_LOAD_PLUGINS is empty"
        return None

    def _load_defaults(self) -> None:
        from prbench.default_plugins import DEFAULT_PLUGINS

        version = _own_version()
        for module_name in DEFAULT_PLUGINS:
            short = module_name.rsplit(".", 1)[-1]
            info = PluginInfo(
                name=f"prbench.{short}",
                namespace=BUILTIN_NAMESPACE,
                origin="builtin",
                source=module_name,
                dist="prbench",
                version=version,
            )
            self._admit(info, lambda m=module_name: importlib.import_module(m), external=False)

    def _load_entry_points(self) -> None:
        for ep in sorted(
            importlib.metadata.entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name
        ):
            dist = getattr(ep, "dist", None)
            info = PluginInfo(
                name=ep.name,
                namespace=ep.name,
                origin="entry-point",
                source=ep.value,
                dist=dist.metadata["Name"] if dist is not None else None,
                version=dist.version if dist is not None else None,
            )
            self._admit(info, ep.load, external=True)

    def _check_load_list(self) -> None:
        """Warn about ``PRBENCH_LOAD_PLUGINS`` names that match no installed plugin."""
        only = _split_env(self._env.get("PRBENCH_LOAD_PLUGINS")) or set()
        known = {n for p in self.plugins.values() for n in (p.name, p.dist) if n}
        for name in sorted(only - known):
            self.warnings.append(
                f"PRBENCH_LOAD_PLUGINS names {name!r}, which matches no installed plugin"
                + suggest(name, known)
            )

    def _load_file(self, path: Path) -> None:
        package = _package_of(path) if path.is_file() else None
        stem = package[1].split(".")[0].removeprefix("prbench_plugin_") if package else path.stem
        info = PluginInfo(name=stem, namespace=stem, origin="file", source=str(path))
        if path.is_dir():
            info.error = f"is a folder: {_folder_hint(path)}"
            self._record(info)
            return
        if not path.is_file():
            info.error = f"plugin file not found: {path}"
            self._record(info)
            return
        if package is not None and stem in self.plugins:  # e.g. the same plugin, installed
            self._record(info)
            info.error = (f"a plugin named {stem!r} is already loaded "
                          f"({_origin(self.plugins[stem])}): if it is this one, installed, drop "
                          "--plugin; else rename the package")
            return

        def load() -> Any:
            if package is not None:  # a module of a package: imported as such, so that its
                root, dotted = package  # "package.module:Factory" strings resolve
                return _import_from(root, dotted, path)
            mod_name = f"prbench_file_plugin_{path.stem}_{abs(hash(str(path.resolve())))}"
            spec = importlib.util.spec_from_file_location(mod_name, path)
            if spec is None or spec.loader is None:
                raise ImportError(f"cannot import {path}")
            module = importlib.util.module_from_spec(spec)
            sys.modules[mod_name] = module
            spec.loader.exec_module(module)
            return module

        self._admit(info, load, external=False)

    def file_trouble(self) -> str | None:
        """One line for the first ``--plugin`` file that failed or dropped a registration.

        A bare id the file shares with another plugin is no trouble (both stay usable under
        their qualified ids).

        A file the user named on the command line is an error when it does not load whole (an
        installed plugin that fails is only reported: it must not take the others down).
        """
        for info in self.plugins.values():
            if info.origin != "file":
                continue
            dropped = [p for p in info.problems if " dropped" in p]  # not a shared bare id
            if info.error or dropped:
                return f"--plugin {info.source}: {info.error or dropped[0]}"
        return None

    def _record(self, info: PluginInfo) -> bool:
        """Add ``info`` to :attr:`plugins`; a second plugin of one name is recorded as failed.

        Returns:
            True when the plugin may load.
        """
        if info.name in self.plugins:
            other = self.plugins[info.name]
            info.error = (
                f"not loaded: another plugin is already named {info.name!r} ({_origin(other)}); "
                "rename one of them"
            )
            key = f"{info.name} ({info.source})"
            n = 2
            while key in self.plugins:
                key, n = f"{info.name} ({info.source}) #{n}", n + 1
            self.plugins[key] = info
            return False
        self.plugins[info.name] = info
        return True

    def _admit(self, info: PluginInfo, load: Callable[[], Any], *, external: bool) -> None:
        reason = self._disabled_reason([info.name, info.dist], external=external)
        if reason:
            info.disabled = reason
            self._record(info)
            return
        if not self._record(info):
            return
        try:
            module = load()
        except Exception as exc:  # a broken plugin must not take the others down
            info.error = _format_error("import failed", exc)
            return
        try:
            self.pm.register(module, name=info.name)
            self.pm.check_pending()
        except pluggy.PluginValidationError as exc:
            if self.pm.is_registered(module):
                self.pm.unregister(module)
            info.error = f"invalid hook implementation: {exc}"
            return
        except ValueError as exc:  # the same module object registered twice
            info.error = f"could not register: {exc}"
            return
        info.hooks = sorted(
            impl.name for impl in (self.pm.get_hookcallers(module) or []) if impl.name
        )
        self._call_hooks(info, module)

    def _call_hooks(self, info: PluginInfo, module: Any) -> None:
        added: list[tuple[str, str]] = []
        dirs: list[tuple[str, str, str]] = []
        try:
            for hook_name, kind in COMPONENT_HOOKS.items():
                fn = getattr(module, hook_name, None)
                if fn is None or hook_name not in info.hooks:
                    continue

                def register(
                    name: str,
                    factory: Any,
                    *,
                    description: str = "",
                    options: type | None = None,
                    diagnostic: bool = False,
                    tags: tuple[str, ...] = (),
                    reads_profile: bool = True,
                    _kind: str = kind,
                ) -> None:
                    component = Component(
                        kind=_kind,
                        name=name,
                        plugin=info.name,
                        namespace=info.namespace,
                        factory=factory,
                        description=description,
                        options=options,
                        diagnostic=diagnostic,
                        tags=tuple(tags),
                        reads_profile=bool(reads_profile),
                    )
                    try:
                        self._add_component(component, info)
                    except _Rejected as exc:
                        info.problems.append(str(exc))
                        return
                    added.append((_kind, name))

                fn(register=register)
            fn = getattr(module, "register_task_dirs", None)
            if fn is not None and "register_task_dirs" in info.hooks:

                def register_dir(path: str, *, description: str = "") -> None:
                    if not Path(path).is_dir():
                        info.problems.append(
                            f"task directory dropped, it does not exist: {path}"
                        )
                        return
                    dirs.append((str(Path(path).resolve()), description, info.name))

                fn(register=register_dir)
        except Exception as exc:
            for kind, name in added:
                self._remove_component(kind, info.namespace, name)
            self.pm.unregister(module)
            info.problems.clear()
            info.error = _format_error("a hook raised", exc)
            return
        info.components = [f"{kind}:{name}" for kind, name in added]
        info.task_dirs = [d[0] for d in dirs]
        self.task_dirs.extend(dirs)

    def _add_component(self, component: Component, info: PluginInfo) -> None:
        """Keep one registration, or raise :class:`_Rejected` with the reason it is dropped.

        A bare id another plugin already registered is kept under its qualified id only, and the
        clash is noted against the newcomer.
        """
        kind, name = component.kind, component.name
        if (
            not isinstance(name, str) or not name or name != name.strip()
            or "/" in name or any(ch.isspace() for ch in name)
        ):
            raise _Rejected(
                f"{kind} {name!r} dropped: invalid id (ids are non-empty, without '/' or spaces; "
                "kebab-case such as 'my-scorer')"
            )
        if component.options is not None and not (
            isinstance(component.options, type) and dataclasses.is_dataclass(component.options)
        ):
            raise _Rejected(
                f"{kind} {name!r} dropped: options= must be a dataclass type, got "
                f"{component.options!r}"
            )
        problem = factory_problem(component.factory, takes_options=component.options is not None)
        if problem:
            raise _Rejected(f"{kind} {name!r} dropped: it {problem}")
        qualified = component.qualified_id
        if qualified in self.qualified[kind]:
            raise _Rejected(
                f"{kind} {name!r} dropped: registered twice by this plugin ({qualified!r} exists)"
            )
        self.qualified[kind][qualified] = component
        existing = self.components[kind].get(name)
        if existing is None:
            self.components[kind][name] = component
            return
        info.problems.append(
            f"{kind} {name!r} is also registered by {_origin(self.plugins[existing.plugin])}; "
            f"the bare id is ambiguous: use {existing.qualified_id!r} or {qualified!r}"
        )

    def _remove_component(self, kind: str, namespace: str, name: str) -> None:
        component = self.qualified[kind].pop(f"{namespace}/{name}", None)
        if component is not None and self.components[kind].get(name) is component:
            del self.components[kind][name]
            rest = [c for c in self.qualified[kind].values() if c.name == name]
            if rest:
                self.components[kind][name] = rest[0]

    # -- lookup ----------------------------------------------------------------------------------

    def get(self, kind: str, component_id: str) -> Component:
        """Resolve ``id`` or ``namespace/id`` to a component of ``kind``.

        Raises:
            AmbiguousComponentError: a bare id that several plugins registered; the message names
                the plugins and the qualified ids to use.
            UnknownComponentError: nothing matches; the message suggests close matches and names
                plugins that failed to load or dropped registrations.
        """
        if kind not in self.components:
            raise UnknownComponentError(f"unknown component kind {kind!r}; kinds: {KINDS}")
        table = self.qualified[kind]
        namespace, _, name = component_id.rpartition("/")
        found = [
            c for c in table.values()
            if c.name == name and (not namespace or namespace in (c.namespace, c.plugin))
        ]
        if len(found) == 1:
            return found[0]
        if found:
            owners = " and ".join(repr(c.plugin) for c in found)
            ids = " or ".join(repr(c.qualified_id) for c in found)
            raise AmbiguousComponentError(
                f"{kind} {component_id!r} is ambiguous: plugins {owners} both register it; "
                f"ask for {ids}"
            )
        head = component_id.split()[0] if component_id.strip() else component_id
        if head != component_id and "=" in component_id:  # "length unit=word": a space, no comma
            rest = ",".join(component_id.split()[1:])
            raise UnknownComponentError(
                f"unknown {kind} {component_id!r}: options are separated by commas, not "
                f"spaces: write {head},{rest}"
                + (f" (--model_args scorer={head},{rest})" if kind == "scorer" else "")
            )
        dropped = [f"{p.name!r}: {why}" for p in self.plugins.values() for why in p.problems
                   if why.startswith(f"{kind} {name!r} dropped")]
        if dropped:
            raise UnknownComponentError(
                f"{kind} {component_id!r} was dropped by plugin {dropped[0]}")
        choices = sorted({c.name for c in table.values()}) + list(table)
        close = suggest(component_id, choices)
        message = f"unknown {kind} {component_id!r}{close}"
        message += f"; available: {', '.join(sorted(self.components[kind])) or 'none'}"
        failed = [p.name for p in self.plugins.values() if p.status in ("failed", "partial")]
        if failed:
            message += "; plugins that failed to load or dropped components: " + ", ".join(failed)
        elif not close:
            message += ("; if a plugin provides it, install the plugin (pip install "
                        "prbench-plugin-NAME, or pip install -e FOLDER) or load its file with "
                        "--plugin FILE; `prbench plugins` lists what is loaded")
        raise UnknownComponentError(message)

    def build(self, kind: str, component_id: str, options: Mapping[str, Any] | None = None) -> Any:
        """Resolve and build a component with validated options."""
        return self.get(kind, component_id).build(options)

    def list(self, kind: str) -> list[Component]:
        """Components of one kind (every plugin's, ambiguous ids included), sorted by id."""
        return sorted(self.qualified[kind].values(), key=lambda c: (c.name, c.qualified_id))

    def failed(self) -> list[PluginInfo]:
        """Plugins whose import or hooks failed, or that registered nothing usable."""
        return [p for p in self.plugins.values() if p.status == "failed"]

    def troubled(self) -> list[PluginInfo]:
        """Plugins that failed or dropped some registrations (status ``failed`` or ``partial``)."""
        return [p for p in self.plugins.values() if p.status in ("failed", "partial")]

    def describe_trouble(self, info: PluginInfo) -> str:
        """One line for a failed or partial plugin: its name, status and first reason."""
        reasons = [info.error] if info.error else list(info.problems)
        more = f" (+{len(reasons) - 1} more, see `prbench plugins`)" if len(reasons) > 1 else ""
        return f"plugin {info.name!r} {info.status}: {reasons[0] if reasons else '?'}{more}"

    def provenance(self) -> list[dict[str, Any]]:
        """Loaded plugins with versions and components (recorded in every results manifest)."""
        return [p.as_dict() for p in self.plugins.values()]


def _package_of(path: Path) -> tuple[Path, str] | None:
    """``(folder to import from, dotted module name)`` of a file inside a package, else None."""
    path = path.resolve()
    if path.suffix != ".py" or not (path.parent / "__init__.py").is_file():
        return None
    parts = [] if path.stem == "__init__" else [path.stem]
    folder = path.parent
    while (folder / "__init__.py").is_file() and folder.name.isidentifier():
        parts.insert(0, folder.name)
        folder = folder.parent
    return (folder, ".".join(parts)) if parts else None


def _import_from(root: Path, dotted: str, path: Path) -> Any:
    """Import ``dotted`` with ``root`` on ``sys.path`` (kept there: its factories import later).

    Raises:
        ImportError: a module of that name is already imported from another file (an installed
            copy of the same plugin, say).
    """
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    module = importlib.import_module(dotted)
    found = getattr(module, "__file__", None)
    if found and Path(found).resolve() != path.resolve():
        raise ImportError(f"module {dotted!r} is already imported from {found} (an installed "
                          f"copy?); uninstall it or load that one without --plugin")
    return module


def _folder_hint(folder: Path) -> str:
    """What to give instead of a folder: its plugin files, or installing it."""
    found = sorted(str(p) for p in folder.glob("*/plugin.py"))[:3] or sorted(
        str(p) for p in folder.glob("plugin.py"))
    files = f"give the plugin's Python file (here: {', '.join(found)})" if found else (
        "give the plugin's Python file")
    install = " or install it: pip install -e " + str(folder) if (
        folder / "pyproject.toml").is_file() else ""
    return files + install


def _own_version() -> str:
    from prbench import __version__

    return __version__


def _origin(info: PluginInfo) -> str:
    where = f"{info.dist} {info.version}" if info.dist else info.source
    return f"plugin {info.name!r} ({info.origin}: {where})"


def _format_error(what: str, exc: BaseException) -> str:
    frames = traceback.extract_tb(exc.__traceback__)
    location = f" at {frames[-1].filename}:{frames[-1].lineno}" if frames else ""
    if isinstance(exc, SyntaxError) and exc.filename:  # where the text is, not the importer
        location = f" at {exc.filename}:{exc.lineno}"
    return f"{what}: {type(exc).__name__}: {exc}{location}"


_REGISTRY: PluginRegistry | None = None
_REGISTRY_FILES: tuple[str, ...] = ()


def get_registry(plugin_files: Sequence[str | os.PathLike[str]] = ()) -> PluginRegistry:
    """The process-wide registry, loaded on first use.

    Args:
        plugin_files: extra ``--plugin`` files; a different set than the cached registry's
            reloads it.
    """
    global _REGISTRY, _REGISTRY_FILES
    files = tuple(str(Path(p)) for p in plugin_files)
    if _REGISTRY is None or (files and files != _REGISTRY_FILES):
        _REGISTRY = PluginRegistry(plugin_files=files)
        _REGISTRY_FILES = files
    return _REGISTRY


def reset_registry() -> None:
    """Forget the process-wide registry (tests; after installing a plugin in-process)."""
    global _REGISTRY, _REGISTRY_FILES
    _REGISTRY = None
    _REGISTRY_FILES = ()


__all__ = [
    "KINDS",
    "AmbiguousComponentError",
    "Component",
    "OptionsError",
    "PluginError",
    "PluginInfo",
    "PluginRegistry",
    "UnknownComponentError",
    "get_registry",
    "reset_registry",
]
