//! Reads: `get_tuple` and `list`. Checkpoint rows are decoded, then the channel values
//! they name are resolved from the blobs (append chains in memory), read per (thread,
//! namespace) in one query for the exact versions needed and not cached.

use super::aad;
use super::cache::{entry_bytes, ValueCache};
use super::rows::{corrupt_cp, decode_cp, CpRow, Decoded};
use super::SqliteSaver;
use crate::error::{other, SqlResultExt};
use crate::row::{bytes_of, each_row, FromRow};
use graphloom_core::checkpoint::{
    resolve_channel, BlobCodec, ChannelValue, CheckpointConfig, CheckpointMetadata, CheckpointTuple,
    ListQuery, PendingWrite, Version,
};
use graphloom_core::Result;
use rusqlite::types::Value as SqlValue;
use serde_json::Value;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

/// Stored blobs of one thread and namespace: channel -> version -> (encoding, bytes).
type BlobRows = HashMap<String, HashMap<String, (String, Vec<u8>)>>;

/// What has been read of one (thread, namespace) for the checkpoints being built.
#[derive(Default)]
struct GroupData {
    blobs: BlobRows,
    /// Channels whose every blob has been read.
    fetched_all: HashSet<String>,
    /// Blobs decoded so far, so list does not decode a shared blob once per checkpoint.
    decoded: HashMap<(String, String), ChannelValue>,
    /// Channel versions found in the cache before reading (their blobs were not read).
    hits: HashMap<(String, String), Arc<Value>>,
    writes: HashMap<String, Vec<PendingWrite>>,
}

/// Everything a read needs besides the connection.
struct ReadCtx<'a> {
    codec: &'a BlobCodec,
    cache: &'a ValueCache,
    /// The cache epoch taken before the read transaction began.
    epoch: u64,
}

fn add_blob_row(blobs: &mut BlobRows, row: &rusqlite::Row<'_>) -> Result<()> {
    let channel: String = row.get(0).sql()?;
    let version: String = row.get(1).sql()?;
    // An unreadable encoding or value is reported when (and if) the blob is needed.
    let enc: String = row.get(2).unwrap_or_default();
    let value: Vec<u8> = bytes_of(row, 3).unwrap_or_default();
    blobs.entry(channel).or_default().insert(version, (enc, value));
    Ok(())
}

/// Read the pending writes of `checkpoint_ids`, and the blobs at exactly the `(channel,
/// version)` pairs in `exact`, of one thread and namespace.
fn load_group(
    conn: &rusqlite::Connection,
    codec: &BlobCodec,
    thread: &str,
    ns: &str,
    exact: &[(&str, String)],
    checkpoint_ids: &[&str],
) -> Result<GroupData> {
    let mut data = GroupData::default();
    if !exact.is_empty() {
        let pairs = serde_json::to_string(exact).map_err(|e| other(e.to_string()))?;
        each_row(
            conn,
            "SELECT channel, version, enc, value FROM checkpoint_blobs
             WHERE thread_id = ?1 AND checkpoint_ns = ?2 AND (channel, version) IN
                (SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]') FROM json_each(?3))",
            (thread, ns, pairs),
            |row| add_blob_row(&mut data.blobs, row),
        )?;
    }
    let ids = serde_json::to_string(checkpoint_ids).map_err(|e| other(e.to_string()))?;
    each_row(
        conn,
        "SELECT checkpoint_id, task_id, idx, channel, enc, value FROM checkpoint_writes
         WHERE thread_id = ?1 AND checkpoint_ns = ?2 AND checkpoint_id IN (SELECT value FROM json_each(?3))
         ORDER BY seq",
        (thread, ns, ids),
        |row| {
            let checkpoint_id: String = row.get(0).sql()?;
            let task_id: String = row.get(1).sql()?;
            let idx: i64 = row.get(2).sql()?;
            let bad = |e: String| {
                corrupt_cp(
                    thread,
                    &checkpoint_id,
                    format!("pending write {idx} of task `{task_id}`: {e}"),
                )
            };
            let channel: String = row.get(3).map_err(|e| bad(e.to_string()))?;
            let enc: String = row.get(4).map_err(|e| bad(e.to_string()))?;
            let bytes: Vec<u8> = bytes_of(row, 5).map_err(|e| bad(e.to_string()))?;
            let aad = aad::write(thread, ns, &checkpoint_id, &task_id, idx, &channel);
            let value: Value = codec.decode(&enc, &bytes, &aad).map_err(|e| bad(e.to_string()))?;
            data.writes.entry(checkpoint_id).or_default().push(PendingWrite {
                task_id,
                channel,
                value,
            });
            Ok(())
        },
    )?;
    Ok(data)
}

