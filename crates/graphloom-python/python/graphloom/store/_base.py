"""What graphloom's four stores share: LangGraph ops to and from graphloom's Rust store,
the index config, and the TTL sweeper.

A batch crosses to Rust as one JSON array (values are JSON objects on both sides) and its
results come back as one; Rust runs the ops in order with the GIL released.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import sys
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from typing import Any

from langgraph.store.base import (
    BaseStore,
    GetOp,
    IndexConfig,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    TTLConfig,
    _validate_namespace,
    ensure_embeddings,
    validate_op_namespace,
)

logger = logging.getLogger(__name__)

WILDCARD = "*"


def index_arg(
    index: IndexConfig | dict[str, Any] | None,
    loop: Callable[[], asyncio.AbstractEventLoop | None],
) -> tuple[IndexConfig | None, tuple[int, list[str], Callable[[list[str]], list[list[float]]]] | None]:
    """The store's ``index_config`` and what Rust takes for it: ``(dims, fields, embed)``.

    ``fields`` (``text_fields`` in ``langgraph.store.sqlite``'s config) are top-level or
    dotted paths, or ``"$"`` for the whole value (the default). ``embed`` is anything
    LangGraph's ``ensure_embeddings`` takes: an ``Embeddings`` object, a sync or async
    function of a list of texts, or a provider string. ``loop()`` is the event loop of an
    async store (``None`` for a sync one): its embeddings' async method runs there.
    """
    if not index:
        return None, None
    config = dict(index)
    fields = config.get("fields") or config.get("text_fields") or ["$"]
    config["fields"] = list(fields)
    embeddings = ensure_embeddings(config.get("embed"))
    config["embed"] = embeddings

    def embed(texts: list[str]) -> list[list[float]]:
        # Called from Rust on a thread that is never the event loop's: an async store's
        # calls run on an executor, and its sync methods refuse to run on the loop.
        running = loop()
        if running is not None and not running.is_closed():
            fut = asyncio.run_coroutine_threadsafe(embeddings.aembed_documents(texts), running)
            return fut.result()
        return embeddings.embed_documents(texts)

    return config, (int(config["dims"]), list(fields), embed)


def _ttl_seconds(minutes: float | None) -> float | None:
    return None if minutes is None else float(minutes) * 60.0


def _merge_patterns(a: tuple[str, ...] | None, b: tuple[str, ...]) -> tuple[str, ...] | None:
    """Two prefix (or two suffix) patterns both to match, as one; ``None`` if no namespace
    can match both. Suffixes are merged reversed by the caller."""
    if a is None:
        return b
    out = []
    for i in range(max(len(a), len(b))):
        x = a[i] if i < len(a) else WILDCARD
        y = b[i] if i < len(b) else WILDCARD
        if x == WILDCARD:
            out.append(y)
        elif y == WILDCARD or x == y:
            out.append(x)
        else:
            return None
    return tuple(out)


class _Unmatchable(Exception):
    """Match conditions no namespace satisfies."""


_NAN = "\x00NaN"
"""NaN in a filter, as JSON: a string no number equals (nothing is ``$eq`` NaN)."""


def _finite(value: Any) -> Any:
    """A filter's values with infinities as the largest floats and NaN as ``_NAN``: JSON has
    no non-finite numbers, and these compare with finite ones as the originals do."""
    if isinstance(value, float) and not math.isfinite(value):
        if math.isnan(value):
            return _NAN
        return sys.float_info.max if value > 0 else -sys.float_info.max
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def encode_op(op: Op) -> dict[str, Any]:
    """One op as graphloom's Rust store reads it. Namespace labels are checked first (so a
    label with a ``.`` never addresses another namespace) with LangGraph's own check."""
    validate_op_namespace(op)
    if isinstance(op, GetOp):
        return {"op": "get", "ns": list(op.namespace), "key": op.key, "refresh": bool(op.refresh_ttl)}
    if isinstance(op, PutOp):
        if op.value is None:
            return {"op": "put", "ns": list(op.namespace), "key": op.key, "value": None}
        _validate_namespace(op.namespace)
        index = op.index
        if index is not None and index is not False:
            index = list(index)
        return {
            "op": "put",
            "ns": list(op.namespace),
            "key": op.key,
            "value": op.value,
            "index": index,
            "ttl": _ttl_seconds(op.ttl),
        }
    if isinstance(op, SearchOp):
        return {
            "op": "search",
            "ns": list(op.namespace_prefix),
            "filter": _finite(op.filter) if op.filter else None,
            "query": op.query or None,
            "limit": int(op.limit),
            "offset": int(op.offset),
            "refresh": bool(op.refresh_ttl),
        }
    if isinstance(op, ListNamespacesOp):
        prefix: tuple[str, ...] | None = None
        suffix: tuple[str, ...] | None = None
        for cond in op.match_conditions or ():
            path = tuple(cond.path)
            if cond.match_type == "prefix":
                prefix = _merge_patterns(prefix, path)
                if prefix is None:
                    raise _Unmatchable
            elif cond.match_type == "suffix":
                merged = _merge_patterns(
                    None if suffix is None else tuple(reversed(suffix)), tuple(reversed(path))
                )
                if merged is None:
                    raise _Unmatchable
                suffix = tuple(reversed(merged))
            else:
                raise ValueError(f"unknown match type {cond.match_type!r}")
        return {
            "op": "list",
            "prefix": None if prefix is None else list(prefix),
            "suffix": None if suffix is None else list(suffix),
            "max_depth": op.max_depth,
            "limit": int(op.limit),
            "offset": int(op.offset),
        }
    raise ValueError(f"unknown store op {type(op).__name__}")


