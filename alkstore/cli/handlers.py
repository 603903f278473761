"""``alkstore worker MODULE:ATTR``: finding the user's handlers, and what
each queue runs with.

``ATTR`` (a dotted path inside ``MODULE``) names one of:

- an async handler: it runs on every queue named by ``--queue`` (required);
- a mapping of queue name to an async handler, or to a dict of settings
  ``{"handler": ..., "concurrency": ..., "visibility_timeout": ...,
  "max_attempts": ..., "backoff": ...}``: every queue in it runs, or only
  those named by ``--queue``.

Everything is checked here, before a database is opened: a problem is a
:class:`BadHandlers` with a message for the operator (exit code 2).
"""

from __future__ import annotations

import importlib
import os
import sys
import traceback
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..api.job import Job
from ..protocol.machines.worker import MAX_CONCURRENCY
from ..protocol.values.backoff import Backoff
from ..protocol.values.errors import AlkstoreError, brief
from ..protocol.values.ints import check_int
from ..protocol.values.names import check_name
from ..protocol.values.timeconv import Duration
from ..protocol.values.types import QueueOptions
from ..services.worker import check_handler

Handler = Callable[[Job], Awaitable[Any]]

# The settings a queue's dict may hold besides its handler.
SETTINGS = ("concurrency", "visibility_timeout", "max_attempts", "backoff")


class BadHandlers(Exception):
    """MODULE:ATTR cannot be imported, or is not a shape the worker runs."""


@dataclass(frozen=True)
class QueueSpec:
    """One queue the worker runs, with its handler and settings."""

    queue: str
    handler: Handler
    concurrency: int = 1
    visibility_timeout: Duration = 300.0
    max_attempts: int = 3
    backoff: Backoff | None = None

    def queue_options(self) -> dict[str, Any]:
        """The keywords of ``store.queue`` for this queue."""
        return {
            "visibility_timeout": self.visibility_timeout,
            "max_attempts": self.max_attempts,
            "backoff": self.backoff,
        }


def load(spec: str, queues: Sequence[str], concurrency: int | None) -> list[QueueSpec]:
    """The queues to run for ``spec`` (``MODULE:ATTR``) and ``--queue``
    names (``queues``, possibly empty); ``concurrency`` (``--concurrency``)
    replaces every queue's own when given."""
    target = resolve(spec)
    try:
        names = [check_name(q, "--queue") for q in queues]
        if len(set(names)) != len(names):
            raise BadHandlers("each --queue may be given once")
        specs = _specs(spec, target, names)
        if concurrency is not None:
            specs = [replace(s, concurrency=concurrency) for s in specs]
    except AlkstoreError as exc:  # each message names the setting it refuses
        raise BadHandlers(str(exc)) from exc
    return specs


def resolve(spec: str) -> object:
    """Import ``MODULE`` (the current directory first on the path, as
    ``python -m`` has it) and follow ``ATTR``'s dotted path."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise BadHandlers(f"expected MODULE:ATTR (for example tasks:handlers), got {spec!r}")
    cwd = os.getcwd()
    if cwd not in sys.path and "" not in sys.path:
        sys.path.insert(0, cwd)
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and module_name.startswith(exc.name):
            raise BadHandlers(f"no module named {exc.name!r} (looked in {cwd} and the "
                              "Python path)") from exc  # fmt: skip
        raise BadHandlers(_import_failed(module_name, exc)) from exc
    except BaseException as exc:  # the user's module raised while importing: report it
        if isinstance(exc, KeyboardInterrupt | SystemExit):
            raise
        raise BadHandlers(_import_failed(module_name, exc)) from exc
    target: object = module
    parts = attr.split(".")
    for i, part in enumerate(parts):
        if not hasattr(target, part):
            where = module_name if i == 0 else f"{module_name}:{'.'.join(parts[:i])}"
            raise BadHandlers(f"{where} has no attribute {part!r}")
        target = getattr(target, part)
    return target


def _import_failed(module_name: str, exc: BaseException) -> str:
    """The user's traceback: the frames of alkstore and of the import
    machinery that led to their module are left out, so the first frame
    shown is their own line."""
    tb = exc.__traceback__
    while tb is not None and _machinery(tb.tb_frame.f_code.co_filename):
        tb = tb.tb_next
    trace = "".join(traceback.format_exception(type(exc), exc, tb)).rstrip()
    return f"importing {module_name} failed:\n{trace}"


_OURS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_IMPORTLIB = os.path.dirname(os.path.abspath(importlib.__file__))


def _machinery(filename: str) -> bool:
    if filename.startswith("<frozen importlib"):
        return True
    path = os.path.abspath(filename)
    return path.startswith((_OURS + os.sep, _IMPORTLIB + os.sep))


def _specs(spec: str, target: object, names: list[str]) -> list[QueueSpec]:
    if isinstance(target, Mapping):
        return _from_mapping(spec, target, names)
    if callable(target):
        check_handler(target, spec)
        if not names:
            raise BadHandlers(f"{spec} is one handler: name its queues with --queue")
        return [QueueSpec(name, target) for name in names]
    raise BadHandlers(
        f"{spec} must be an async handler or a mapping of queue name to handler, got "
        f"{brief(target)}"
    )


def _from_mapping(spec: str, mapping: Mapping[Any, Any], names: list[str]) -> list[QueueSpec]:
    if not mapping:
        raise BadHandlers(f"{spec} is an empty mapping: no queue to run")
    entries: dict[str, object] = {}
    for key, value in mapping.items():
        entries[check_name(key, f"queue name in {spec}")] = value
    missing = [n for n in names if n not in entries]
    if missing:
        raise BadHandlers(
            f"--queue {', '.join(missing)}: not in {spec} (it has {', '.join(sorted(entries))})"
        )
    chosen = names or list(entries)
    return [_entry(spec, name, entries[name]) for name in chosen]


def _entry(spec: str, queue: str, value: object) -> QueueSpec:
    where = f"{spec}[{queue!r}]"
    if not isinstance(value, Mapping):
        check_handler(value, where)
        return QueueSpec(queue, value)  # type: ignore[arg-type]
    unknown = sorted(str(k) for k in value if k != "handler" and k not in SETTINGS)
    if unknown:
        raise BadHandlers(f"{where}: unknown setting(s) {', '.join(unknown)}; a queue's dict "
                          f"takes handler, {', '.join(SETTINGS)}")  # fmt: skip
    if "handler" not in value:
        raise BadHandlers(f"{where}: a queue's dict needs its 'handler'")
    handler = value["handler"]
    check_handler(handler, f"{where}['handler']")
    settings = {k: value[k] for k in SETTINGS if k in value}
    concurrency = check_int(
        settings.pop("concurrency", 1), f"{where} concurrency", lo=1, hi=MAX_CONCURRENCY
    )
    options = {"visibility_timeout": 300.0, "max_attempts": 3, "backoff": None, **settings}
    QueueOptions.of(**options)  # checked now, not when the store is open
    return QueueSpec(queue, handler, concurrency, **options)

