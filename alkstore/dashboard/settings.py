"""``Settings``: what every route of one dashboard app needs (the store, the
safety settings, the templates), and how a route finds them on its request.

A module of its own so that the routes (``pages.py``, ``actions.py``,
``live.py``) read the settings without importing ``app.py``, which imports
them to build the app.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.templating import Jinja2Templates

from ..api.store import Store
from ..protocol.values.errors import UsageError
from .safety import Auth, Csrf, Hosts

# How many (view, parameters) keys the live endpoint remembers the wake
# channels of.
CHANNEL_CACHE = 256


@dataclass
class Settings:
    """What every route of one app needs: the store, the safety settings,
    the templates."""

    resolve: Callable[[], Store]
    allow_actions: bool
    auth: Auth | None
    csrf: Csrf
    refresh: float
    debounce: float
    title: str
    where: str
    hosts: Hosts
    trusted_origins: tuple[str, ...]
    templates: Jinja2Templates
    # The wake channels of the last build of each live key (view, params).
    channels: OrderedDict[tuple[str, ...], list[str]] = field(default_factory=OrderedDict)

    @property
    def store(self) -> Store:
        """The store, as the app was given it (or as its getter returns it now)."""
        store = self.resolve()
        if not isinstance(store, Store):
            raise UsageError(f"the dashboard's store getter returned {type(store).__name__}, "
                             "not a Store")  # fmt: skip
        if self.allow_actions and store.read_only:
            raise UsageError(
                "a read-only store cannot have actions: open it without read_only=True"
            )
        return store

    def remember_channels(self, key: tuple[str, ...], channels: list[str]) -> None:
        self.channels[key] = channels
        self.channels.move_to_end(key)
        while len(self.channels) > CHANNEL_CACHE:
            self.channels.popitem(last=False)


def attach(app: Starlette, settings: Settings) -> None:
    """Give ``app``'s routes ``settings`` (``settings_of`` finds them)."""
    app.state.alkstore_dashboard = settings


def settings_of(request: Request) -> Settings:
    settings: Settings = request.app.state.alkstore_dashboard
    return settings
