"""What the bytes of a content part are, and whether a part's URL is one a model may be sent.

A media type a caller states is a claim; the first bytes of the data are evidence. For the
formats models read (PNG, JPEG, GIF, WebP, PDF, WAV, MP3, OGG, FLAC, WebM, MP4 audio) the
signature is checked against the claim, and the formats whose end is marked (PNG's ``IEND``,
JPEG's end-of-image, PDF's ``%%EOF``, a RIFF container's length) are checked for truncation.
Bytes that are a program (a Windows, Linux or macOS executable, a script with ``#!``) are
never accepted as an image, a document or a sound.

URLs are never fetched by agentkit: a URL part is handed to the model server as it is. Those
a server must not be asked to fetch (``file://``, loopback, private, link-local and other
non-public addresses written as IP literals, ``localhost``, cloud metadata names) are refused
when the part is built. Host names are not resolved here (that would be a fetch of a kind,
and a name can resolve differently later); an application that passes user-supplied URLs on
should resolve and check them itself.

Framework-internal: :mod:`agentkit.schema` builds its parts with these checks.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentkit.errors import AgentKitValueError

if TYPE_CHECKING:
    import ipaddress

__all__ = ["EXECUTABLE", "check_bytes", "check_url", "sniff"]

EXECUTABLE = "application/x-executable"
"""What :func:`sniff` says for a program's bytes."""

# Aliases people and servers write for the same format.
_ALIASES = {
    "image/jpg": "image/jpeg",
    "image/pjpeg": "image/jpeg",
    "image/x-png": "image/png",
    "audio/x-wav": "audio/wav",
    "audio/wave": "audio/wav",
    "audio/vnd.wave": "audio/wav",
    "audio/mp3": "audio/mpeg",
    "audio/x-flac": "audio/flac",
    "audio/x-m4a": "audio/mp4",
    "audio/m4a": "audio/mp4",
    "application/x-pdf": "application/pdf",
}

_EXECUTABLE_PREFIXES = (
    b"MZ",  # Windows PE
    b"\x7fELF",  # Linux
    b"\xfe\xed\xfa\xce",  # Mach-O, both byte orders and widths, and fat binaries
    b"\xfe\xed\xfa\xcf",
    b"\xce\xfa\xed\xfe",
    b"\xcf\xfa\xed\xfe",
    b"\xca\xfe\xba\xbe",
    b"#!",  # a script
)

_BLOCKED_HOSTS = frozenset(
    {"localhost", "metadata", "metadata.google.internal", "metadata.goog", "instance-data"}
)


def normalize(media_type: str) -> str:
    """``media_type`` lower-cased, without parameters, with common aliases resolved."""
    base = media_type.split(";", 1)[0].strip().lower()
    return _ALIASES.get(base, base)


def sniff(data: bytes) -> str | None:
    """The media type the first bytes of ``data`` show, or ``None`` when they show none known."""
    head = data[:16]
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if head.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if head.startswith((b"GIF87a", b"GIF89a")):
        return "image/gif"
    if head.startswith(b"RIFF") and head[8:12] == b"WEBP":
        return "image/webp"
    if head.startswith(b"RIFF") and head[8:12] == b"WAVE":
        return "audio/wav"
    if head.startswith(b"%PDF-"):
        return "application/pdf"
    if head.startswith(b"OggS"):
        return "audio/ogg"
    if head.startswith(b"fLaC"):
        return "audio/flac"
    if head.startswith(b"\x1a\x45\xdf\xa3"):
        return "audio/webm"
    if head[4:8] == b"ftyp" and head[8:11] in (b"M4A", b"mp4", b"iso", b"M4B"):
        return "audio/mp4"
    if head.startswith(b"ID3") or (len(head) > 1 and head[0] == 0xFF and head[1] & 0xE6 == 0xE2):
        return "audio/mpeg"
    if head.startswith(_EXECUTABLE_PREFIXES):
        return EXECUTABLE
    return None


# The families a claimed type may belong to: the sniffed types that count as a match.
_COMPATIBLE = {
    "audio/webm": {"audio/webm", "video/webm"},
    "video/webm": {"audio/webm", "video/webm"},
    "audio/mp4": {"audio/mp4", "video/mp4"},
    "video/mp4": {"audio/mp4", "video/mp4"},
}
_SNIFFABLE = frozenset(
    {
        "image/png",
        "image/jpeg",
        "image/gif",
        "image/webp",
        "audio/wav",
        "application/pdf",
        "audio/ogg",
        "audio/flac",
        "audio/webm",
        "audio/mpeg",
        "audio/mp4",
    }
)


def _truncated(media_type: str, data: bytes) -> str:
    """Why ``data`` of a known ``media_type`` looks cut short ("" when it does not)."""
    if media_type == "image/png" and not data.rstrip(b"\x00").endswith(b"IEND\xaeB`\x82"):
        return "a PNG without its IEND end chunk"
    if media_type == "image/jpeg" and b"\xff\xd9" not in data[-64:]:
        return "a JPEG without its end-of-image marker"
    if media_type == "application/pdf" and b"%%EOF" not in data[-2048:]:
        return "a PDF without its %%EOF end marker"
    if media_type in ("image/webp", "audio/wav") and len(data) >= 8:
        declared = int.from_bytes(data[4:8], "little")
        # Streamed WAV writers leave the size 0 or 0xFFFFFFFF ("unknown"): nothing to check.
        if declared not in (0, 0xFFFFFFFF) and declared + 8 > len(data):
            return f"a RIFF file that declares {declared + 8} bytes but holds {len(data)}"
    return ""


