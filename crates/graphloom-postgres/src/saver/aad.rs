//! The associated data that binds each encoded value to its row.
//!
//! Each part is length-prefixed, so no two different rows share associated data.

fn build(kind: &str, parts: &[&str]) -> Vec<u8> {
    let len = 24 + kind.len() + parts.iter().map(|p| 8 + p.len()).sum::<usize>();
    let mut out = Vec::with_capacity(len);
    out.extend_from_slice(b"graphloom-postgres/");
    out.extend_from_slice(kind.as_bytes());
    for part in parts {
        out.extend_from_slice(&(part.len() as u64).to_le_bytes());
        out.extend_from_slice(part.as_bytes());
    }
    out
}

/// A row of `graphloom_checkpoints`.
pub(crate) fn checkpoint(thread_id: &str, ns: &str, checkpoint_id: &str) -> Vec<u8> {
    build("checkpoint", &[thread_id, ns, checkpoint_id])
}

/// A row of `graphloom_checkpoint_blobs`.
pub(crate) fn blob(thread_id: &str, ns: &str, channel: &str, version: &str) -> Vec<u8> {
    build("blob", &[thread_id, ns, channel, version])
}

/// A row of `graphloom_checkpoint_writes`.
pub(crate) fn write(
    thread_id: &str,
    ns: &str,
    checkpoint_id: &str,
    task_id: &str,
    idx: i64,
    channel: &str,
) -> Vec<u8> {
    build(
        "write",
        &[thread_id, ns, checkpoint_id, task_id, &idx.to_string(), channel],
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_do_not_run_together() {
        assert_ne!(checkpoint("ab", "", "c"), checkpoint("a", "b", "c"));
        assert_ne!(blob("t", "", "ch", "1"), checkpoint("t", "", "ch"));
        assert_ne!(
            write("t", "", "c", "task", -1, "x"),
            write("t", "", "c", "task", 1, "x")
        );
    }
}
