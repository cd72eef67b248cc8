"""Finding and rendering the Mako kernel templates.

Search order: each directory of ``CLCONV_TEMPLATE_PATH`` (``os.pathsep``-separated), then the
built-in templates (``templates/`` of a checkout, or ``clconv/_templates`` of an installed wheel).
Rendering is strict: an undefined name is an error, never the text ``UNDEFINED``.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

from mako.exceptions import MakoException, text_error_template
from mako.lookup import TemplateLookup

from . import environ

_PACKAGE_DIR = Path(__file__).resolve().parent
_lookups: dict[tuple[tuple[str, ...], str | None], TemplateLookup] = {}


class TemplateRenderError(RuntimeError):
    """A template failed to render; the message names the template, the arguments and the Mako trace."""


def builtin_template_dir() -> Path:
    installed = _PACKAGE_DIR / "_templates"
    if installed.is_dir():
        return installed
    checkout = _PACKAGE_DIR.parent / "templates"
    if checkout.is_dir():
        return checkout
    raise FileNotFoundError(f"clconv's built-in templates were found neither at {installed} nor at {checkout}")


def user_template_dirs() -> list[Path]:
    raw = os.environ.get("CLCONV_TEMPLATE_PATH", "")
    return [Path(p).expanduser() for p in raw.split(os.pathsep) if p]


def template_dirs() -> list[Path]:
    return [*user_template_dirs(), builtin_template_dir()]


_last_generation: tuple = ()


def generation() -> tuple:
    """A stamp of the user templates (``CLCONV_TEMPLATE_PATH``): the path and each ``*.mako``'s
    modification time and size.  Caches of prepared kernels key on it, so an edited template takes
    effect in the running process too; empty (and free) when no user path is set."""
    global _last_generation
    raw = environ.get("CLCONV_TEMPLATE_PATH", "")
    if not raw:
        return ()
    stamp: list = [raw]
    for directory in user_template_dirs():
        try:
            with os.scandir(directory) as entries:
                for entry in entries:
                    if entry.name.endswith(".mako"):
                        info = entry.stat()
                        stamp.append((entry.path, info.st_mtime_ns, info.st_size))
        except OSError:
            continue
    result = tuple(sorted(stamp[1:], key=lambda item: item[0]))
    result = (raw, *result)
    if result != _last_generation:
        # Mako compares whole-second file times: a fresh lookup re-reads every template now
        _lookups.clear()
        _last_generation = result
    return result


def _module_directory() -> str | None:
    """Where Mako keeps compiled templates between processes, so that a new process's first call
    does not recompile them (about 100 ms of a warm-cache first call); None when the disk cache is
    off or the directory is not writable."""
    from .builder import cache_dir, disk_cache_enabled

    if not disk_cache_enabled():
        return None
    path = cache_dir() / "mako-v1"
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
        _lookups[(dirs, modules)] = lookup
    return lookup


def list_templates() -> list[tuple[str, Path, list[Path]]]:
    """``(name, winning path, shadowed paths)`` for every ``*.mako`` on the search path."""
    seen: dict[str, list[Path]] = {}
    for directory in template_dirs():
        if directory.is_dir():
            for path in sorted(directory.glob("*.mako")):
                seen.setdefault(path.name, []).append(path)
    return [(name, paths[0], paths[1:]) for name, paths in sorted(seen.items())]


def render(template_name: str, **kwargs: Any) -> str:
    """Render ``template_name`` with ``kwargs``; failures raise :class:`TemplateRenderError`."""
    try:
        template = _lookup().get_template(template_name)
        return template.render(**kwargs)
    except (MakoException, NameError, AttributeError, KeyError, TypeError, ValueError, IndexError) as exc:
        trace = text_error_template().render()
        shown = ", ".join(sorted(kwargs))
        raise TemplateRenderError(
            f"rendering template {template_name!r} (search path: {[str(d) for d in template_dirs()]}) "
            f"with arguments [{shown}] failed: {exc}\n{trace}"
        ) from exc
