"""A TCP proxy between Kafka clients and a broker that can lose produce responses.

The broker advertises the proxy's address, so every client connection goes through it. The
proxy reads the client's request frames to learn each correlation id's API key; when a
Produce response comes back while `drop_produce_responses` is positive, it holds the
response for `hold_ms`, then closes both sides instead of forwarding it. The broker has
written the batch; the client never hears so, and retries it. That is exactly the
situation idempotent producers exist for.
"""

from __future__ import annotations

import socket
import struct
import threading

PRODUCE = 0


class FlakyProxy:
    def __init__(self, drop_produce_responses: int = 0, hold_ms: int = 200):
        self.listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(64)
        self.port = self.listener.getsockname()[1]
        self.upstream: tuple[str, int] | None = None
        self.lock = threading.Lock()
        self.drop_produce_responses = drop_produce_responses
        self.hold_ms = hold_ms
        self.dropped = 0
        self.produce_requests = 0
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def close(self) -> None:
        self.closed = True
        try:
            self.listener.close()
        except OSError:
            pass

    def _take_drop(self) -> bool:
        with self.lock:
            if self.drop_produce_responses > 0:
                self.drop_produce_responses -= 1
                self.dropped += 1
                return True
            return False

    def _accept(self) -> None:
        while not self.closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            if self.upstream is None:
                client.close()
                continue
            try:
                server = socket.create_connection(self.upstream, timeout=5)
                server.settimeout(None)
            except OSError:
                client.close()
                continue
            pending: dict[int, int] = {}
            threading.Thread(target=self._client_to_server, args=(client, server, pending), daemon=True).start()
            threading.Thread(target=self._server_to_client, args=(client, server, pending), daemon=True).start()

    @staticmethod
    def _read_frame(sock: socket.socket) -> bytes | None:
        head = b""
        while len(head) < 4:
            chunk = sock.recv(4 - len(head))
            if not chunk:
                return None
            head += chunk
        (size,) = struct.unpack(">i", head)
        body = bytearray()
        while len(body) < size:
            chunk = sock.recv(min(65536, size - len(body)))
            if not chunk:
                return None
            body += chunk
        return head + bytes(body)

    @staticmethod
    def _shut(*socks: socket.socket) -> None:
        for s in socks:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            try:
                s.close()
            except OSError:
                pass

    def _client_to_server(self, client, server, pending) -> None:
        try:
            while True:
                frame = self._read_frame(client)
                if frame is None:
                    break
                api_key, _version, correlation_id = struct.unpack(">hhi", frame[4:12])
                pending[correlation_id] = api_key
                if api_key == PRODUCE:
                    with self.lock:
                        self.produce_requests += 1
                server.sendall(frame)
        except OSError:
            pass
        self._shut(client, server)

    def _server_to_client(self, client, server, pending) -> None:
        try:
            while True:
                frame = self._read_frame(server)
                if frame is None:
                    break
                (correlation_id,) = struct.unpack(">i", frame[4:8])
                api_key = pending.pop(correlation_id, None)
                if api_key == PRODUCE and self._take_drop():
                    threading.Event().wait(self.hold_ms / 1000)
                    break
                client.sendall(frame)
        except OSError:
            pass
        self._shut(client, server)
