//! `prune_to_latest`: a thread's history cut down to its latest checkpoint per namespace
//! (retention's `keep_latest`). The latest checkpoints are read with their values resolved;
//! one write then drops every other checkpoint, their pending writes and every blob of the
//! thread, and stores the kept checkpoints' values whole again (an append chain they
//! leaned on is gone). A namespace whose latest checkpoint changed between the read and
//! the write is left alone.

use super::aad;
use super::rows::{encode, insert_blob};
use super::SqliteSaver;
use crate::error::{other, SqlResultExt};
use graphloom_core::checkpoint::CheckpointConfig;
use graphloom_core::Result;
use rusqlite::OptionalExtension;

/// One namespace's latest checkpoint, and its values encoded as whole blobs.
struct Kept {
    ns: String,
    id: String,
    /// `(channel, version, enc, bytes)`.
    blobs: Vec<(String, String, String, Vec<u8>)>,
}

impl SqliteSaver {
    pub(super) async fn prune_to_latest_now(&self, thread_id: &str) -> Result<usize> {
        let thread = thread_id.to_owned();
        let namespaces: Vec<String> = {
            let saver = self.clone();
            let thread = thread.clone();
            tokio::task::spawn_blocking(move || {
                saver.db.read(|conn| {
                    let mut stmt = conn
                        .prepare_cached("SELECT DISTINCT checkpoint_ns FROM checkpoints WHERE thread_id = ?")
                        .sql()?;
                    let rows = stmt
                        .query_map([&thread], |r| r.get(0))
                        .sql()?
                        .collect::<rusqlite::Result<Vec<String>>>()
                        .sql()?;
                    Ok::<_, graphloom_core::Error>(rows)
                })
            })
            .await
            .map_err(|e| other(format!("pruning a thread stopped: {e}")))??
        };
        let mut kept = Vec::with_capacity(namespaces.len());
        for ns in namespaces {
            let config = CheckpointConfig {
                thread_id: thread.clone(),
                checkpoint_ns: ns.clone(),
                checkpoint_id: None,
            };
            let Some(tuple) = self.get_tuple_now(&config).await? else {
                continue;
            };
            let cp = tuple.checkpoint;
            let mut blobs = Vec::with_capacity(cp.channel_values.len());
            for (channel, value) in &cp.channel_values {
                let Some(version) = cp.channel_versions.get(channel) else {
                    continue;
                };
                let version = version.to_string();
                let (enc, bytes) = encode(self.codec(), value, &aad::blob(&thread, &ns, channel, &version))?;
                blobs.push((channel.clone(), version, enc, bytes));
            }
            kept.push(Kept { ns, id: cp.id, blobs });
        }
        let target = thread.clone();
        let dropped = self
            .db
            .write(move |conn| {
                let mut dropped = 0usize;
                for k in &kept {
                    let latest: Option<String> = conn
                        .prepare_cached(
                            "SELECT checkpoint_id FROM checkpoints WHERE thread_id = ?1 AND checkpoint_ns = ?2 \
                             ORDER BY checkpoint_id DESC LIMIT 1",
                        )
                        .and_then(|mut s| s.query_row([&target, &k.ns], |r| r.get(0)).optional())
                        .sql()?;
                    if latest.as_deref() != Some(k.id.as_str()) {
                        continue;
                    }
                    let params = rusqlite::params![target, k.ns, k.id];
                    conn.prepare_cached(
                        "DELETE FROM checkpoint_writes WHERE thread_id = ?1 AND checkpoint_ns = ?2 \
                         AND checkpoint_id <> ?3",
                    )
                    .and_then(|mut s| s.execute(params))
                    .sql()?;
                    dropped += conn
                        .prepare_cached(
                            "DELETE FROM checkpoints WHERE thread_id = ?1 AND checkpoint_ns = ?2 \
                             AND checkpoint_id <> ?3",
                        )
                        .and_then(|mut s| s.execute(params))
                        .sql()?;
                    conn.prepare_cached("DELETE FROM checkpoint_blobs WHERE thread_id = ?1 AND checkpoint_ns = ?2")
                        .and_then(|mut s| s.execute([&target, &k.ns]))
                        .sql()?;
                    for (channel, version, enc, bytes) in &k.blobs {
                        insert_blob(conn, &target, &k.ns, channel, version, enc, bytes)?;
                    }
                }
                Ok(dropped)
            })
            .await?;
        self.cache.forget_thread(thread_id);
        Ok(dropped)
    }
}
