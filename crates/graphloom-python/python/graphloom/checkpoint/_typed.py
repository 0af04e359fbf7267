"""What every graphloom saver shares: checkpoints turned into the ``(type, bytes)`` rows the
Rust core stores, and back, with the saver's ``serde``.

A checkpoint is stored without its channel values; each channel version a checkpoint writes
first is one row, written once, so storage grows with what changed rather than with the whole
state at every step. Metadata is stored as JSON (list filters match its keys), like
LangGraph's own SQLite saver does.
"""

from __future__ import annotations

import asyncio
import functools
import json
import secrets
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    get_checkpoint_id,
    get_checkpoint_metadata,
)
from langgraph.checkpoint.serde.base import SerializerProtocol


def _config(thread_id: str, checkpoint_ns: str, checkpoint_id: str) -> RunnableConfig:
    return {
        "configurable": {
            "thread_id": thread_id,
            "checkpoint_ns": checkpoint_ns,
            "checkpoint_id": checkpoint_id,
        }
    }


class TypedSaver(BaseCheckpointSaver[str]):
    """A ``BaseCheckpointSaver`` over a Rust core with the typed-row interface.

    Sync methods call the core directly (it releases the GIL while Rust works); async
    methods run the same calls on the event loop's default executor, so the loop never
    waits for a disk read or a commit.
    """

    def __init__(self, core: Any, *, serde: SerializerProtocol | None = None) -> None:
        super().__init__(serde=serde)
        self._core = core

    def close(self) -> None:
        """Let go of the database: a PostgreSQL saver closes its pool (later calls fail);
        a SQLite one has nothing open that needs closing (every write is committed when it
        returns). ``from_conn_string`` closes its saver on exit."""
        self._core.close()

    # --- conversions ---------------------------------------------------------------------

    def _tuple(self, row: tuple) -> CheckpointTuple:
        (thread_id, ns, checkpoint_id, parent_id, type_tag, data, metadata, values, writes) = row
        checkpoint = self.serde.loads_typed((type_tag, data))
        checkpoint["channel_values"] = {
            channel: self.serde.loads_typed((t, b)) for channel, t, b in values
        }
        return CheckpointTuple(
            config=_config(thread_id, ns, checkpoint_id),
            checkpoint=checkpoint,
            metadata=json.loads(metadata),
            parent_config=_config(thread_id, ns, parent_id) if parent_id else None,
            pending_writes=[
                (task_id, channel, self.serde.loads_typed((t, b)))
                for task_id, channel, t, b in writes
            ],
        )

    # --- sync ----------------------------------------------------------------------------

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        configurable = config["configurable"]
        row = self._core.get_tuple(
            configurable["thread_id"],
            configurable.get("checkpoint_ns", ""),
            get_checkpoint_id(config),
        )
        return self._tuple(row) if row is not None else None

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        yield from self._list(config, filter, before, limit)

    def _list(
        self,
        config: RunnableConfig | None,
        filter: dict[str, Any] | None,
        before: RunnableConfig | None,
        limit: int | None,
    ) -> list[CheckpointTuple]:
        configurable = (config or {}).get("configurable", {})
        before_id = get_checkpoint_id(before) if before else None
        if configurable.get("checkpoint_id"):
            # One checkpoint named: it is the whole listing, if it matches the rest.
            found = self.get_tuple(config)
            if found is None or (before_id and found.checkpoint["id"] >= before_id):
                return []
            if filter and any(found.metadata.get(k) != v for k, v in filter.items()):
                return []
            return [found]
        rows = self._core.list(
            configurable.get("thread_id"),
            configurable.get("checkpoint_ns"),
            json.dumps(filter) if filter else None,
            before_id,
            limit,
        )
        return [self._tuple(row) for row in rows]

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        configurable = config["configurable"]
        thread_id = configurable["thread_id"]
        ns = configurable.get("checkpoint_ns", "")
        head = dict(checkpoint)
        values = head.pop("channel_values", None) or {}
        blobs = [
            (channel, str(version), *self.serde.dumps_typed(values[channel]))
            for channel, version in new_versions.items()
            if channel in values
        ]
        versions = [(c, str(v)) for c, v in checkpoint["channel_versions"].items()]
        type_tag, data = self.serde.dumps_typed(head)
        self._core.put(
            thread_id,
            ns,
            checkpoint["id"],
            configurable.get("checkpoint_id"),
            type_tag,
            data,
            json.dumps(get_checkpoint_metadata(config, metadata), ensure_ascii=False),
            versions,
            blobs,
        )
        return _config(thread_id, ns, checkpoint["id"])

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        configurable = config["configurable"]
        # Special channels (errors, interrupts, ...) have fixed indexes and replace what a
        # task wrote there before; ordinary writes keep the first write of each index.
        replace = all(channel in WRITES_IDX_MAP for channel, _ in writes)
        rows = [
            (WRITES_IDX_MAP.get(channel, idx), channel, *self.serde.dumps_typed(value))
            for idx, (channel, value) in enumerate(writes)
        ]
        self._core.put_writes(
            configurable["thread_id"],
            configurable.get("checkpoint_ns", ""),
            configurable["checkpoint_id"],
            task_id,
            task_path,
            rows,
            replace,
        )

    def delete_thread(self, thread_id: str) -> None:
        self._core.delete_thread(str(thread_id))

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        self._core.delete_for_runs([str(r) for r in run_ids])

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        self._core.copy_thread(str(source_thread_id), str(target_thread_id))

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        if strategy not in ("keep_latest", "delete"):
            raise ValueError(f"unknown prune strategy {strategy!r}: 'keep_latest' or 'delete'")
        self._core.prune([str(t) for t in thread_ids], strategy == "keep_latest")

    def get_next_version(self, current: str | int | float | None, channel: None = None) -> str:
        """A zero-padded counter (so versions sort as strings) and a random tag, so two
        forks of one checkpoint never write the same version of a channel."""
        if current is None:
            n = 0
        elif isinstance(current, str):
            n = int(current.split(".", 1)[0])
        else:
            n = int(current)
        return f"{n + 1:032d}.{secrets.token_hex(8)}"

    # --- async ---------------------------------------------------------------------------

    def _calls_lock(self) -> asyncio.Lock:
        """One lock per event loop: a saver's async calls run one at a time, in the order
        they were made, as on LangGraph's one-connection async savers. On a pool of
        executor threads they could finish out of order, and the order of a graph's
        stream follows them. (Concurrent graphs with savers of their own still share the
        SQLite writer's group commits.)"""
        loop = asyncio.get_running_loop()
        held = getattr(self, "_calls_lock_of", None)
        if held is None or held[0] is not loop:
            held = (loop, asyncio.Lock())
            self._calls_lock_of = held
        return held[1]

    async def _run(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        loop = asyncio.get_running_loop()
        async with self._calls_lock():
            return await loop.run_in_executor(None, functools.partial(fn, *args, **kwargs))

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return await self._run(self.get_tuple, config)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        for item in await self._run(self._list, config, filter, before, limit):
            yield item

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        return await self._run(self.put, config, checkpoint, metadata, new_versions)

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        await self._run(self.put_writes, config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id: str) -> None:
        await self._run(self.delete_thread, thread_id)

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        await self._run(self.delete_for_runs, run_ids)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        await self._run(self.copy_thread, source_thread_id, target_thread_id)

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        await self._run(self.prune, thread_ids, strategy=strategy)
