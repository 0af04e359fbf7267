//! Whole-thread operations: delete a thread or the checkpoints of some runs, copy a
//! thread, prune a thread to its latest checkpoints. Each is one writer operation (one
//! transaction); blobs no remaining checkpoint names are dropped in the same transaction.

use super::TypedSaver;
use crate::error::SqlResultExt;
use graphloom_core::Result;
use rusqlite::{params, Connection};
use std::collections::HashSet;
use std::sync::Arc;

impl TypedSaver {
    /// What the checkpoints of `thread_id` take in the file (all namespaces).
    ///
    /// # Errors
    /// A backend error.
    pub fn thread_storage(&self, thread_id: &str) -> Result<graphloom_core::checkpoint::ThreadStorage> {
        let tables = crate::storage::Tables {
            checkpoints: "typed_checkpoints",
            blobs: "typed_blobs",
            writes: "typed_writes",
        };
        self.db
            .read(|conn| crate::storage::thread_storage(conn, &tables, thread_id))
    }

    /// Delete every checkpoint, blob and pending write of a thread (all namespaces).
    ///
    /// # Errors
    /// A backend error; nothing is deleted then.
    pub async fn delete_thread(&self, thread_id: &str) -> Result<()> {
        let thread = thread_id.to_owned();
        self.db
            .write(move |conn| {
                for table in ["typed_checkpoints", "typed_blobs", "typed_writes"] {
                    conn.prepare_cached(&format!("DELETE FROM {table} WHERE thread_id = ?1"))
                        .sql()?
                        .execute([&thread])
                        .sql()?;
                }
                Ok(())
            })
            .await
    }

    /// Delete the checkpoints whose metadata names one of `run_ids` as its run, with their
    /// pending writes and the blobs no other checkpoint names.
    ///
    /// # Errors
    /// A backend error; nothing is deleted then.
    pub async fn delete_for_runs(&self, run_ids: Vec<String>) -> Result<()> {
        if run_ids.is_empty() {
            return Ok(());
        }
        let run_ids = Arc::new(run_ids);
        self.db
            .write(move |conn| {
                let mut touched = HashSet::new();
                for run in run_ids.iter() {
                    let mut stmt = conn
                        .prepare_cached(
                            "SELECT thread_id, checkpoint_ns, checkpoint_id FROM typed_checkpoints WHERE run_id = ?1",
                        )
                        .sql()?;
                    let rows = stmt
                        .query_map([run], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?, r.get::<_, String>(2)?)))
                        .sql()?
                        .collect::<rusqlite::Result<Vec<_>>>()
                        .sql()?;
                    for (thread, ns, id) in rows {
                        delete_checkpoint(conn, &thread, &ns, &id)?;
                        touched.insert((thread, ns));
                    }
                }
                for (thread, ns) in &touched {
                    drop_unnamed_blobs(conn, thread, ns)?;
                }
                Ok(())
            })
            .await
    }

    /// Copy every checkpoint, blob and pending write of `source` to `target` (same ids;
    /// rows `target` already has under the same keys are replaced).
    ///
    /// # Errors
    /// A backend error; nothing is copied then.
    pub async fn copy_thread(&self, source: &str, target: &str) -> Result<()> {
        let (source, target) = (source.to_owned(), target.to_owned());
        self.db
            .write(move |conn| {
                conn.prepare_cached(
                    "INSERT OR REPLACE INTO typed_checkpoints \
                     (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, checkpoint, \
                      channel_versions, metadata, run_id) \
                     SELECT ?2, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, checkpoint, \
                      channel_versions, metadata, run_id FROM typed_checkpoints WHERE thread_id = ?1",
                )
                .sql()?
                .execute(params![source, target])
                .sql()?;
                conn.prepare_cached(
                    "INSERT OR REPLACE INTO typed_blobs \
                     (thread_id, checkpoint_ns, channel, version, type, value) \
                     SELECT ?2, checkpoint_ns, channel, version, type, value FROM typed_blobs WHERE thread_id = ?1",
                )
                .sql()?
                .execute(params![source, target])
                .sql()?;
                conn.prepare_cached(
                    "INSERT OR REPLACE INTO typed_writes \
                     (thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel, task_path, type, value) \
                     SELECT ?2, checkpoint_ns, checkpoint_id, task_id, idx, channel, task_path, type, value \
                     FROM typed_writes WHERE thread_id = ?1",
                )
                .sql()?
                .execute(params![source, target])
                .sql()?;
                Ok(())
            })
            .await
    }

    /// Cut threads down: with `keep_latest`, to the newest checkpoint of each namespace
    /// (with its pending writes and the blobs it names); without, to nothing.
    ///
    /// # Errors
    /// A backend error; nothing is pruned then.
    pub async fn prune(&self, thread_ids: Vec<String>, keep_latest: bool) -> Result<()> {
        if thread_ids.is_empty() {
            return Ok(());
        }
        if !keep_latest {
            for thread in &thread_ids {
                self.delete_thread(thread).await?;
            }
            return Ok(());
        }
        let thread_ids = Arc::new(thread_ids);
        self.db
            .write(move |conn| {
                for thread in thread_ids.iter() {
                    let mut stmt = conn
                        .prepare_cached(
                            "SELECT checkpoint_ns, MAX(checkpoint_id) FROM typed_checkpoints \
                             WHERE thread_id = ?1 GROUP BY checkpoint_ns",
                        )
                        .sql()?;
                    let latest = stmt
                        .query_map([thread], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))
                        .sql()?
                        .collect::<rusqlite::Result<Vec<_>>>()
                        .sql()?;
                    for (ns, keep) in latest {
                        for table in ["typed_checkpoints", "typed_writes"] {
                            conn.prepare_cached(&format!(
                                "DELETE FROM {table} \
                                 WHERE thread_id = ?1 AND checkpoint_ns = ?2 AND checkpoint_id <> ?3"
                            ))
                            .sql()?
                            .execute(params![thread, ns, keep])
                            .sql()?;
                        }
                        drop_unnamed_blobs(conn, thread, &ns)?;
                    }
                }
                Ok(())
            })
            .await
    }
}

