"""Serve the sample app: ``python -m flask_app`` from the samples directory (PORT, REDIS_URL).

The development server gets a socket timeout, so a client that stops reading an event
stream is dropped after :data:`WRITE_TIMEOUT` seconds instead of holding a thread for ever
(event streams that are merely quiet are not affected: they end after the app's idle timeout
and the page reconnects). Production servers have their own setting (gunicorn ``--timeout``).
"""

from __future__ import annotations

import os

from werkzeug.serving import WSGIRequestHandler

from . import create_app

WRITE_TIMEOUT = 60.0


class RequestHandler(WSGIRequestHandler):
    """Werkzeug's request handler with a timeout on every socket read and write."""

    timeout = WRITE_TIMEOUT


create_app().run(
    host="127.0.0.1",
    port=int(os.environ.get("PORT", "5000")),
    threaded=True,
    request_handler=RequestHandler,
)
