"""A TCP proxy a test can cut: the network between the server and its database, in one thread per pipe.

Import as ``from tests.tcp_proxy import TcpProxy``::

    with TcpProxy("127.0.0.1", 5432) as proxy:   # listens on 127.0.0.1:proxy.port
        ...                                       # connections are pumped both ways
        proxy.cut()                               # every connection closed, new ones refused
        proxy.restore()                           # new connections accepted again
        proxy.stall()                             # a partition: nothing forwarded, nothing closed

While cut, the listening socket stays open (the port stays ours) and every new
connection is accepted and closed at once, so a client sees its connection fail
immediately rather than hang: the database is down, not the network partitioned.
While stalled, the network is partitioned: open connections stay open but what is sent
either way is dropped, and new connections are accepted and then never answered, so a
client waits for as long as it is willing to. ``restore`` closes what the stall broke.
"""

from __future__ import annotations

import socket
import threading


class TcpProxy:
    def __init__(self, upstream_host: str, upstream_port: int, host: str = "127.0.0.1"):
        self._upstream = (upstream_host, upstream_port)
        self._listener = socket.create_server((host, 0))
        self.host, self.port = host, self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self._open: set[socket.socket] = set()
        self._cut = False
        self._stalled = False
        self._held: set[socket.socket] = set()  # accepted while stalled, never pumped
        self._closed = False
        self.accepted = 0  # connections pumped upstream
        self.refused = 0  # connections closed at once while cut
        self._thread = threading.Thread(target=self._accept, name="tcp-proxy", daemon=True)
        self._thread.start()

    def __enter__(self) -> TcpProxy:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def cut(self) -> None:
        """Close every proxied connection and refuse new ones until ``restore``."""
        with self._lock:
            self._cut = True
            sockets, self._open, self._held = self._open | self._held, set(), set()
        for s in sockets:
            _close(s)

    def stall(self) -> None:
        """Forward nothing and close nothing until ``restore``."""
        with self._lock:
            self._stalled = True

    def restore(self) -> None:
        with self._lock:
            self._cut = False
            broken = set()
            if self._stalled:  # bytes were dropped: no connection of the stall can go on
                self._stalled = False
                broken, self._open, self._held = self._open | self._held, set(), set()
        for s in broken:
            _close(s)

    def close(self) -> None:
        with self._lock:
            self._closed = True
        self.cut()
        _close(self._listener)
        self._thread.join(timeout=5)

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return  # closed
            with self._lock:
                if self._closed:
                    _close(client)
                    return
                refuse = self._cut
                if refuse:
                    self.refused += 1
                elif self._stalled:
                    self._held.add(client)
                    continue
            if refuse:
                _close(client)
                continue
            try:
                upstream = socket.create_connection(self._upstream, timeout=5)
                upstream.settimeout(None)
            except OSError:
                _close(client)
                continue
            with self._lock:
                if self._cut:  # cut while we connected
                    _close(client)
                    _close(upstream)
                    continue
                self.accepted += 1
                self._open.update((client, upstream))
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(source, sink), name="tcp-proxy-pump", daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                if not self._stalled:
                    sink.sendall(data)
        except OSError:
            pass
        finally:  # one side ended: end both
            with self._lock:
                self._open.discard(source)
                self._open.discard(sink)
            _close(source)
            _close(sink)


def _close(s: socket.socket) -> None:
    try:
        s.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    try:
        s.close()
    except OSError:
        pass
