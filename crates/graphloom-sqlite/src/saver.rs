//! [`SqliteSaver`]: the SQLite [`Checkpointer`].

use crate::cache::ValueCache;
use crate::db::{aad, db_err, invalid_input, other, rs_err, CommitStats, Db};
use crate::options::{SqliteOptions, Synchronous};
use graphloom_core::checkpoint::{
    resolve_channel, write_idx, BlobCodec, ChannelValue, Checkpoint, CheckpointConfig, CheckpointMetadata,
    CheckpointTuple, Checkpointer, ListQuery, PendingWrite, TaskWrites, Version,
};
use graphloom_core::{Error, Result};
use rusqlite::types::Value as SqlValue;
use serde_json::Value;
use sqlx::Row;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// A [`Checkpointer`] keeping checkpoints in one SQLite file (WAL mode).
///
/// - **Storage grows with what changed.** A checkpoint row holds everything but the channel
///   values; each `(thread, namespace, channel, version)` is stored once as a blob holding
///   the [`ChannelValue`] `put` received (a full value or an append to an earlier version)
///   and is never rewritten. Reads fetch the blobs of the needed channels in one query and
///   resolve append chains in memory.
/// - **Durable.** `put` and `put_writes` return once their transaction is committed (and,
///   with [`Synchronous::Full`], the default, fsynced). All writes go through one writer
///   task that commits whatever is queued in one transaction (group commit), so many
///   concurrent runs share commits and never see "database is locked". Reads use a small
///   pool of `rusqlite` connections: `get_tuple` on the calling thread (a read by key costs
///   less than a hand-off to another thread), `list` and `copy_thread` on tokio's blocking
///   pool (a long history must not hold a runtime thread).
/// - **Safe decoding.** Every stored value goes through the [`BlobCodec`] with associated
///   data naming its row; an undecodable, tampered or (with encryption on) plaintext row is
///   reported as [`Error::CorruptCheckpoint`] naming the thread and checkpoint.
///   Checkpoint *metadata* is stored as plaintext JSON (so list filters can use it), but
///   with encryption on it is authenticated as part of the sealed checkpoint row.
/// - **Reads cost what changed.** Resolved channel values are kept in a bounded cache
///   ([`SqliteSaverBuilder::value_cache_bytes`]), so reading the latest checkpoint of a long
///   thread reads and decodes only the blobs written since the last read. Blobs are never
///   rewritten, and a thread deleted through this saver leaves the cache at once; a thread
///   deleted and rewritten with the very same checkpoint ids and channel versions by
///   *another* process may be served stale from this saver's cache (versions carry a
///   per-run salt, so runs do not do that).
///
/// The writer is a thread of its own with its own connection: it runs a whole batch of
/// statements without a hand-off per statement, and stops when the last clone is dropped.
/// A write whose caller stops waiting (its future dropped) is still committed. Cloning is
/// cheap; clones share the connections, the writer and the cache.
#[derive(Debug, Clone)]
pub struct SqliteSaver {
    db: Arc<Db>,
    cache: Arc<ValueCache>,
}

/// Opens a [`SqliteSaver`] with non-default settings; see [`SqliteSaver::builder`].
#[derive(Debug, Clone)]
pub struct SqliteSaverBuilder {
    opts: SqliteOptions,
}

impl SqliteSaverBuilder {
    /// Durability of commits ([`Synchronous::Full`] by default).
    #[must_use]
    pub fn synchronous(mut self, synchronous: Synchronous) -> Self {
        self.opts = self.opts.synchronous(synchronous);
        self
    }
    /// How long to wait for another process's lock (30 s by default).
    #[must_use]
    pub fn busy_timeout(mut self, timeout: Duration) -> Self {
        self.opts = self.opts.busy_timeout(timeout);
        self
    }
    /// How stored values are encoded, e.g. `BlobCodec::encrypted(&key)`.
    #[must_use]
    pub fn codec(mut self, codec: BlobCodec) -> Self {
        self.opts = self.opts.codec(codec);
        self
    }
    /// Number of read connections (4 by default).
    #[must_use]
    pub fn read_connections(mut self, n: u32) -> Self {
        self.opts = self.opts.read_connections(n);
        self
    }
    /// Memory for resolved channel values kept between reads (32 MiB of stored bytes by default; 0
    /// disables the cache).
    #[must_use]
    pub fn value_cache_bytes(mut self, bytes: usize) -> Self {
        self.opts = self.opts.value_cache_bytes(bytes);
        self
    }
    /// Open the saver.
    ///
    /// # Errors
    /// See [`SqliteSaver::open`].
    pub async fn open(self) -> Result<SqliteSaver> {
        SqliteSaver::open_with(self.opts).await
    }
}