def _item(raw: dict[str, Any]) -> Item:
    return Item(
        value=raw["value"],
        key=raw["key"],
        namespace=tuple(raw["namespace"]),
        created_at=raw["created_at"],
        updated_at=raw["updated_at"],
    )


def _search_item(raw: dict[str, Any]) -> SearchItem:
    return SearchItem(
        namespace=tuple(raw["namespace"]),
        key=raw["key"],
        value=raw["value"],
        created_at=raw["created_at"],
        updated_at=raw["updated_at"],
        score=raw.get("score"),
    )


def run_batch(core: Any, ops: Iterable[Op], refresh: bool = True) -> list[Result]:
    """Run ``ops`` on a ``StoreCore`` in order: their results, LangGraph's types. With
    ``refresh`` false, reads never restart TTLs, whatever the ops ask."""
    ops = list(ops)
    encoded: list[dict[str, Any] | None] = []
    for op in ops:
        try:
            enc = encode_op(op)
        except _Unmatchable:
            enc = None
        if enc is not None and not refresh and "refresh" in enc:
            enc["refresh"] = False
        encoded.append(enc)
    sent = [e for e in encoded if e is not None]
    raw = json.loads(core.batch(json.dumps(sent, ensure_ascii=False))) if sent else []
    answers = iter(raw)
    results: list[Result] = []
    for op, enc in zip(ops, encoded):
        if enc is None:
            results.append([])
            continue
        answer = next(answers)
        if isinstance(op, GetOp):
            results.append(None if answer is None else _item(answer))
        elif isinstance(op, SearchOp):
            results.append([_search_item(a) for a in answer])
        elif isinstance(op, ListNamespacesOp):
            results.append([tuple(ns) for ns in answer])
        else:
            results.append(None)
    return results


