//! `get_tuple` and `list`: rows to [`TypedTuple`]s, each checkpoint's values and pending
//! writes read in the same read transaction as the checkpoint.

use super::{TypedQuery, TypedSaver, TypedTuple, TypedValue, TypedWrite};
use crate::error::{corrupt, SqlResultExt};
use graphloom_core::Result;
use rusqlite::{params, Connection, OptionalExtension, Row};

/// The columns of `typed_checkpoints` a tuple is made of, in [`Head::from_row`] order.
const HEAD_COLUMNS: &str = "thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, \
                            type, checkpoint, metadata, channel_versions";

/// A checkpoint row before its values and writes are read.
struct Head {
    thread_id: String,
    checkpoint_ns: String,
    checkpoint_id: String,
    parent_id: Option<String>,
    checkpoint: TypedValue,
    metadata: String,
    channel_versions: String,
}

impl Head {
    fn from_row(r: &Row<'_>) -> rusqlite::Result<Self> {
        Ok(Self {
            thread_id: r.get(0)?,
            checkpoint_ns: r.get(1)?,
            checkpoint_id: r.get(2)?,
            parent_id: r.get(3)?,
            checkpoint: TypedValue::new(r.get::<_, String>(4)?, r.get(5)?),
            metadata: r.get(6)?,
            channel_versions: r.get(7)?,
        })
    }

    /// The tuple: the blob of every named channel version that has one, and the writes.
    fn complete(self, conn: &Connection) -> Result<TypedTuple> {
        let versions: Vec<(String, String)> = serde_json::from_str(&self.channel_versions).map_err(|e| {
            corrupt(format!(
                "typed checkpoint {} of thread {}: channel versions: {e}",
                self.checkpoint_id, self.thread_id
            ))
        })?;
        let mut blob = conn
            .prepare_cached(
                "SELECT type, value FROM typed_blobs \
                 WHERE thread_id = ?1 AND checkpoint_ns = ?2 AND channel = ?3 AND version = ?4",
            )
            .sql()?;
        let mut values = Vec::with_capacity(versions.len());
        for (channel, version) in versions {
            let value = blob
                .query_row(
                    params![self.thread_id, self.checkpoint_ns, channel, version],
                    |r| Ok(TypedValue::new(r.get::<_, String>(0)?, r.get(1)?)),
                )
                .optional()
                .sql()?;
            if let Some(value) = value {
                values.push((channel, value));
            }
        }
        let mut stmt = conn
            .prepare_cached(
                "SELECT task_id, channel, type, value FROM typed_writes \
                 WHERE thread_id = ?1 AND checkpoint_ns = ?2 AND checkpoint_id = ?3 \
                 ORDER BY task_path, task_id, idx",
            )
            .sql()?;
        let writes = stmt
            .query_map(
                params![self.thread_id, self.checkpoint_ns, self.checkpoint_id],
                |r| {
                    Ok(TypedWrite {
                        task_id: r.get(0)?,
                        channel: r.get(1)?,
                        value: TypedValue::new(r.get::<_, String>(2)?, r.get(3)?),
                    })
                },
            )
            .sql()?
            .collect::<rusqlite::Result<Vec<_>>>()
            .sql()?;
        Ok(TypedTuple {
            thread_id: self.thread_id,
            checkpoint_ns: self.checkpoint_ns,
            checkpoint_id: self.checkpoint_id,
            parent_id: self.parent_id,
            checkpoint: self.checkpoint,
            metadata: self.metadata,
            values,
            writes,
        })
    }
}

impl TypedSaver {
    /// The checkpoint `checkpoint_id` of a thread's namespace, or its newest one when
    /// `checkpoint_id` is `None`; runs on the calling thread (a read by key).
    ///
    /// # Errors
    /// A backend error, or a corrupt-row error naming the checkpoint.
    pub fn get_tuple(
        &self,
        thread_id: &str,
        checkpoint_ns: &str,
        checkpoint_id: Option<&str>,
    ) -> Result<Option<TypedTuple>> {
        self.db.read(|conn| {
            let head = match checkpoint_id {
                Some(id) => conn
                    .prepare_cached(&format!(
                        "SELECT {HEAD_COLUMNS} FROM typed_checkpoints \
                         WHERE thread_id = ?1 AND checkpoint_ns = ?2 AND checkpoint_id = ?3"
                    ))
                    .sql()?
                    .query_row(params![thread_id, checkpoint_ns, id], Head::from_row),
                None => conn
                    .prepare_cached(&format!(
                        "SELECT {HEAD_COLUMNS} FROM typed_checkpoints \
                         WHERE thread_id = ?1 AND checkpoint_ns = ?2 \
                         ORDER BY checkpoint_id DESC LIMIT 1"
                    ))
                    .sql()?
                    .query_row(params![thread_id, checkpoint_ns], Head::from_row),
            }
            .optional()
            .sql()?;
            head.map(|h| h.complete(conn)).transpose()
        })
    }

    /// Checkpoints matching `query`, newest first (by checkpoint id), on the calling
    /// thread, from one snapshot of the file.
    ///
    /// # Errors
    /// A backend error, or a corrupt-row error naming the checkpoint.
    pub fn list(&self, query: &TypedQuery) -> Result<Vec<TypedTuple>> {
        let limit = query.limit.unwrap_or(usize::MAX);
        if limit == 0 {
            return Ok(Vec::new());
        }
        self.db.read(|conn| {
            let mut stmt = conn
                .prepare_cached(&format!(
                    "SELECT {HEAD_COLUMNS} FROM typed_checkpoints \
                     WHERE (?1 IS NULL OR thread_id = ?1) AND (?2 IS NULL OR checkpoint_ns = ?2) \
                       AND (?3 IS NULL OR checkpoint_id < ?3) \
                     ORDER BY checkpoint_id DESC, thread_id, checkpoint_ns"
                ))
                .sql()?;
            let mut rows = stmt
                .query(params![query.thread_id, query.checkpoint_ns, query.before])
                .sql()?;
            let mut out = Vec::new();
            while let Some(row) = rows.next().sql()? {
                let head = Head::from_row(row).sql()?;
                if !query.matches(&head.metadata) {
                    continue;
                }
                out.push(head.complete(conn)?);
                if out.len() >= limit {
                    break;
                }
            }
            Ok(out)
        })
    }
}
