//! Whole-thread operations, one transaction each; blobs no remaining checkpoint names are
//! dropped in the same transaction.

use super::TypedSaver;
use crate::error::SqlxResultExt;
use graphloom_core::Result;
use sqlx::PgConnection;

/// Drop the blobs of `threads` that no remaining checkpoint of their namespace names.
async fn drop_unnamed_blobs(conn: &mut PgConnection, threads: &[String]) -> Result<()> {
    sqlx::query(
        "DELETE FROM typed_blobs b WHERE b.thread_id = ANY($1) AND NOT EXISTS ( \
           SELECT 1 FROM typed_checkpoints c, unnest(c.channels, c.versions) AS x(ch, v) \
           WHERE c.thread_id = b.thread_id AND c.checkpoint_ns = b.checkpoint_ns \
             AND x.ch = b.channel AND x.v = b.version)",
    )
    .bind(threads)
    .execute(conn)
    .await
    .during("drop unnamed blobs")
    .map(|_| ())
}

impl TypedSaver {
    /// What the checkpoints of `thread_id` take in the database (all namespaces).
    ///
    /// # Errors
    /// A backend error.
    pub async fn thread_storage(&self, thread_id: &str) -> Result<graphloom_core::checkpoint::ThreadStorage> {
        let tables = crate::storage::Tables {
            checkpoints: "typed_checkpoints",
            blobs: "typed_blobs",
            writes: "typed_writes",
        };
        crate::storage::thread_storage(&self.pool, &tables, thread_id).await
    }

    /// Delete every checkpoint, blob and pending write of a thread.
    ///
    /// # Errors
    /// A backend error; nothing is deleted then.
    pub async fn delete_thread(&self, thread_id: &str) -> Result<()> {
        let mut tx = self.pool.begin().await.during("delete_thread: begin")?;
        for table in ["typed_checkpoints", "typed_blobs", "typed_writes"] {
            sqlx::query(&format!("DELETE FROM {table} WHERE thread_id = $1"))
                .bind(thread_id)
                .execute(&mut *tx)
                .await
                .during("delete_thread")?;
        }
        tx.commit().await.during("delete_thread: commit")
    }

    /// Delete the checkpoints of these runs, their pending writes and the blobs no other
    /// checkpoint names.
    ///
    /// # Errors
    /// A backend error; nothing is deleted then.
    pub async fn delete_for_runs(&self, run_ids: Vec<String>) -> Result<()> {
        if run_ids.is_empty() {
            return Ok(());
        }
        let mut tx = self.pool.begin().await.during("delete_for_runs: begin")?;
        let gone: Vec<(String, String, String)> = sqlx::query_as(
            "DELETE FROM typed_checkpoints WHERE run_id = ANY($1) \
             RETURNING thread_id, checkpoint_ns, checkpoint_id",
        )
        .bind(&run_ids)
        .fetch_all(&mut *tx)
        .await
        .during("delete_for_runs")?;
        if !gone.is_empty() {
            let mut threads = Vec::with_capacity(gone.len());
            let mut namespaces = Vec::with_capacity(gone.len());
            let mut ids = Vec::with_capacity(gone.len());
            for (t, ns, id) in gone {
                threads.push(t);
                namespaces.push(ns);
                ids.push(id);
            }
            sqlx::query(
                "DELETE FROM typed_writes w USING unnest($1::text[], $2::text[], $3::text[]) AS x(t, ns, id) \
                 WHERE w.thread_id = x.t AND w.checkpoint_ns = x.ns AND w.checkpoint_id = x.id",
            )
            .bind(&threads)
            .bind(&namespaces)
            .bind(&ids)
            .execute(&mut *tx)
            .await
            .during("delete_for_runs: writes")?;
            threads.sort();
            threads.dedup();
            drop_unnamed_blobs(&mut tx, &threads).await?;
        }
        tx.commit().await.during("delete_for_runs: commit")
    }

    /// Copy every checkpoint, blob and pending write of `source` to `target` (same ids;
    /// rows `target` already has under the same keys are kept).
    ///
    /// # Errors
    /// A backend error; nothing is copied then.
    pub async fn copy_thread(&self, source: &str, target: &str) -> Result<()> {
        let mut tx = self.pool.begin().await.during("copy_thread: begin")?;
        for sql in [
            "INSERT INTO typed_checkpoints (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, \
             checkpoint, channels, versions, metadata, run_id) \
             SELECT $2, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, checkpoint, channels, versions, \
             metadata, run_id FROM typed_checkpoints WHERE thread_id = $1 ON CONFLICT DO NOTHING",
            "INSERT INTO typed_blobs (thread_id, checkpoint_ns, channel, version, type, value) \
             SELECT $2, checkpoint_ns, channel, version, type, value FROM typed_blobs WHERE thread_id = $1 \
             ON CONFLICT DO NOTHING",
            "INSERT INTO typed_writes (thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel, task_path, type, value) \
             SELECT $2, checkpoint_ns, checkpoint_id, task_id, idx, channel, task_path, type, value \
             FROM typed_writes WHERE thread_id = $1 ON CONFLICT DO NOTHING",
        ] {
            sqlx::query(sql)
                .bind(source)
                .bind(target)
                .execute(&mut *tx)
                .await
                .during("copy_thread")?;
        }
        tx.commit().await.during("copy_thread: commit")
    }

    /// Cut threads down: with `keep_latest`, to the newest checkpoint of each namespace
    /// (its writes and the blobs it names kept); without, to nothing.
    ///
    /// # Errors
    /// A backend error; nothing is pruned then.
    pub async fn prune(&self, thread_ids: Vec<String>, keep_latest: bool) -> Result<()> {
        if thread_ids.is_empty() {
            return Ok(());
        }
        let mut tx = self.pool.begin().await.during("prune: begin")?;
        if keep_latest {
            for table in ["typed_checkpoints", "typed_writes"] {
                sqlx::query(&format!(
                    "DELETE FROM {table} d WHERE d.thread_id = ANY($1) AND d.checkpoint_id < ( \
                       SELECT MAX(c.checkpoint_id) FROM typed_checkpoints c \
                       WHERE c.thread_id = d.thread_id AND c.checkpoint_ns = d.checkpoint_ns)"
                ))
                .bind(&thread_ids)
                .execute(&mut *tx)
                .await
                .during("prune")?;
            }
            drop_unnamed_blobs(&mut tx, &thread_ids).await?;
        } else {
            for table in ["typed_checkpoints", "typed_blobs", "typed_writes"] {
                sqlx::query(&format!("DELETE FROM {table} WHERE thread_id = ANY($1)"))
                    .bind(&thread_ids)
                    .execute(&mut *tx)
                    .await
                    .during("prune")?;
            }
        }
        tx.commit().await.during("prune: commit")
    }
}