/// Row counts and stored value sizes of a [`SqliteSaver`] database.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StorageStats {
    /// Checkpoint rows.
    pub checkpoints: u64,
    /// Bytes of checkpoint rows' encoded bodies and metadata.
    pub checkpoint_bytes: u64,
    /// Channel blobs.
    pub blobs: u64,
    /// Bytes of encoded channel blobs.
    pub blob_bytes: u64,
    /// Pending-write rows.
    pub writes: u64,
    /// Bytes of encoded pending writes.
    pub write_bytes: u64,
}

impl StorageStats {
    /// Bytes of every stored value (checkpoints, metadata, blobs and writes).
    #[must_use]
    pub fn total_bytes(&self) -> u64 {
        self.checkpoint_bytes + self.blob_bytes + self.write_bytes
    }
}

impl SqliteSaver {
    /// Open (creating if needed) the database at `path` with default settings: WAL mode,
    /// `synchronous=FULL`, plain JSON values. Pending migrations run first.
    ///
    /// # Errors
    /// A backend error if the file cannot be opened or migrated (e.g. it was written by a
    /// newer version).
    pub async fn open(path: impl Into<PathBuf>) -> Result<Self> {
        Self::open_with(SqliteOptions::new(path)).await
    }

    /// A builder for the database at `path`, to change [`Synchronous`], the busy timeout,
    /// the codec or the read pool before opening.
    pub fn builder(path: impl Into<PathBuf>) -> SqliteSaverBuilder {
        SqliteSaverBuilder {
            opts: SqliteOptions::new(path),
        }
    }

    /// Open with explicit options.
    ///
    /// # Errors
    /// See [`SqliteSaver::open`].
    pub async fn open_with(opts: SqliteOptions) -> Result<Self> {
        Ok(Self::from_parts(
            Arc::new(Db::open(&opts).await?),
            Arc::new(ValueCache::new(opts.value_cache_bytes)),
        ))
    }

    pub(crate) fn from_parts(db: Arc<Db>, cache: Arc<ValueCache>) -> Self {
        Self { db, cache }
    }

    /// The database file.
    #[must_use]
    pub fn path(&self) -> &Path {
        self.db.path()
    }

    /// How many transactions the writer committed, for how many operations: with many
    /// concurrent runs, operations outnumber commits (group commit).
    #[must_use]
    pub fn commit_stats(&self) -> CommitStats {
        self.db.commit_stats()
    }

    /// Row counts and stored value sizes.
    ///
    /// # Errors
    /// A backend error if the query fails.
    pub async fn storage_stats(&self) -> Result<StorageStats> {
        let row = sqlx::query(
            "SELECT
                (SELECT COUNT(*) FROM checkpoints),
                (SELECT COALESCE(SUM(LENGTH(checkpoint) + LENGTH(CAST(metadata AS BLOB))), 0) FROM checkpoints),
                (SELECT COUNT(*) FROM checkpoint_blobs),
                (SELECT COALESCE(SUM(LENGTH(value)), 0) FROM checkpoint_blobs),
                (SELECT COUNT(*) FROM checkpoint_writes),
                (SELECT COALESCE(SUM(LENGTH(value)), 0) FROM checkpoint_writes)",
        )
        .fetch_one(self.db.reader())
        .await
        .map_err(db_err)?;
        let n = |i: usize| -> Result<u64> {
            let v: i64 = row.try_get(i).map_err(db_err)?;
            Ok(u64::try_from(v).unwrap_or(0))
        };
        Ok(StorageStats {
            checkpoints: n(0)?,
            checkpoint_bytes: n(1)?,
            blobs: n(2)?,
            blob_bytes: n(3)?,
            writes: n(4)?,
            write_bytes: n(5)?,
        })
    }

    fn codec(&self) -> &BlobCodec {
        &self.db.codec
    }
}

// ---------------------------------------------------------------------------------------
// Row encoding
// ---------------------------------------------------------------------------------------

