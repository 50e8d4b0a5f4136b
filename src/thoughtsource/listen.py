"""The listening socket of our servers (viewer/annotator, model server), bound before anything else starts.

Binding first turns "port in use" into one clear error before data or a model is loaded, instead of uvicorn's
log line and exit code 3 after the start-up messages.
"""

from __future__ import annotations

import socket

from .errors import ThoughtSourceError

#: The port ``serve-model`` listens on by default, and so the port the ``openai`` backend asks by default
#: (8000 is the annotator's, ``thoughtsource serve``).
MODEL_SERVER_PORT = 8001


def bind(host: str, port: int) -> socket.socket:
    """A socket bound to ``host:port`` (``port`` 0: a free one), ready for ``uvicorn.Server.run(sockets=[...])``."""
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as e:
        sock.close()
        raise ThoughtSourceError(f"cannot listen on {host}:{port}: {e.strerror}") from e
    return sock
