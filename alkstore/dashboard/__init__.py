"""alkstore's web dashboard: queues, jobs, dead letters, workflows, streams,
schedules and locks in a browser, live, on either engine (docs/dashboard.md).

``create_app(store)`` is a Starlette (ASGI) application over a store you
opened: serve it, or mount it into your own app. ``alkstore dashboard``
serves one from the command line. It needs the ``dashboard`` extra:
``pip install 'alkstore[dashboard]'`` (Starlette, Jinja2, python-multipart,
Hypercorn).

Modules: ``app.py`` (the factory and its routes), ``settings.py`` (what
every route reads: the store, the safety settings, the templates),
``views.py`` (what each page reads), ``pages.py`` (rendering, errors),
``actions.py`` (the POSTs), ``live.py`` (live updates), ``safety.py``
(auth, CSRF, headers), ``format.py`` (how values read, the chart),
``graph.py`` (a workflow run's outcome, levels and drawing),
``server.py`` (serving under trio with Hypercorn); ``templates/`` and
``static/`` ship in the package.
"""

from __future__ import annotations

_EXTRA = {"starlette": "starlette", "jinja2": "jinja2", "python_multipart": "python-multipart"}
try:
    import jinja2  # noqa: F401
    import python_multipart  # noqa: F401
    import starlette  # noqa: F401
except ImportError as exc:
    missing = _EXTRA.get((exc.name or "").split(".")[0], exc.name)
    raise ImportError(
        "alkstore.dashboard needs the 'dashboard' extra: pip install 'alkstore[dashboard]' "
        f"(missing: {missing})"
    ) from exc

from .app import create_app  # noqa: E402

__all__ = ["create_app"]