const CP_COLUMNS: &str =
    "thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, enc, checkpoint, metadata";

/// A checkpoint row as read.
struct CpRow {
    thread_id: String,
    ns: String,
    id: String,
    parent: Option<String>,
    enc: String,
    body: Vec<u8>,
    metadata: String,
}

/// Associated data of a checkpoint row: its key, parent and metadata text, so a sealed
/// body moved to another row, or metadata edited in place, does not decode.
fn cp_aad(thread: &str, ns: &str, id: &str, parent: Option<&str>, metadata: &str) -> Vec<u8> {
    aad(&["checkpoint", thread, ns, id, parent.unwrap_or(""), metadata])
}

fn blob_aad(thread: &str, ns: &str, channel: &str, version: &str) -> Vec<u8> {
    aad(&["blob", thread, ns, channel, version])
}

fn write_aad(thread: &str, ns: &str, checkpoint_id: &str, task_id: &str, idx: i64, channel: &str) -> Vec<u8> {
    aad(&[
        "write",
        thread,
        ns,
        checkpoint_id,
        task_id,
        &idx.to_string(),
        channel,
    ])
}

fn corrupt_cp(thread: &str, id: &str, message: impl Into<String>) -> Error {
    Error::CorruptCheckpoint {
        thread_id: thread.to_owned(),
        checkpoint_id: id.to_owned(),
        message: message.into(),
    }
}

fn encode<T: serde::Serialize + ?Sized>(
    codec: &BlobCodec,
    value: &T,
    aad: &[u8],
) -> Result<(String, Vec<u8>)> {
    codec
        .encode(value, aad)
        .map(|(tag, bytes)| (tag.to_owned(), bytes))
        .map_err(|e| other(e.to_string()))
}

fn read_cp_row(row: &rusqlite::Row<'_>) -> Result<CpRow> {
    let thread_id: String = row.get(0).map_err(rs_err)?;
    let ns: String = row.get(1).map_err(rs_err)?;
    let id: String = row.get(2).map_err(rs_err)?;
    let bad =
        |what: &str, e: rusqlite::Error| corrupt_cp(&thread_id, &id, format!("checkpoint row: {what}: {e}"));
    let parent: Option<String> = row.get(3).map_err(|e| bad("parent id", e))?;
    let enc: String = row.get(4).map_err(|e| bad("encoding", e))?;
    let body: Vec<u8> = bytes_of(row, 5).map_err(|e| bad("body", e))?;
    let metadata: String = row.get(6).map_err(|e| bad("metadata", e))?;
    Ok(CpRow {
        thread_id,
        ns,
        id,
        parent,
        enc,
        body,
        metadata,
    })
}

/// A checkpoint row decoded, channel values not yet resolved.
struct Decoded {
    row: CpRow,
    checkpoint: Checkpoint,
    metadata: CheckpointMetadata,
}

fn decode_cp(codec: &BlobCodec, row: CpRow) -> Result<Decoded> {
    let metadata: CheckpointMetadata = serde_json::from_str(&row.metadata).map_err(|e| {
        corrupt_cp(
            &row.thread_id,
            &row.id,
            format!("checkpoint metadata does not decode: {e}"),
        )
    })?;
    let aad = cp_aad(
        &row.thread_id,
        &row.ns,
        &row.id,
        row.parent.as_deref(),
        &row.metadata,
    );
    let mut checkpoint: Checkpoint = codec
        .decode(&row.enc, &row.body, &aad)
        .map_err(|e| corrupt_cp(&row.thread_id, &row.id, format!("checkpoint row: {e}")))?;
    if checkpoint.id != row.id {
        return Err(corrupt_cp(
            &row.thread_id,
            &row.id,
            "checkpoint row holds another checkpoint's id",
        ));
    }
    checkpoint.channel_values.clear();
    Ok(Decoded {
        row,
        checkpoint,
        metadata,
    })
}

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

/// A BLOB column's bytes; TEXT is taken as its UTF-8 bytes (as a row written by hand or by
/// another tool may hold), anything else is a column type error.
fn bytes_of(row: &rusqlite::Row<'_>, i: usize) -> rusqlite::Result<Vec<u8>> {
    use rusqlite::types::ValueRef;
    match row.get_ref(i)? {
        ValueRef::Blob(b) | ValueRef::Text(b) => Ok(b.to_vec()),
        other => Err(rusqlite::Error::InvalidColumnType(
            i,
            String::new(),
            other.data_type(),
        )),
    }
}

