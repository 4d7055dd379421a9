"""Read other projects' Sphinx inventories from local copies when the machine has them.

CI has no network but the package registries, so ``.ci/run`` installs Debian's documentation
packages, which ship the inventories (``objects.inv``) of the documentation of Python, attrs,
cattrs, Flask, Werkzeug and Celery.
Where a local copy exists, intersphinx reads it and links to the project's site; elsewhere it
fetches the inventory from the site as usual.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sphinx.application import Sphinx
from sphinx.config import Config

LOCAL_COPIES = {
    "python": [
        "/usr/share/doc/python3-doc/html/objects.inv",
        *(f"/usr/share/doc/python3.{minor}/html/objects.inv" for minor in range(20, 9, -1)),
    ],
    "attrs": ["/usr/share/doc/python-attr-doc/html/objects.inv"],
    "cattrs": ["/usr/share/doc/python-cattrs-doc/html/objects.inv"],
    "flask": ["/usr/share/doc/python-flask-doc/html/objects.inv"],
    "werkzeug": ["/usr/share/doc/python-werkzeug-doc/html/objects.inv"],
    "celery": ["/usr/share/doc/python-celery-doc/html/objects.inv"],
}


def local_inventory(project: str) -> str | None:
    """The path of a local copy of ``project``'s inventory, or ``None``."""
    for candidate in LOCAL_COPIES.get(project, ()):
        if Path(candidate).is_file():
            return candidate
    return None


def _use_local_copies(app: Sphinx, config: Config) -> None:
    mapping: dict[str, Any] = dict(config.intersphinx_mapping)
    for project, value in mapping.items():
        target, inventory = value
        local = local_inventory(project)
        if local is not None and inventory is None:
            mapping[project] = (target, (local, None))
    config.intersphinx_mapping = mapping


def setup(app: Sphinx) -> dict[str, Any]:
    # Before intersphinx normalises the mapping (its own handler runs at priority 800).
    app.connect("config-inited", _use_local_copies, priority=400)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