/// Delete one checkpoint and its pending writes.
fn delete_checkpoint(conn: &Connection, thread: &str, ns: &str, id: &str) -> Result<()> {
    for table in ["typed_checkpoints", "typed_writes"] {
        conn.prepare_cached(&format!(
            "DELETE FROM {table} WHERE thread_id = ?1 AND checkpoint_ns = ?2 AND checkpoint_id = ?3"
        ))
        .sql()?
        .execute(params![thread, ns, id])
        .sql()?;
    }
    Ok(())
}

/// Drop the blobs of a thread's namespace that no remaining checkpoint of it names.
fn drop_unnamed_blobs(conn: &Connection, thread: &str, ns: &str) -> Result<()> {
    let mut named: HashSet<(String, String)> = HashSet::new();
    let mut stmt = conn
        .prepare_cached(
            "SELECT channel_versions FROM typed_checkpoints WHERE thread_id = ?1 AND checkpoint_ns = ?2",
        )
        .sql()?;
    let mut rows = stmt.query(params![thread, ns]).sql()?;
    while let Some(row) = rows.next().sql()? {
        let versions: String = row.get(0).sql()?;
        // A row whose versions do not parse names nothing we can tell: keep every blob.
        let Ok(pairs) = serde_json::from_str::<Vec<(String, String)>>(&versions) else {
            return Ok(());
        };
        named.extend(pairs);
    }
    let mut stmt = conn
        .prepare_cached(
            "SELECT channel, version FROM typed_blobs WHERE thread_id = ?1 AND checkpoint_ns = ?2",
        )
        .sql()?;
    let stored = stmt
        .query_map(params![thread, ns], |r| {
            Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?))
        })
        .sql()?
        .collect::<rusqlite::Result<Vec<_>>>()
        .sql()?;
    let mut delete = conn
        .prepare_cached(
            "DELETE FROM typed_blobs WHERE thread_id = ?1 AND checkpoint_ns = ?2 AND channel = ?3 AND version = ?4",
        )
        .sql()?;
    for (channel, version) in stored {
        if !named.contains(&(channel.clone(), version.clone())) {
            delete.execute(params![thread, ns, channel, version]).sql()?;
        }
    }
    Ok(())
}