/// Run a prepared (cached) query and hand each row to `f`.
fn each_row(
    conn: &rusqlite::Connection,
    sql: &str,
    params: impl rusqlite::Params,
    mut f: impl FnMut(&rusqlite::Row<'_>) -> Result<()>,
) -> Result<()> {
    let mut stmt = conn.prepare_cached(sql).map_err(rs_err)?;
    let mut rows = stmt.query(params).map_err(rs_err)?;
    while let Some(row) = rows.next().map_err(rs_err)? {
        f(row)?;
    }
    Ok(())
}

fn add_blob_row(blobs: &mut BlobRows, row: &rusqlite::Row<'_>) -> Result<()> {
    let channel: String = row.get(0).map_err(rs_err)?;
    let version: String = row.get(1).map_err(rs_err)?;
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
            let checkpoint_id: String = row.get(0).map_err(rs_err)?;
            let task_id: String = row.get(1).map_err(rs_err)?;
            let idx: i64 = row.get(2).map_err(rs_err)?;
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
            let aad = write_aad(thread, ns, &checkpoint_id, &task_id, idx, &channel);
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
            .decode::<ChannelValue>(enc, bytes, &blob_aad(thread, ns, channel, &memo_key.1))
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
                if ctx.cache.accepts(size) {
                    let shared = Arc::new(value);
                    values.insert(channel.clone(), ChannelValue::Full((*shared).clone()));
                    ctx.cache.insert(key, version.n, shared, size, ctx.epoch);
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

// ---------------------------------------------------------------------------------------
// Checkpointer
// ---------------------------------------------------------------------------------------

impl SqliteSaver {
    fn read_ctx(&self) -> ReadCtx<'_> {
        ReadCtx {
            codec: self.codec(),
            cache: &self.cache,
            epoch: self.cache.epoch(),
        }
    }

    async fn get_tuple_now(&self, config: &CheckpointConfig) -> Result<Option<CheckpointTuple>> {
        // A point read by key: on this thread, no hand-off.
        let ctx = self.read_ctx();
        self.db.read(|conn| {
            let mut found = None;
            match &config.checkpoint_id {
                Some(id) => each_row(
                    conn,
                    &format!(
                        "SELECT {CP_COLUMNS} FROM checkpoints
                         WHERE thread_id = ?1 AND checkpoint_ns = ?2 AND checkpoint_id = ?3"
                    ),
                    (&config.thread_id, &config.checkpoint_ns, id),
                    |row| {
                        found = Some(read_cp_row(row)?);
                        Ok(())
                    },
                ),
                None => each_row(
                    conn,
                    &format!(
                        "SELECT {CP_COLUMNS} FROM checkpoints
                         WHERE thread_id = ?1 AND checkpoint_ns = ?2
                         ORDER BY checkpoint_id DESC LIMIT 1"
                    ),
                    (&config.thread_id, &config.checkpoint_ns),
                    |row| {
                        found = Some(read_cp_row(row)?);
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

    async fn list_now(&self, query: &ListQuery) -> Result<Vec<CheckpointTuple>> {
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
        let mut sql = format!("SELECT {CP_COLUMNS} FROM checkpoints WHERE 1 = 1");
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
                let mut stmt = conn.prepare(&sql).map_err(rs_err)?;
                let mut rows = stmt
                    .query(rusqlite::params_from_iter(params.iter()))
                    .map_err(rs_err)?;
                while let Some(row) = rows.next().map_err(rs_err)? {
                    let row = read_cp_row(row)?;
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

    async fn put_now(
        &self,
        config: &CheckpointConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: BTreeMap<String, Version>,
    ) -> Result<CheckpointConfig> {
        let row = self.checkpoint_row(config, checkpoint, &metadata, new_versions)?;
        let out = row.config();
        self.db.write(move |conn| row.insert(conn)).await?;
        Ok(out)
    }

    /// A task's writes and then a checkpoint, in one transaction.
    async fn put_writes_then_checkpoint_now(
        &self,
        writes: TaskWrites,
        config: &CheckpointConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: BTreeMap<String, Version>,
    ) -> Result<CheckpointConfig> {
        let rows = self.write_rows(&writes.config, writes.writes, &writes.task_id, &writes.task_path)?;
        let row = self.checkpoint_row(config, checkpoint, &metadata, new_versions)?;
        let out = row.config();
        let (thread, ns) = (writes.config.thread_id, writes.config.checkpoint_ns);
        self.db
            .write(move |conn| {
                for w in &rows {
                    insert_write(conn, &thread, &ns, w)?;
                }
                row.insert(conn)
            })
            .await?;
        Ok(out)
    }

    /// Encode a checkpoint and the channel values it brings, ready to insert.
    fn checkpoint_row(
        &self,
        config: &CheckpointConfig,
        mut checkpoint: Checkpoint,
        metadata: &CheckpointMetadata,
        new_versions: BTreeMap<String, Version>,
    ) -> Result<CheckpointRow> {
        let codec = self.codec();
        let thread = config.thread_id.clone();
        let ns = config.checkpoint_ns.clone();
        let id = checkpoint.id.clone();
        let parent = config.checkpoint_id.clone();
        let mut values = std::mem::take(&mut checkpoint.channel_values);
        let mut blobs = Vec::new();
        for (channel, version) in new_versions {
            // A channel with a new version but no value was emptied: nothing to store.
            if let Some(value) = values.remove(&channel) {
                let version = version.to_string();
                let (enc, bytes) = encode(codec, &value, &blob_aad(&thread, &ns, &channel, &version))?;
                blobs.push((channel, version, enc, bytes));
            }
        }
        let metadata =
            serde_json::to_string(metadata).map_err(|e| other(format!("cannot encode metadata: {e}")))?;
        let aad = cp_aad(&thread, &ns, &id, parent.as_deref(), &metadata);
        let (enc, body) = encode(codec, &checkpoint, &aad)?;
        Ok(CheckpointRow {
            thread,
            ns,
            id,
            parent,
            enc,
            body,
            metadata,
            blobs,
        })
    }

    async fn put_writes_now(
        &self,
        config: &CheckpointConfig,
        writes: Vec<(String, Value)>,
        task_id: &str,
        task_path: &str,
    ) -> Result<()> {
        let rows = self.write_rows(config, writes, task_id, task_path)?;
        if rows.is_empty() {
            return Ok(());
        }
        let thread = config.thread_id.clone();
        let ns = config.checkpoint_ns.clone();
        self.db
            .write(move |conn| {
                for w in &rows {
                    insert_write(conn, &thread, &ns, w)?;
                }
                Ok(())
            })
            .await
    }

    /// Encode a task's writes, ready to insert.
    fn write_rows(
        &self,
        config: &CheckpointConfig,
        writes: Vec<(String, Value)>,
        task_id: &str,
        task_path: &str,
    ) -> Result<Vec<WriteRow>> {
        let Some(checkpoint_id) = config.checkpoint_id.clone() else {
            return Err(invalid_input("put_writes needs a config with a checkpoint id"));
        };
        let (thread, ns) = (&config.thread_id, &config.checkpoint_ns);
        let mut rows = Vec::with_capacity(writes.len());
        for (position, (channel, value)) in writes.into_iter().enumerate() {
            let idx = write_idx(&channel, position);
            let aad = write_aad(thread, ns, &checkpoint_id, task_id, idx, &channel);
            let (enc, bytes) = encode(self.codec(), &value, &aad)?;
            rows.push(WriteRow {
                checkpoint_id: checkpoint_id.clone(),
                task_id: task_id.to_owned(),
                idx,
                channel,
                task_path: task_path.to_owned(),
                enc,
                bytes,
            });
        }
        Ok(rows)
    }

    async fn delete_thread_now(&self, thread_id: &str) -> Result<()> {
        let thread = thread_id.to_owned();
        self.db
            .write(move |conn| {
                for sql in [
                    "DELETE FROM checkpoint_writes WHERE thread_id = ?",
                    "DELETE FROM checkpoint_blobs WHERE thread_id = ?",
                    "DELETE FROM checkpoints WHERE thread_id = ?",
                ] {
                    conn.prepare_cached(sql)
                        .and_then(|mut stmt| stmt.execute([&thread]))
                        .map_err(rs_err)?;
                }
                Ok(())
            })
            .await?;
        self.cache.forget_thread(thread_id);
        Ok(())
    }

    async fn delete_run_now(&self, thread_id: &str, run_id: &str) -> Result<()> {
        let (thread, run) = (thread_id.to_owned(), run_id.to_owned());
        self.db
            .write(move |conn| {
                for sql in [
                    "DELETE FROM checkpoint_writes WHERE thread_id = ?1 AND (checkpoint_ns, checkpoint_id) IN \
                     (SELECT checkpoint_ns, checkpoint_id FROM checkpoints \
                      WHERE thread_id = ?1 AND json_extract(metadata, '$.run_id') = ?2)",
                    "DELETE FROM checkpoints WHERE thread_id = ?1 AND json_extract(metadata, '$.run_id') = ?2",
                ] {
                    conn.prepare_cached(sql)
                        .and_then(|mut stmt| stmt.execute([&thread, &run]))
                        .map_err(rs_err)?;
                }
                Ok(())
            })
            .await
    }

    async fn copy_thread_now(&self, source: &str, target: &str) -> Result<()> {
        if source == target {
            return Ok(());
        }
        let (source, target) = (source.to_owned(), target.to_owned());
        let rows = {
            let saver = self.clone();
            let (source, target) = (source.clone(), target.clone());
            tokio::task::spawn_blocking(move || {
                saver
                    .db
                    .read(|conn| copy_rows(conn, saver.codec(), &source, &target))
            })
            .await
            .map_err(|e| other(format!("copying a thread stopped: {e}")))??
        };
        self.db.write(move |conn| rows.insert(conn, &target)).await
    }
}

/// An encoded checkpoint and its new channel values, ready to insert.
struct CheckpointRow {
    thread: String,
    ns: String,
    id: String,
    parent: Option<String>,
    enc: String,
    body: Vec<u8>,
    metadata: String,
    /// `(channel, version, enc, bytes)`.
    blobs: Vec<(String, String, String, Vec<u8>)>,
}

impl CheckpointRow {
    fn config(&self) -> CheckpointConfig {
        CheckpointConfig {
            thread_id: self.thread.clone(),
            checkpoint_ns: self.ns.clone(),
            checkpoint_id: Some(self.id.clone()),
        }
    }

    fn insert(&self, conn: &rusqlite::Connection) -> Result<()> {
        for (channel, version, enc, bytes) in &self.blobs {
            insert_blob(conn, &self.thread, &self.ns, channel, version, enc, bytes)?;
        }
        upsert_checkpoint(
            conn,
            &self.thread,
            &self.ns,
            &self.id,
            self.parent.as_deref(),
            &self.enc,
            &self.body,
            &self.metadata,
        )
    }
}

/// A pending write ready to insert.
struct WriteRow {
    checkpoint_id: String,
    task_id: String,
    idx: i64,
    channel: String,
    task_path: String,
    enc: String,
    bytes: Vec<u8>,
}

/// Insert a blob unless that `(thread, ns, channel, version)` is already stored: blobs are
/// never rewritten.
fn insert_blob(
    conn: &rusqlite::Connection,
    thread: &str,
    ns: &str,
    channel: &str,
    version: &str,
    enc: &str,
    bytes: &[u8],
) -> Result<()> {
    conn.prepare_cached(
        "INSERT INTO checkpoint_blobs (thread_id, checkpoint_ns, channel, version, enc, value)
         VALUES (?, ?, ?, ?, ?, ?)
         ON CONFLICT (thread_id, checkpoint_ns, channel, version) DO NOTHING",
    )
    .and_then(|mut stmt| stmt.execute(rusqlite::params![thread, ns, channel, version, enc, bytes]))
    .map_err(rs_err)?;
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn upsert_checkpoint(
    conn: &rusqlite::Connection,
    thread: &str,
    ns: &str,
    id: &str,
    parent: Option<&str>,
    enc: &str,
    body: &[u8],
    metadata: &str,
) -> Result<()> {
    conn.prepare_cached(
        "INSERT INTO checkpoints
            (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, enc, checkpoint, metadata)
         VALUES (?, ?, ?, ?, ?, ?, ?)
         ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id) DO UPDATE SET
            parent_checkpoint_id = excluded.parent_checkpoint_id,
            enc = excluded.enc,
            checkpoint = excluded.checkpoint,
            metadata = excluded.metadata",
    )
    .and_then(|mut stmt| stmt.execute(rusqlite::params![thread, ns, id, parent, enc, body, metadata]))
    .map_err(rs_err)?;
    Ok(())
}

/// Insert a pending write: an ordinary write (idx >= 0) whose `(task_id, idx)` is already
/// stored is dropped; a special one (negative idx) replaces the stored one, keeping its
/// place (`seq`) in write order.
fn insert_write(conn: &rusqlite::Connection, thread: &str, ns: &str, w: &WriteRow) -> Result<()> {
    const ORDINARY: &str = "INSERT INTO checkpoint_writes
            (thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel, task_path, enc, value)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
         ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id, task_id, idx) DO NOTHING";
    const SPECIAL: &str = "INSERT INTO checkpoint_writes
            (thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel, task_path, enc, value)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
         ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id, task_id, idx) DO UPDATE SET
            channel = excluded.channel, task_path = excluded.task_path,
            enc = excluded.enc, value = excluded.value";
    let sql = if w.idx < 0 { SPECIAL } else { ORDINARY };
    conn.prepare_cached(sql)
        .and_then(|mut stmt| {
            stmt.execute(rusqlite::params![
                thread,
                ns,
                &w.checkpoint_id,
                &w.task_id,
                w.idx,
                &w.channel,
                &w.task_path,
                &w.enc,
                &w.bytes
            ])
        })
        .map_err(rs_err)?;
    Ok(())
}

/// A checkpoint row encoded for another thread.
struct CopiedCheckpoint {
    ns: String,
    id: String,
    parent: Option<String>,
    enc: String,
    body: Vec<u8>,
    metadata: String,
}

/// The rows of a thread, encoded again for another thread, ready to insert.
#[derive(Default)]
struct CopiedRows {
    checkpoints: Vec<CopiedCheckpoint>,
    /// `(ns, channel, version, enc, bytes)`.
    blobs: Vec<(String, String, String, String, Vec<u8>)>,
    /// `(ns, row)`.
    writes: Vec<(String, WriteRow)>,
}

impl CopiedRows {
    fn insert(&self, conn: &rusqlite::Connection, target: &str) -> Result<()> {
        for c in &self.checkpoints {
            upsert_checkpoint(
                conn,
                target,
                &c.ns,
                &c.id,
                c.parent.as_deref(),
                &c.enc,
                &c.body,
                &c.metadata,
            )?;
        }
        for (ns, channel, version, enc, bytes) in &self.blobs {
            insert_blob(conn, target, ns, channel, version, enc, bytes)?;
        }
        for (ns, w) in &self.writes {
            insert_write(conn, target, ns, w)?;
        }
        Ok(())
    }
}

/// Read every row of thread `source` and encode it for `target`. Values are sealed with
/// associated data naming their thread, so each is decoded and encoded again for its new
/// row (which also refuses to copy a corrupt row).
fn copy_rows(
    conn: &rusqlite::Connection,
    codec: &BlobCodec,
    source: &str,
    target: &str,
) -> Result<CopiedRows> {
    let mut out = CopiedRows::default();
    // The caller's read transaction: the three tables as of one moment.
    each_row(
        conn,
        &format!(
            "SELECT {CP_COLUMNS} FROM checkpoints WHERE thread_id = ?1 ORDER BY checkpoint_ns, checkpoint_id"
        ),
        [source],
        |row| {
            let d = decode_cp(codec, read_cp_row(row)?)?;
            let r = &d.row;
            let aad = cp_aad(target, &r.ns, &r.id, r.parent.as_deref(), &r.metadata);
            let (enc, body) = encode(codec, &d.checkpoint, &aad)?;
            out.checkpoints.push(CopiedCheckpoint {
                ns: r.ns.clone(),
                id: r.id.clone(),
                parent: r.parent.clone(),
                enc,
                body,
                metadata: r.metadata.clone(),
            });
            Ok(())
        },
    )?;

    each_row(
        conn,
        "SELECT checkpoint_ns, channel, version, enc, value FROM checkpoint_blobs WHERE thread_id = ?1
         ORDER BY checkpoint_ns, channel, version",
        [source],
        |row| {
            let ns: String = row.get(0).map_err(rs_err)?;
            let channel: String = row.get(1).map_err(rs_err)?;
            let version: String = row.get(2).map_err(rs_err)?;
            let bad = |e: String| Error::CorruptCheckpoint {
                thread_id: source.to_owned(),
                checkpoint_id: String::new(),
                message: format!("namespace `{ns}` channel `{channel}` version {version}: {e}"),
            };
            let enc: String = row.get(3).map_err(|e| bad(e.to_string()))?;
            let bytes: Vec<u8> = bytes_of(row, 4).map_err(|e| bad(e.to_string()))?;
            let value: ChannelValue = codec
                .decode(&enc, &bytes, &blob_aad(source, &ns, &channel, &version))
                .map_err(|e| bad(e.to_string()))?;
            let (enc, bytes) = encode(codec, &value, &blob_aad(target, &ns, &channel, &version))?;
            out.blobs.push((ns, channel, version, enc, bytes));
            Ok(())
        },
    )?;

    each_row(
        conn,
        "SELECT checkpoint_ns, checkpoint_id, task_id, idx, channel, task_path, enc, value
         FROM checkpoint_writes WHERE thread_id = ?1 ORDER BY seq",
        [source],
        |row| {
            let ns: String = row.get(0).map_err(rs_err)?;
            let checkpoint_id: String = row.get(1).map_err(rs_err)?;
            let task_id: String = row.get(2).map_err(rs_err)?;
            let idx: i64 = row.get(3).map_err(rs_err)?;
            let bad = |e: String| {
                corrupt_cp(
                    source,
                    &checkpoint_id,
                    format!("pending write {idx} of task `{task_id}`: {e}"),
                )
            };
            let channel: String = row.get(4).map_err(|e| bad(e.to_string()))?;
            let task_path: String = row.get(5).map_err(|e| bad(e.to_string()))?;
            let enc: String = row.get(6).map_err(|e| bad(e.to_string()))?;
            let bytes: Vec<u8> = bytes_of(row, 7).map_err(|e| bad(e.to_string()))?;
            let value: Value = codec
                .decode(
                    &enc,
                    &bytes,
                    &write_aad(source, &ns, &checkpoint_id, &task_id, idx, &channel),
                )
                .map_err(|e| bad(e.to_string()))?;
            let (enc, bytes) = encode(
                codec,
                &value,
                &write_aad(target, &ns, &checkpoint_id, &task_id, idx, &channel),
            )?;
            let w = WriteRow {
                checkpoint_id,
                task_id,
                idx,
                channel,
                task_path,
                enc,
                bytes,
            };
            out.writes.push((ns, w));
            Ok(())
        },
    )?;
    Ok(out)
}

impl Checkpointer for SqliteSaver {
    async fn get_tuple(&self, config: &CheckpointConfig) -> Result<Option<CheckpointTuple>> {
        self.get_tuple_now(config).await
    }

    async fn list(&self, query: &ListQuery) -> Result<Vec<CheckpointTuple>> {
        self.list_now(query).await
    }

    async fn put(
        &self,
        config: &CheckpointConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: BTreeMap<String, Version>,
    ) -> Result<CheckpointConfig> {
        self.put_now(config, checkpoint, metadata, new_versions).await
    }

    async fn put_writes(
        &self,
        config: &CheckpointConfig,
        writes: Vec<(String, Value)>,
        task_id: &str,
        task_path: &str,
    ) -> Result<()> {
        self.put_writes_now(config, writes, task_id, task_path).await
    }

    async fn put_writes_then_checkpoint(
        &self,
        writes: TaskWrites,
        config: &CheckpointConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: BTreeMap<String, Version>,
    ) -> Result<CheckpointConfig> {
        self.put_writes_then_checkpoint_now(writes, config, checkpoint, metadata, new_versions)
            .await
    }

    async fn delete_run(&self, thread_id: &str, run_id: &str) -> Result<()> {
        self.delete_run_now(thread_id, run_id).await
    }

    /// One writer thread applies the saves in the order queued (each is queued when its
    /// future is first polled) and commits them in that order.
    fn saves_in_order(&self) -> bool {
        true
    }

    async fn delete_thread(&self, thread_id: &str) -> Result<()> {
        self.delete_thread_now(thread_id).await
    }

    async fn copy_thread(&self, source: &str, target: &str) -> Result<()> {
        self.copy_thread_now(source, target).await
    }
}