/// Read every blob of `channel` (of one thread and namespace) not read yet.
fn load_channel(
    conn: &rusqlite::Connection,
    thread: &str,
    ns: &str,
    channel: &str,
    group: &mut GroupData,
) -> Result<()> {
    each_row(
        conn,
        "SELECT channel, version, enc, value FROM checkpoint_blobs
         WHERE thread_id = ?1 AND checkpoint_ns = ?2 AND channel = ?3",
        (thread, ns, channel),
        |row| add_blob_row(&mut group.blobs, row),
    )?;
    group.fetched_all.insert(channel.to_owned());
    Ok(())
}

/// How resolving one channel version went.
enum Resolution {
    /// The full value, and about how many stored bytes it was built from.
    Value(Value, usize),
    /// No blob at that exact version: the channel is empty.
    Empty,
    /// A link of the append chain is not among the blobs read so far.
    MissingLink(String),
    /// A blob does not decode, or the chain is broken.
    Corrupt(String),
}

/// Resolve `channel` at `version` from the blobs read so far, stopping at a cached value.
fn try_resolve(
    ctx: &ReadCtx<'_>,
    thread: &str,
    ns: &str,
    channel: &str,
    version: &Version,
    group: &mut GroupData,
) -> Resolution {
    let Some(chain) = group
        .blobs
        .get(channel)
        .filter(|chain| chain.contains_key(&version.to_string()))
    else {
        return Resolution::Empty;
    };
    let decoded = &mut group.decoded;
    let mut size = 0usize;
    let mut failure: Option<String> = None;
    let mut missing = false;
    let resolved = resolve_channel(channel, version, |v: &Version| {
        let key = v.to_string();
        if v != version {
            let cache_key = (thread.to_owned(), ns.to_owned(), channel.to_owned(), key.clone());
            if let Some((value, bytes)) = ctx.cache.get(&cache_key) {
                size += bytes;
                return Some(ChannelValue::Full((*value).clone()));
            }
        }
        let Some((enc, bytes)) = chain.get(&key) else {
            missing = true;
            return None;
        };
        size += bytes.len();
        let memo_key = (channel.to_owned(), key);
        if let Some(hit) = decoded.get(&memo_key) {
            return Some(hit.clone());
        }
        match ctx
            .codec
            .decode::<ChannelValue>(enc, bytes, &aad::blob(thread, ns, channel, &memo_key.1))
        {
            Ok(value) => {
                decoded.insert(memo_key, value.clone());
                Some(value)
            }
            Err(e) => {
                failure.get_or_insert(format!("channel `{channel}` version {}: {e}", memo_key.1));
                None
            }
        }
    });
    match (resolved, failure) {
        (_, Some(message)) => Resolution::Corrupt(message),
        (Ok(value), None) => Resolution::Value(value, size),
        (Err(e), None) if missing => Resolution::MissingLink(e.to_string()),
        (Err(e), None) => Resolution::Corrupt(e.to_string()),
    }
}

/// Resolve every channel of a decoded checkpoint to its full value and build the tuple.
fn build_tuple(
    conn: &rusqlite::Connection,
    ctx: &ReadCtx<'_>,
    d: Decoded,
    group: &mut GroupData,
) -> Result<CheckpointTuple> {
    let Decoded {
        row,
        mut checkpoint,
        metadata,
    } = d;
    let (thread, ns, id) = (&row.thread_id, &row.ns, &row.id);
    let mut values = BTreeMap::new();
    for (channel, version) in &checkpoint.channel_versions {
        let key = (thread.clone(), ns.clone(), channel.clone(), version.to_string());
        if let Some(value) = group.hits.get(&(key.2.clone(), key.3.clone())) {
            values.insert(channel.clone(), ChannelValue::Full((**value).clone()));
            continue;
        }
        let mut outcome = try_resolve(ctx, thread, ns, channel, version, group);
        if matches!(outcome, Resolution::MissingLink(_)) && !group.fetched_all.contains(channel) {
            // The chain reaches past what was read (and cached): read the whole channel.
            load_channel(conn, thread, ns, channel, group)?;
            outcome = try_resolve(ctx, thread, ns, channel, version, group);
        }
        match outcome {
            Resolution::Empty => {}
            Resolution::Value(value, size) => {
                // The stored size is less than the decoded value's: a cheap first check.
                if ctx.cache.accepts(size) {
                    let shared = Arc::new(value);
                    values.insert(channel.clone(), ChannelValue::Full((*shared).clone()));
                    let held = entry_bytes(&key, &shared);
                    ctx.cache.insert(key, version.n, shared, held, ctx.epoch);
                } else {
                    values.insert(channel.clone(), ChannelValue::Full(value));
                }
            }
            Resolution::MissingLink(message) | Resolution::Corrupt(message) => {
                return Err(corrupt_cp(thread, id, message))
            }
        }
    }
    checkpoint.channel_values = values;
    let config = CheckpointConfig {
        thread_id: row.thread_id.clone(),
        checkpoint_ns: row.ns.clone(),
        checkpoint_id: Some(row.id.clone()),
    };
    let parent_config = row.parent.as_ref().map(|parent| CheckpointConfig {
        checkpoint_id: Some(parent.clone()),
        ..config.clone()
    });
    let pending_writes = group.writes.get(&row.id).cloned().unwrap_or_default();
    Ok(CheckpointTuple {
        config,
        checkpoint,
        metadata,
        parent_config,
        pending_writes,
    })
}

