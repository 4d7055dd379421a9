"""Serve the sample app: ``python -m flask_app`` from the samples directory (PORT, REDIS_URL)."""

from __future__ import annotations

import os

from . import create_app

create_app().run(host="127.0.0.1", port=int(os.environ.get("PORT", "5000")), threaded=True)
