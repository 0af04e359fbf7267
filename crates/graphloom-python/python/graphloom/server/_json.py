"""What a graph's values, updates and stream parts look like as JSON, as LangGraph Server
writes them: messages and other pydantic models by their fields, dataclasses (``Interrupt``,
``Send``) by theirs, tuples and sets as lists, anything else by ``str``."""

from __future__ import annotations

import base64
import dataclasses
import datetime
import enum
import json
import uuid
from collections.abc import Mapping
from typing import Any

try:  # orjson comes with LangGraph's dependencies; plain json works the same, slower.
    import orjson
except ImportError:  # pragma: no cover
    orjson = None


def _default(obj: Any) -> Any:
    dump = getattr(obj, "model_dump", None)
    if callable(dump):
        return dump()
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}
    if isinstance(obj, (set, frozenset, tuple)):
        return list(obj)
    if isinstance(obj, (datetime.datetime, datetime.date, datetime.time)):
        return obj.isoformat()
    if isinstance(obj, uuid.UUID):
        return str(obj)
    if isinstance(obj, enum.Enum):
        return obj.value
    if isinstance(obj, (bytes, bytearray)):
        return base64.b64encode(bytes(obj)).decode()
    if isinstance(obj, Mapping):
        return dict(obj)
    to_dict = getattr(obj, "dict", None)
    if callable(to_dict):
        try:
            return to_dict()
        except TypeError:
            pass
    return str(obj)


def dumps(obj: Any) -> str:
    """``obj`` as JSON text."""
    if orjson is not None:
        return orjson.dumps(
            obj, default=_default, option=orjson.OPT_NON_STR_KEYS | orjson.OPT_SERIALIZE_NUMPY
        ).decode()
    return json.dumps(obj, default=_default)


def loads(text: str) -> Any:
    return json.loads(text)