class GraphloomStore(BaseStore):
    """``BaseStore`` on a ``StoreCore``: ``batch`` runs on the calling thread (the Rust work
    releases the GIL), ``abatch`` on the event loop's default executor."""

    supports_ttl = True

    refresh_needs_config = False
    """Whether reads restart TTLs only when the ``ttl`` config sets ``refresh_on_read``
    (``langgraph.store.sqlite``'s rule); otherwise each op's ``refresh_ttl`` decides (LangGraph's
    base store resolves it from the config, ``True`` when unset), as in
    ``langgraph.store.postgres``."""

    def __init__(self, core: Any, *, index: IndexConfig | None, ttl: TTLConfig | None) -> None:
        self._core = core
        self.index_config = index
        self.embeddings = index["embed"] if index else None
        self.ttl_config = ttl
        self._sweeper: threading.Thread | None = None
        self._sweeper_stop = threading.Event()

    def _refresh(self) -> bool:
        if not self.refresh_needs_config:
            return True
        return bool(self.ttl_config and self.ttl_config.get("refresh_on_read", False))

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        return run_batch(self._core, ops, self._refresh())

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        ops = list(ops)
        return await asyncio.get_running_loop().run_in_executor(
            None, run_batch, self._core, ops, self._refresh()
        )

    def sweep_ttl(self) -> int:
        """Delete every expired item now; how many were deleted. (Expired items are never
        returned, swept or not.)"""
        return self._core.sweep()

    def start_ttl_sweeper(self, sweep_interval_minutes: int | float | None = None) -> Future[None]:
        """Sweep expired items every ``sweep_interval_minutes`` (the TTL config's
        ``sweep_interval_minutes`` by default, else 5) on a daemon thread, until
        ``stop_ttl_sweeper``."""
        done: Future[None] = Future()
        if self._sweeper is not None and self._sweeper.is_alive():
            done.set_result(None)
            return done
        interval = _sweep_interval(self.ttl_config, sweep_interval_minutes)
        self._sweeper_stop.clear()

        def loop() -> None:
            try:
                while not self._sweeper_stop.wait(interval):
                    try:
                        self.sweep_ttl()
                    except Exception:
                        logger.exception("graphloom store: TTL sweep failed")
            finally:
                done.set_result(None)

        self._sweeper = threading.Thread(target=loop, name="graphloom-ttl-sweeper", daemon=True)
        self._sweeper.start()
        return done

    def stop_ttl_sweeper(self, timeout: float | None = None) -> bool:
        """Stop the sweeper thread; whether it stopped within ``timeout`` seconds."""
        if self._sweeper is None:
            return True
        self._sweeper_stop.set()
        self._sweeper.join(timeout)
        stopped = not self._sweeper.is_alive()
        if stopped:
            self._sweeper = None
        return stopped

    def close(self) -> None:
        """Stop the sweeper and close the database connections; later calls fail."""
        self.stop_ttl_sweeper()
        self._core.close()


def _sweep_interval(ttl: TTLConfig | None, minutes: float | None) -> float:
    if minutes is None and ttl:
        minutes = ttl.get("sweep_interval_minutes")
    if minutes is None:
        minutes = 5
    return float(minutes) * 60.0


class AsyncGraphloomStore(GraphloomStore):
    """``GraphloomStore`` for async code: sync methods refuse to run on the event loop's
    thread (they would block it), as LangGraph's async stores do; from other threads they
    work. The TTL sweeper is a task on the loop."""

    def __init__(self, core: Any, *, index: IndexConfig | None, ttl: TTLConfig | None) -> None:
        super().__init__(core, index=index, ttl=ttl)
        self._task: asyncio.Task[None] | None = None
        self._task_stop: asyncio.Event | None = None

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            on_loop = False
        else:
            on_loop = True
        if not on_loop:
            return run_batch(self._core, ops, self._refresh())
        raise asyncio.InvalidStateError(
            f"Synchronous calls to {type(self).__name__} detected in the main event loop. "
            "This is not allowed as it would block the event loop; use the async "
            "methods (aget, aput, asearch, ...) or call from another thread."
        )

    async def sweep_ttl(self) -> int:  # type: ignore[override]
        """Delete every expired item now, off the event loop; how many were deleted."""
        return await asyncio.get_running_loop().run_in_executor(None, self._core.sweep)

    async def start_ttl_sweeper(  # type: ignore[override]
        self, sweep_interval_minutes: int | float | None = None
    ) -> asyncio.Task[None]:
        """Sweep expired items every ``sweep_interval_minutes`` in a task on this loop."""
        if self._task is not None and not self._task.done():
            return self._task
        interval = _sweep_interval(self.ttl_config, sweep_interval_minutes)
        stop = asyncio.Event()
        self._task_stop = stop

        async def loop() -> None:
            while True:
                try:
                    await asyncio.wait_for(stop.wait(), interval)
                    return
                except asyncio.TimeoutError:
                    pass
                try:
                    await self.sweep_ttl()
                except Exception:
                    logger.exception("graphloom store: TTL sweep failed")

        self._task = asyncio.create_task(loop())
        return self._task

    async def stop_ttl_sweeper(self, timeout: float | None = None) -> bool:  # type: ignore[override]
        """Stop the sweeper task; whether it stopped within ``timeout`` seconds."""
        if self._task is None:
            return True
        if self._task_stop is not None:
            self._task_stop.set()
        try:
            await asyncio.wait_for(asyncio.shield(self._task), timeout)
        except asyncio.TimeoutError:
            return False
        self._task = None
        return True

    async def aclose(self) -> None:
        """Stop the sweeper and close the database connections, off the event loop."""
        await self.stop_ttl_sweeper()
        await asyncio.get_running_loop().run_in_executor(None, self._core.close)

