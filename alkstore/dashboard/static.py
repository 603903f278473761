"""The dashboard's own static files (``static/``), read from the package
once and served from memory: a name is a key of that table or a 404, so no
request can name any other file."""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from importlib import resources

from starlette.requests import Request
from starlette.responses import Response

TYPES = {
    ".css": "text/css; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".svg": "image/svg+xml",
    ".png": "image/png",
}


@dataclass(frozen=True, slots=True)
class Asset:
    body: bytes
    media_type: str
    etag: str


def load() -> dict[str, Asset]:
    """Every file of the package's ``static`` folder, by name."""
    found = {}
    for entry in resources.files("alkstore.dashboard").joinpath("static").iterdir():
        suffix = "." + entry.name.rsplit(".", 1)[-1] if "." in entry.name else ""
        if not entry.is_file() or suffix not in TYPES:
            continue
        body = entry.read_bytes()
        etag = '"' + hashlib.sha256(body).hexdigest()[:16] + '"'
        found[entry.name] = Asset(body, TYPES[suffix], etag)
    return found


def endpoint(assets: dict[str, Asset]) -> Callable[[Request], Awaitable[Response]]:
    async def serve(request: Request) -> Response:
        asset = assets.get(request.path_params["name"])
        if asset is None:
            return Response("no such file\n", status_code=404, media_type="text/plain")
        headers = {"etag": asset.etag, "cache-control": "public, max-age=300"}
        if request.headers.get("if-none-match") == asset.etag:
            return Response(status_code=304, headers=headers)
        return Response(asset.body, media_type=asset.media_type, headers=headers)

    return serve
