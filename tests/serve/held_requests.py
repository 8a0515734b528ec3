"""Requests that hold an admission slot for as long as a test wants: their bodies stop halfway.

Admission comes before the body is read, so a request whose body is still coming is in flight
(or queued) in its lane until the rest is sent. Raw sockets: an HTTP client reads the answer
only once it has sent the whole body.
"""

from __future__ import annotations

import socket
from urllib.parse import urlsplit


class HeldRequest:
    """One ``POST`` to ``base_url + path`` with half of ``body`` sent."""

    def __init__(
        self, base_url: str, path: str, body: bytes, headers: dict[str, str] | None = None
    ) -> None:
        url = urlsplit(base_url)
        lines = [
            f"POST {url.path}{path} HTTP/1.1",
            f"Host: {url.hostname}",
            "Content-Type: application/json",
            f"Content-Length: {len(body)}",
            *(f"{k}: {v}" for k, v in (headers or {}).items()),
        ]
        self.body, self.held_at = body, len(body) // 2
        self.sock = socket.create_connection((url.hostname, url.port), timeout=60)
        self.sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode() + body[: self.held_at])

    def release(self) -> None:
        """Sends the rest of the body."""
        self.sock.sendall(self.body[self.held_at :])

    def answer(self) -> tuple[int, str]:
        """The answer's HTTP status and its first bytes (for messages); closes the socket."""
        try:
            answer = self.sock.recv(4096).decode(errors="replace")
            return int(answer.split()[1]), answer
        finally:
            self.sock.close()


def release_all(held: list[HeldRequest]) -> list[tuple[int, str]]:
    """Every body finished first, then the answers read: the order in which the ingress
    admitted them is not necessarily the order they were opened in."""
    for request in held:
        request.release()
    return [request.answer() for request in held]