/// Resolve decoded checkpoint rows (in order) into tuples. Per (thread, namespace), one
/// query reads the pending writes and one the blobs at the exact versions needed that are
/// not cached; a channel whose append chain reaches further is then read whole, once.
fn build_tuples(
    conn: &rusqlite::Connection,
    ctx: &ReadCtx<'_>,
    decoded: Vec<Decoded>,
) -> Result<Vec<CheckpointTuple>> {
    let mut groups: BTreeMap<(String, String), GroupData> = BTreeMap::new();
    {
        /// Per (thread, namespace): versions to read, versions seen, cache hits, checkpoints.
        #[derive(Default)]
        struct Wanted<'d> {
            exact: Vec<(&'d str, String)>,
            seen: HashSet<(&'d str, String)>,
            hits: HashMap<(String, String), Arc<Value>>,
            ids: Vec<&'d str>,
        }
        let mut wanted: BTreeMap<(&str, &str), Wanted<'_>> = BTreeMap::new();
        for d in &decoded {
            let (thread, ns) = (d.row.thread_id.as_str(), d.row.ns.as_str());
            let entry = wanted.entry((thread, ns)).or_default();
            for (channel, version) in &d.checkpoint.channel_versions {
                let v = version.to_string();
                if !entry.seen.insert((channel.as_str(), v.clone())) {
                    continue;
                }
                let key = (thread.to_owned(), ns.to_owned(), channel.clone(), v);
                match ctx.cache.get(&key) {
                    Some((value, _)) => {
                        entry.hits.insert((key.2, key.3), value);
                    }
                    None => entry.exact.push((channel.as_str(), key.3)),
                }
            }
            entry.ids.push(&d.row.id);
        }
        for ((thread, ns), w) in wanted {
            let mut data = load_group(conn, ctx.codec, thread, ns, &w.exact, &w.ids)?;
            data.hits = w.hits;
            groups.insert((thread.to_owned(), ns.to_owned()), data);
        }
    }
    let mut out = Vec::with_capacity(decoded.len());
    for d in decoded {
        let key = (d.row.thread_id.clone(), d.row.ns.clone());
        let group = groups.entry(key).or_default();
        out.push(build_tuple(conn, ctx, d, group)?);
    }
    Ok(out)
}

/// A metadata filter value SQLite can pre-select on exactly as Rust compares it (strings,
/// integers, booleans); other values are only checked in Rust.
fn prefilter(sql: &mut String, params: &mut Vec<SqlValue>, key: &str, value: &Value) {
    if key.contains(['"', '\\']) {
        return;
    }
    let bound = match value {
        Value::String(s) => SqlValue::Text(s.clone()),
        Value::Number(n) => match n.as_i64() {
            Some(i) => SqlValue::Integer(i),
            None => return,
        },
        Value::Bool(b) => SqlValue::Integer(i64::from(*b)),
        _ => return,
    };
    sql.push_str(" AND json_extract(metadata, ?) = ?");
    params.push(SqlValue::Text(format!("$.\"{key}\"")));
    params.push(bound);
}

impl SqliteSaver {
    fn read_ctx(&self) -> ReadCtx<'_> {
        ReadCtx {
            codec: self.codec(),
            cache: &self.cache,
            epoch: self.cache.epoch(),
        }
    }

    pub(super) async fn get_tuple_now(&self, config: &CheckpointConfig) -> Result<Option<CheckpointTuple>> {
        // A point read by key: on this thread, no hand-off.
        let ctx = self.read_ctx();
        self.db.read(|conn| {
            let mut found = None;
            match &config.checkpoint_id {
                Some(id) => each_row(
                    conn,
                    &format!(
                        "SELECT {} FROM checkpoints
                         WHERE thread_id = ?1 AND checkpoint_ns = ?2 AND checkpoint_id = ?3",
                        CpRow::COLUMNS
                    ),
                    (&config.thread_id, &config.checkpoint_ns, id),
                    |row| {
                        found = Some(CpRow::from_row(row)?);
                        Ok(())
                    },
                ),
                None => each_row(
                    conn,
                    &format!(
                        "SELECT {} FROM checkpoints
                         WHERE thread_id = ?1 AND checkpoint_ns = ?2
                         ORDER BY checkpoint_id DESC LIMIT 1",
                        CpRow::COLUMNS
                    ),
                    (&config.thread_id, &config.checkpoint_ns),
                    |row| {
                        found = Some(CpRow::from_row(row)?);
                        Ok(())
                    },
                ),
            }?;
            let Some(row) = found else {
                return Ok(None);
            };
            let decoded = decode_cp(self.codec(), row)?;
            Ok(build_tuples(conn, &ctx, vec![decoded])?.pop())
        })
    }

    pub(super) async fn list_now(&self, query: &ListQuery) -> Result<Vec<CheckpointTuple>> {
        if query.limit == Some(0) {
            return Ok(Vec::new());
        }
        // A listing may read a long history: on the blocking pool, not a runtime thread.
        let (saver, query) = (self.clone(), query.clone());
        tokio::task::spawn_blocking(move || saver.list_blocking(&query))
            .await
            .map_err(|e| other(format!("checkpoint listing stopped: {e}")))?
    }

    fn list_blocking(&self, query: &ListQuery) -> Result<Vec<CheckpointTuple>> {
        let mut sql = format!("SELECT {} FROM checkpoints WHERE 1 = 1", CpRow::COLUMNS);
        let mut params: Vec<SqlValue> = Vec::new();
        if let Some(thread) = &query.thread_id {
            sql.push_str(" AND thread_id = ?");
            params.push(SqlValue::Text(thread.clone()));
        }
        if let Some(ns) = &query.checkpoint_ns {
            sql.push_str(" AND checkpoint_ns = ?");
            params.push(SqlValue::Text(ns.clone()));
        }
        if let Some(before) = &query.before {
            sql.push_str(" AND checkpoint_id < ?");
            params.push(SqlValue::Text(before.clone()));
        }
        for (key, value) in &query.filter {
            prefilter(&mut sql, &mut params, key, value);
        }
        // Newest first; ties (copied threads share ids) in a stable thread/ns order.
        sql.push_str(" ORDER BY checkpoint_id DESC, thread_id, checkpoint_ns");
        let sql_limit = query.filter.is_empty().then_some(query.limit).flatten();
        if let Some(limit) = sql_limit {
            sql.push_str(" LIMIT ?");
            params.push(SqlValue::Integer(i64::try_from(limit).unwrap_or(i64::MAX)));
        }

        let ctx = self.read_ctx();
        self.db.read(|conn| {
            let mut decoded = Vec::new();
            {
                // Not cached: the text varies with the filters.
                let mut stmt = conn.prepare(&sql).sql()?;
                let mut rows = stmt.query(rusqlite::params_from_iter(params.iter())).sql()?;
                while let Some(row) = rows.next().sql()? {
                    let row = CpRow::from_row(row)?;
                    // Check the (plaintext) metadata before decoding the body.
                    if !query.filter.is_empty() {
                        let metadata: CheckpointMetadata =
                            serde_json::from_str(&row.metadata).map_err(|e| {
                                corrupt_cp(
                                    &row.thread_id,
                                    &row.id,
                                    format!("checkpoint metadata does not decode: {e}"),
                                )
                            })?;
                        if !metadata.matches(&query.filter) {
                            continue;
                        }
                    }
                    decoded.push(decode_cp(self.codec(), row)?);
                    if query.limit.is_some_and(|limit| decoded.len() >= limit) {
                        break;
                    }
                }
            }
            build_tuples(conn, &ctx, decoded)
        })
    }
}
