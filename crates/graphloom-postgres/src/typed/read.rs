//! `get_tuple` and `list`: checkpoint rows with their values and writes, read in one
//! `REPEATABLE READ` transaction.

use super::{TypedQuery, TypedSaver, TypedTuple, TypedValue, TypedWrite};
use crate::error::SqlxResultExt;
use graphloom_core::Result;
use sqlx::{PgConnection, Postgres, Transaction};

/// The columns of a checkpoint row, in [`Head`] order.
const HEAD: &str = "SELECT thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, checkpoint, \
                    metadata, channels, versions FROM typed_checkpoints";

/// A checkpoint row before its values and writes are read.
type Head = (
    String,
    String,
    String,
    Option<String>,
    String,
    Vec<u8>,
    String,
    Vec<String>,
    Vec<String>,
);

/// A read-only snapshot.
async fn snapshot(saver: &TypedSaver) -> Result<Transaction<'static, Postgres>> {
    let mut tx = saver.pool.begin().await.during("read: begin")?;
    sqlx::query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        .execute(&mut *tx)
        .await
        .during("read: snapshot")?;
    Ok(tx)
}

/// The tuple of a checkpoint row: the blobs of the channel versions it names, its writes.
async fn complete(conn: &mut PgConnection, head: Head) -> Result<TypedTuple> {
    let (thread_id, checkpoint_ns, checkpoint_id, parent_id, type_tag, bytes, metadata, channels, versions) =
        head;
    let blobs: Vec<(String, String, Vec<u8>)> = sqlx::query_as(
        "SELECT b.channel, b.type, b.value FROM unnest($3::text[], $4::text[]) WITH ORDINALITY AS x(c, v, n) \
         JOIN typed_blobs b ON b.thread_id = $1 AND b.checkpoint_ns = $2 AND b.channel = x.c AND b.version = x.v \
         ORDER BY x.n",
    )
    .bind(&thread_id)
    .bind(&checkpoint_ns)
    .bind(&channels)
    .bind(&versions)
    .fetch_all(&mut *conn)
    .await
    .during("read: blobs")?;
    let writes: Vec<(String, String, String, Vec<u8>)> = sqlx::query_as(
        "SELECT task_id, channel, type, value FROM typed_writes \
         WHERE thread_id = $1 AND checkpoint_ns = $2 AND checkpoint_id = $3 ORDER BY task_path, task_id, idx",
    )
    .bind(&thread_id)
    .bind(&checkpoint_ns)
    .bind(&checkpoint_id)
    .fetch_all(&mut *conn)
    .await
    .during("read: writes")?;
    Ok(TypedTuple {
        thread_id,
        checkpoint_ns,
        checkpoint_id,
        parent_id,
        checkpoint: TypedValue::new(type_tag, bytes),
        metadata,
        values: blobs
            .into_iter()
            .map(|(c, t, b)| (c, TypedValue::new(t, b)))
            .collect(),
        writes: writes
            .into_iter()
            .map(|(task_id, channel, t, b)| TypedWrite {
                task_id,
                channel,
                value: TypedValue::new(t, b),
            })
            .collect(),
    })
}

impl TypedSaver {
    /// The checkpoint `checkpoint_id` of a thread's namespace, or its newest one when
    /// `checkpoint_id` is `None`.
    ///
    /// # Errors
    /// A backend error.
    pub async fn get_tuple(
        &self,
        thread_id: &str,
        checkpoint_ns: &str,
        checkpoint_id: Option<&str>,
    ) -> Result<Option<TypedTuple>> {
        let mut tx = snapshot(self).await?;
        let head: Option<Head> = match checkpoint_id {
            Some(id) => {
                sqlx::query_as(&format!(
                    "{HEAD} WHERE thread_id = $1 AND checkpoint_ns = $2 AND checkpoint_id = $3"
                ))
                .bind(thread_id)
                .bind(checkpoint_ns)
                .bind(id)
                .fetch_optional(&mut *tx)
                .await
            }
            None => {
                sqlx::query_as(&format!(
                    "{HEAD} WHERE thread_id = $1 AND checkpoint_ns = $2 ORDER BY checkpoint_id DESC LIMIT 1"
                ))
                .bind(thread_id)
                .bind(checkpoint_ns)
                .fetch_optional(&mut *tx)
                .await
            }
        }
        .during("get_tuple")?;
        let out = match head {
            Some(head) => Some(complete(&mut tx, head).await?),
            None => None,
        };
        tx.commit().await.during("get_tuple: end")?;
        Ok(out)
    }

    /// Checkpoints matching `query`, newest first (by checkpoint id), from one snapshot.
    ///
    /// # Errors
    /// A backend error.
    pub async fn list(&self, query: &TypedQuery) -> Result<Vec<TypedTuple>> {
        let limit = query.limit.unwrap_or(usize::MAX);
        if limit == 0 {
            return Ok(Vec::new());
        }
        // Without a metadata filter the database applies the limit; with one, the rows are
        // matched here (the same rule as SQLite's) and the limit counts the matches.
        let sql_limit = if query.filter.is_empty() {
            i64::try_from(limit).unwrap_or(i64::MAX)
        } else {
            i64::MAX
        };
        let mut tx = snapshot(self).await?;
        let heads: Vec<Head> = sqlx::query_as(&format!(
            "{HEAD} WHERE ($1::text IS NULL OR thread_id = $1) AND ($2::text IS NULL OR checkpoint_ns = $2) \
             AND ($3::text IS NULL OR checkpoint_id < $3) \
             ORDER BY checkpoint_id DESC, thread_id, checkpoint_ns LIMIT $4"
        ))
        .bind(&query.thread_id)
        .bind(&query.checkpoint_ns)
        .bind(&query.before)
        .bind(sql_limit)
        .fetch_all(&mut *tx)
        .await
        .during("list")?;
        let mut out = Vec::new();
        for head in heads {
            if !query.matches(&head.6) {
                continue;
            }
            out.push(complete(&mut tx, head).await?);
            if out.len() >= limit {
                break;
            }
        }
        tx.commit().await.during("list: end")?;
        Ok(out)
    }
}
