"""Values without base64 inflation.

Inductor's FX-graph and AOTAutograd entries are JSON: {"data": <base64 of a
pickle>, "time_taken_ms": N}. Stored as they come, a third of every entry is
base64 overhead. pack() stores the pickle's bytes as the value and the other
fields in the entry's metadata; unpack() rebuilds JSON that Inductor's serde
decodes to the same object. Anything else is stored as it is.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Mapping

_FORMAT = "torch_value"
_BASE64_DATA = "base64-data"
_FIELDS = "torch_fields"


def pack(data: bytes) -> tuple[bytes, dict[str, str]]:
    """(value to store, metadata to store with it)."""
    if not data.startswith(b"{"):
        return data, {}
    try:
        doc = json.loads(data)
    except ValueError:
        return data, {}
    encoded = doc.get("data") if isinstance(doc, dict) else None
    if not isinstance(encoded, str):
        return data, {}
    try:
        raw = base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError):
        return data, {}
    if base64.b64encode(raw).decode("ascii") != encoded:
        return data, {}  # not canonical base64: keep it byte for byte
    fields = {k: v for k, v in doc.items() if k != "data"}
    return raw, {_FORMAT: _BASE64_DATA, _FIELDS: json.dumps(fields)}


def unpack(value: bytes, metadata: Mapping[str, str]) -> bytes:
    """The bytes Inductor stored, from what pack() returned."""
    if metadata.get(_FORMAT) != _BASE64_DATA:
        return value
    doc = {"data": base64.b64encode(value).decode("ascii")}
    fields = json.loads(metadata.get(_FIELDS) or "{}")
    if isinstance(fields, dict):
        doc.update({k: v for k, v in fields.items() if k != "data"})  # the value is always the data
    return json.dumps(doc).encode("ascii")


def is_packed(metadata: Mapping[str, str]) -> bool:
    """Whether the value is the pickle of Inductor's {"data": base64} JSON."""
    return metadata.get(_FORMAT) == _BASE64_DATA


def unpack_metadata(metadata: Mapping[str, str]) -> dict[str, str]:
    """The part of an entry's metadata unpack() reads: what a run manifest
    keeps per entry (not the hash details, which can be kilobytes)."""
    return {k: metadata[k] for k in (_FORMAT, _FIELDS) if k in metadata}
