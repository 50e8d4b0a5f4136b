"""The listening socket of our servers (viewer/annotator, model server), bound before anything else starts.

Binding first turns "port in use" into one clear error before data or a model is loaded, instead of uvicorn's
log line and exit code 3 after the start-up messages.

The socket is made with ``IPPROTO_TCP`` (not protocol 0): asyncio sets ``TCP_NODELAY`` on an accepted connection
only when its socket says it is TCP, and an accepted socket inherits the listening socket's protocol.  Without it
(issue 42), uvicorn's two writes per response (head, then body) met Nagle's algorithm: the body waited for the
client's delayed ACK, about 40 ms, on every request of a keep-alive connection (``benchmarks/bench_keepalive.py``).
"""

from __future__ import annotations

import socket

from .errors import ThoughtSourceError

#: The port ``serve-model`` listens on by default, and so the port the ``openai`` backend asks by default
#: (8000 is the annotator's, ``thoughtsource serve``).
MODEL_SERVER_PORT = 8001


def bind(host: str, port: int) -> socket.socket:
    """A socket bound to ``host:port`` (``port`` 0: a free one), ready for ``uvicorn.Server.run(sockets=[...])``."""
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # (Linux copies it to accepted sockets too)
    try:
        sock.bind((host, port))
    except OSError as e:
        sock.close()
        raise ThoughtSourceError(f"cannot listen on {host}:{port}: {e.strerror}") from e
    return sock
