"""clconv's environment variables as parts of the cache keys a cached call looks up.

A cached call reads three variables (``CLCONV_TUNE``, ``CLCONV_WORKSPACE_LIMIT``,
``CLCONV_TEMPLATE_PATH``) so that changing one mid-process takes effect.  ``os.environ.get`` of an
unset variable costs ~0.6 us (it encodes the name, then raises and catches a KeyError): on a slower
host a tenth of clconv's own time per call.  CPython's ``os.environ`` keeps what it holds in its
``_data`` dict (bytes keys and values on POSIX, updated by every ``os.environ`` assignment and
deletion); a lookup there costs ~0.02 us and sees exactly what ``os.environ`` sees.  Elsewhere
(another platform or interpreter without it) this falls back to ``os.environ.get``.
"""

from __future__ import annotations

import os

_DATA = getattr(os.environ, "_data", None) if os.name == "posix" else None
_ENCODED: dict[str, bytes] = {}


def raw(name: str) -> object:
    """The variable's value as ``os.environ`` holds it (bytes on POSIX), or None if unset: only for
    comparing, as part of a cache key."""
    if _DATA is None:
        return os.environ.get(name)
    key = _ENCODED.get(name)
    if key is None:
        key = _ENCODED[name] = os.fsencode(name)
    return _DATA.get(key)


def get(name: str, default: str | None = None) -> str | None:
    """``os.environ.get(name, default)``, cheap when the variable is unset."""
    if raw(name) is None:
        return default
    return os.environ.get(name, default)