# Raw sample formats have no header: any bytes are a valid sound of these types.
_RAW_AUDIO = frozenset({"audio/pcm", "audio/pcm16", "audio/l16", "audio/raw", "audio/basic"})


def check_bytes(family: str, data: bytes, media_type: str | None, where: str) -> str:
    """The media type of ``data`` for a part of ``family`` (``"image"``, ``"audio"`` or
    ``"file"``), checked against the bytes; the error text when they disagree starts with
    ``where``.

    Returns the normalized media type, or raises ``ValueError`` with a sentence that says
    what is wrong and how to fix it (the caller wraps it in its own error class).
    """
    if family == "audio" and media_type is not None and normalize(media_type) in _RAW_AUDIO:
        return normalize(media_type)
    found = sniff(data)
    if found == EXECUTABLE and (
        family != "file" or media_type is None or normalize(media_type) != EXECUTABLE
    ):
        raise AgentKitValueError(
            f"{where}: the bytes are a program (an executable or a script), not "
            f"{_article(family)}; agentkit does not send programs to a model as media"
        )
    if media_type is None:
        if found is None:
            if family == "file":
                return "application/octet-stream"
            raise AgentKitValueError(
                f"{where}: cannot tell the {family}'s format from its first bytes "
                f"({data[:8]!r}); pass media_type=... (such as "
                f"{'image/png' if family == 'image' else 'audio/wav'})"
            )
        claimed = found
    else:
        claimed = normalize(media_type)
    if family in ("image", "audio") and not claimed.startswith(f"{family}/"):
        raise AgentKitValueError(
            f"{where}: media_type {claimed!r} is not an {family} type (an {family} part needs "
            f"{family}/...); use FilePart for other content"
        )
    if found is not None and found != claimed and found not in _COMPATIBLE.get(claimed, ()):
        raise AgentKitValueError(
            f"{where}: media_type says {claimed!r} but the bytes are {found!r}; pass the "
            f"media type the data really has"
        )
    if found is None and claimed in _SNIFFABLE:
        raise AgentKitValueError(
            f"{where}: media_type says {claimed!r} but the bytes do not start like one "
            f"({data[:8]!r}); the data is corrupt or of another format"
        )
    problem = _truncated(claimed, data)
    if problem:
        raise AgentKitValueError(
            f"{where}: the data is {problem}; the file is truncated or corrupt (pass the "
            "whole file)"
        )
    return claimed


def _article(family: str) -> str:
    return {"image": "an image", "audio": "a sound", "file": "a document"}[family]


def check_url(url: str, where: str) -> None:
    """Raise ``ValueError`` unless ``url`` is an ``http``/``https`` URL a model server may
    fetch: no ``file://`` or other scheme, no credentials, and no host that names this
    machine or a private network."""
    # Imported here: most programs never build a part from a URL (import agentkit stays light).
    import ipaddress
    import urllib.parse

    try:
        parsed = urllib.parse.urlsplit(url)
        host = parsed.hostname
    except ValueError as error:
        raise AgentKitValueError(f"{where}: {url[:80]!r} is not a valid URL ({error})") from None
    if parsed.scheme not in ("http", "https"):
        raise AgentKitValueError(
            f"{where}: URL scheme {parsed.scheme + '://' if parsed.scheme else 'missing'} "
            f"({url[:80]!r}) is refused: a part's URL must be http:// or https:// (pass local "
            "content as bytes: ImagePart(path.read_bytes()))"
        )
    if not host:
        raise AgentKitValueError(f"{where}: URL {url[:80]!r} has no host")
    if parsed.username is not None or parsed.password is not None:
        raise AgentKitValueError(
            f"{where}: URL {url[:80]!r} holds credentials; a model server would see them "
            "(pass a URL without user:password@)"
        )
    name = host.rstrip(".").lower()
    if name in _BLOCKED_HOSTS or name.endswith((".localhost", ".internal", ".local")):
        raise AgentKitValueError(
            f"{where}: URL host {host!r} names this machine or a private network; a model "
            "server must not be asked to fetch it"
        )
    address: ipaddress.IPv4Address | ipaddress.IPv6Address
    try:
        address = ipaddress.ip_address(name.strip("[]"))
    except ValueError:
        import socket

        try:  # the legacy forms servers still parse: 2130706433, 0x7f.1, 0177.0.0.1
            address = ipaddress.IPv4Address(socket.inet_aton(name))
        except OSError:
            return  # a DNS name: not resolved here (see the module's docstring)
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    if not address.is_global or address.is_multicast:
        raise AgentKitValueError(
            f"{where}: URL host {host} is a loopback, private, link-local or reserved "
            "address (cloud metadata services live at 169.254.169.254); a model server must "
            "not be asked to fetch it"
        )
