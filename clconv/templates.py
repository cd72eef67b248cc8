"""Finding and rendering the Mako kernel templates.

Search order: each directory of ``CLCONV_TEMPLATE_PATH`` (``os.pathsep``-separated), then the
built-in templates in ``clconv/kernels/``.  Rendering is strict: an undefined name is an error,
never the text ``UNDEFINED``.

A template is one kernel family: a shared header, then one ``<%def>`` per kernel entry point, named
as the kernel function it writes (``clc_direct_forward``).  The caller names the entry points
it wants (``entries``); the template's body renders its header and those defs
(``prelude.entry_points``), so the entry point's name is stated once, in the template, and asked for
by name.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import os
from pathlib import Path
from typing import Any, Sequence

import numpy as np
from mako.exceptions import MakoException, text_error_template
from mako.lookup import TemplateLookup

from . import settings
from .caches import Cache
from .plan import KernelSource, Plan

_PACKAGE_DIR = Path(__file__).resolve().parent
_lookups: Cache[TemplateLookup] = Cache("templates", maxsize=16)


class TemplateRenderError(RuntimeError):
    """A template failed to render; the message names the template, the arguments and the Mako trace."""


def builtin_template_dir() -> Path:
    return _PACKAGE_DIR / "kernels"


def user_template_dirs() -> list[Path]:
    return settings.template_dirs()


def template_dirs() -> list[Path]:
    return [*user_template_dirs(), builtin_template_dir()]


_last_generation: tuple = ()


def generation(path: str | None = None) -> tuple:
    """A stamp of the user templates (``CLCONV_TEMPLATE_PATH``): the path and each ``*.mako``'s
    modification time and size.  Caches of prepared kernels key on it, so an edited template takes
    effect in the running process too; empty (and free) when no user path is set."""
    global _last_generation
    raw = settings.template_path() if path is None else path
    if not raw:
        return ()
    result = (raw, *_template_files(user_template_dirs()))
    if result != _last_generation:
        # Mako compares whole-second file times: a fresh lookup re-reads every template now
        _lookups.clear()
        _last_generation = result
    return result


def _module_directory() -> str | None:
    """Where Mako keeps compiled templates between processes, so that a new process's first call
    does not recompile them (about 100 ms of a warm-cache first call); None when the disk cache is
    off or the directory is not writable."""
    if not settings.disk_cache_enabled():
        return None
    path = settings.cache_dir() / "mako-v1"
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    return str(path) if os.access(path, os.W_OK) else None


def _lookup() -> TemplateLookup:
    dirs = tuple(str(d) for d in template_dirs())
    modules = _module_directory()
    lookup = _lookups.get((dirs, modules))
    if lookup is None:
        # filesystem_checks: an edited user template is re-read on the next render (and its
        # compiled module, named after the template's absolute path, recompiled when older).
        extra = {}
        if modules is not None:
            def module_name(filename: str, uri: str, modules: str = modules) -> str:
                # the file's time and size are in the name: an edit made within the same second
                # as the last compile still gets a module of its own
                try:
                    info = os.stat(filename)
                    version = f"{info.st_mtime_ns}:{info.st_size}"
                except OSError:
                    version = ""
                digest = hashlib.sha256(f"{filename}\0{version}".encode()).hexdigest()[:24]
                return os.path.join(modules, digest + ".py")

            extra = {"module_directory": modules, "modulename_callable": module_name}
        lookup = TemplateLookup(
            directories=list(dirs), strict_undefined=True, filesystem_checks=True, input_encoding="utf-8",
            **extra,
        )
        _lookups.put((dirs, modules), lookup)
    return lookup


def list_templates() -> list[tuple[str, Path, list[Path]]]:
    """``(name, winning path, shadowed paths)`` for every ``*.mako`` on the search path."""
    seen: dict[str, list[Path]] = {}
    for directory in template_dirs():
        if directory.is_dir():
            for path in sorted(directory.glob("*.mako")):
                seen.setdefault(path.name, []).append(path)
    return [(name, paths[0], paths[1:]) for name, paths in sorted(seen.items())]


def render(template_name: str, entries: Sequence[str], **params: Any) -> str:
    """The source of the kernels ``entries`` of ``template_name`` rendered with ``params``;
    failures (a missing template or entry point, a Mako error) raise :class:`TemplateRenderError`."""
    where = f"(search path: {[str(d) for d in template_dirs()]})"
    try:
        template = _lookup().get_template(template_name)
    except MakoException as exc:
        raise TemplateRenderError(f"template {template_name!r} not found or not parsable {where}: {exc}") from exc
    missing = [entry for entry in entries if not template.has_def(entry)]
    if missing:
        raise TemplateRenderError(f"template {template_name!r} {where} has no entry point {missing} "
                                  f"(a <%def> named as the kernel function it writes)")
    try:
        source = template.render(entries=tuple(entries), **params)
    except (MakoException, NameError, AttributeError, KeyError, TypeError, ValueError, IndexError) as exc:
        trace = text_error_template().render()
        shown = ", ".join(sorted(params))
        raise TemplateRenderError(
            f"rendering entry points {list(entries)} of template {template_name!r} {where} with arguments "
            f"[{shown}] failed: {exc}\n{trace}"
        ) from exc
    for entry in entries:
        if f"{entry}(" not in source:
            raise TemplateRenderError(f"entry point {entry!r} of template {template_name!r} {where} rendered no "
                                      f"kernel function of that name")
    return source


class RenderedSource:
    """The source of one program: ``entries`` of ``template`` rendered with ``params``.

    Rendered on first need (:attr:`text`): the builder finds a program it has built before through
    :attr:`digest` alone, so a warm process never renders (7.5 of 30 ms of a warm first call on
    the H200's host, two Winograd programs: docs/performance.md)."""

    __slots__ = ("template", "entries", "params", "_text", "_digest")

    def __init__(self, template: str, entries: tuple[str, ...], params: Any) -> None:
        self.template = template
        self.entries = entries
        self.params = params
        self._text: str | None = None
        self._digest: str | None | bool = False  # False: not computed yet

    @property
    def text(self) -> str:
        if self._text is None:
            self._text = render(self.template, self.entries, **self.params)
        return self._text

    @property
    def digest(self) -> str | None:
        """A hash of everything :attr:`text` is made from: the template's name, the entry points,
        the parameters (each in a form that fixes its value exactly), every template file on the
        search path (path, modification time and size) and clconv's own modules (the templates
        import some, and call methods of the parameters).  None when a parameter has no such
        form: that source is rendered every time, as before."""
        if self._digest is False:
            try:
                params = _canonical(dict(self.params))
            except _NoCanonicalForm:
                self._digest = None
            else:
                digest = hashlib.sha256()
                for part in (self.template, ",".join(self.entries), params, repr(_templates_stamp()), _package_stamp()):
                    digest.update(part.encode())
                    digest.update(b"\0")
                self._digest = digest.hexdigest()
        return self._digest  # type: ignore[return-value]


class _NoCanonicalForm(Exception):
    pass


def _canonical(value: Any) -> str:
    """Text that determines ``value`` exactly, its type included (1, 1.0 and True differ; a float
    in hex keeps every bit); :class:`_NoCanonicalForm` for a type whose text might not."""
    kind = type(value)
    if kind is float:
        return f"f{value.hex()}"
    if kind in (int, bool, str) or value is None:
        return f"{kind.__name__}:{value!r}"
    if kind in (tuple, list):
        return f"{kind.__name__}(" + ",".join(_canonical(item) for item in value) + ")"
    if kind is dict:
        if not all(type(key) is str for key in value):
            raise _NoCanonicalForm
        return "dict(" + ",".join(f"{key!r}={_canonical(value[key])}" for key in sorted(value)) + ")"
    if isinstance(value, np.generic):
        return f"np.{value.dtype.str}:{_canonical(value.item())}"
    if dataclasses.is_dataclass(value) and not isinstance(value, type) and kind.__dataclass_params__.frozen:
        fields = ",".join(f"{f.name}={_canonical(getattr(value, f.name))}" for f in dataclasses.fields(value))
        return f"{kind.__module__}.{kind.__qualname__}({fields})"
    raise _NoCanonicalForm


def _templates_stamp() -> tuple:
    """Each ``*.mako`` on the search path, built-in ones included, read on each call (an edited
    template takes effect in the running process)."""
    return _template_files(template_dirs())


def _template_files(directories: list[Path]) -> tuple:
    """(path, modification time, size) of each ``*.mako`` in ``directories``, sorted by path."""
    stamp = []
    for directory in directories:
        try:
            with os.scandir(directory) as entries:
                for entry in entries:
                    if entry.name.endswith(".mako"):
                        info = entry.stat()
                        stamp.append((entry.path, info.st_mtime_ns, info.st_size))
        except OSError:
            continue
    return tuple(sorted(stamp))


@functools.cache
def _package_stamp() -> str:
    """clconv's version and each of its modules (path, modification time, size), once per process
    (a module's code cannot change under a running process).  ``tools/`` is left out: the
    command-line tools are never imported by a template or a parameter."""
    from . import __version__

    parts = [__version__]
    folders = [str(_PACKAGE_DIR)]
    while folders:
        with os.scandir(folders.pop()) as entries:
            for entry in entries:
                if entry.is_dir():
                    if entry.name not in ("__pycache__", "tools", "kernels"):
                        folders.append(entry.path)
                elif entry.name.endswith(".py"):
                    info = entry.stat()
                    parts.append(f"{entry.path}:{info.st_mtime_ns}:{info.st_size}")
    return "\n".join(sorted(parts))


def render_plan(plan: Plan) -> tuple[list[RenderedSource], list[int]]:
    """The sources of a plan's programs (rendered on first need: :class:`RenderedSource`), and for
    each call the index of the source it launches from.  Calls whose
    :class:`~clconv.plan.KernelSource` are equal share one program, holding every entry point they
    launch."""
    groups: list[tuple[KernelSource, list[str]]] = []
    index = []
    for call in plan.calls:
        number = next((n for n, (source, _) in enumerate(groups) if source.same_as(call.source)), len(groups))
        if number == len(groups):
            groups.append((call.source, []))
        entries = groups[number][1]
        if call.entry not in entries:
            entries.append(call.entry)
        index.append(number)
    return [RenderedSource(source.template, tuple(entries), source.params) for source, entries in groups], index
