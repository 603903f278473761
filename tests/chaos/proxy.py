"""A loopback TCP proxy that misbehaves on request, for chaos tests and
``bench/chaos.py``: put it between alkstore and PostgreSQL and the network
can be made slow, silent or broken without touching the server.

- ``blackhole()``: the connections open now stop forwarding in both
  directions, their sockets left open (a half-open connection: a peer gone
  after a failover or a NAT that forgot the flow). Connections made later
  forward normally unless ``blackhole(new=True)`` (a partition: accepted,
  never answered).
- ``heal()``: forwarding resumes on every connection still open.
- ``cut()``: every open connection is closed (a reset network).
- ``refuse``: while true, a new connection is closed as soon as it is
  accepted, without reaching the server.
- ``delay``: seconds added to each chunk in each direction (a round trip
  gains twice that).

Threads, not the test's event loop: the proxy keeps running while the code
under test blocks, and it serves trio and asyncio alike. Everything it
starts is joined by ``close()``.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from urllib.parse import urlsplit, urlunsplit


class _Link:
    """One proxied connection: client socket, server socket, two pumps."""

    def __init__(self, proxy: FaultyProxy, client: socket.socket, server: socket.socket) -> None:
        self.proxy = proxy
        self.client = client
        self.server = server
        self.silenced = False
        self.closed = False
        self.pumps = [
            threading.Thread(target=self._pump, args=(client, server), daemon=True),
            threading.Thread(target=self._pump, args=(server, client), daemon=True),
        ]

    def start(self) -> None:
        for pump in self.pumps:
            pump.start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        proxy = self.proxy
        try:
            while True:
                with proxy.cond:
                    # Silenced: read nothing, so the peer's data waits in the
                    # kernel and the connection looks alive but mute.
                    while self.silenced and not self.closed:
                        proxy.cond.wait()
                    if self.closed:
                        return
                data = src.recv(65536)
                if not data:
                    break
                if proxy.delay:
                    time.sleep(proxy.delay)
                with proxy.cond:
                    while self.silenced and not self.closed:
                        proxy.cond.wait()  # silenced after reading: hold it
                    if self.closed:
                        return
                dst.sendall(data)
        except OSError:
            pass
        self.close()

    def close(self) -> None:
        with self.proxy.cond:
            if self.closed:
                return
            self.closed = True
            self.proxy.cond.notify_all()
        for sock in (self.client, self.server):
            with suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()


class FaultyProxy:
    def __init__(self, target_host: str, target_port: int) -> None:
        self.target = (target_host, target_port)
        self.delay = 0.0
        self.refuse = False
        self.cond = threading.Condition()
        self._links: list[_Link] = []
        self._silence_new = False
        self.accepted = 0
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._closing = False
        self._acceptor = threading.Thread(target=self._accept, daemon=True)
        self._acceptor.start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            if self._closing:
                client.close()
                return
            with self.cond:
                self.accepted += 1
            if self.refuse:
                client.close()
                continue
            try:
                server = socket.create_connection(self.target, timeout=10)
                server.settimeout(None)
            except OSError:
                client.close()
                continue
            for sock in (client, server):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            link = _Link(self, client, server)
            with self.cond:
                link.silenced = self._silence_new
                self._links = [x for x in self._links if not x.closed]
                self._links.append(link)
            link.start()

    def dsn(self, dsn: str) -> str:
        """``dsn`` (a postgresql:// URL) pointed at the proxy."""
        parts = urlsplit(dsn)
        auth = parts.netloc.rsplit("@", 1)[0] + "@" if "@" in parts.netloc else ""
        return urlunsplit(parts._replace(netloc=f"{auth}127.0.0.1:{self.port}"))

    @property
    def open_links(self) -> int:
        with self.cond:
            return sum(not link.closed for link in self._links)

    def blackhole(self, *, new: bool = False) -> None:
        with self.cond:
            for link in self._links:
                link.silenced = True
            self._silence_new = new
            self.cond.notify_all()

    def heal(self) -> None:
        with self.cond:
            for link in self._links:
                link.silenced = False
            self._silence_new = False
            self.cond.notify_all()

    def cut(self) -> None:
        with self.cond:
            links = list(self._links)
        for link in links:
            link.close()

    def close(self) -> None:
        self._closing = True
        # Wake accept() so the acceptor sees _closing and returns.
        with suppress(OSError):
            socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
        self._listener.close()
        self._acceptor.join(10)
        self.cut()
        with self.cond:
            links = list(self._links)
        for link in links:
            for pump in link.pumps:
                pump.join(10)


@contextmanager
def faulty_proxy(dsn: str) -> Iterator[FaultyProxy]:
    """A proxy in front of the server ``dsn`` names, closed afterwards."""
    parts = urlsplit(dsn)
    proxy = FaultyProxy(parts.hostname or "127.0.0.1", parts.port or 5432)
    try:
        yield proxy
    finally:
        proxy.close()
