//! The associated data each stored value of the saver is sealed with: its row's kind and
//! key, so a sealed value moved to another row does not decode.

use crate::aad::aad;

/// Associated data of a checkpoint row: its key, parent and metadata text, so a sealed
/// body moved to another row, or metadata edited in place, does not decode.
pub(super) fn checkpoint(thread: &str, ns: &str, id: &str, parent: Option<&str>, metadata: &str) -> Vec<u8> {
    aad(&["checkpoint", thread, ns, id, parent.unwrap_or(""), metadata])
}

/// Associated data of a channel blob: its key.
pub(super) fn blob(thread: &str, ns: &str, channel: &str, version: &str) -> Vec<u8> {
    aad(&["blob", thread, ns, channel, version])
}

/// Associated data of a pending write: its key and channel.
pub(super) fn write(
    thread: &str,
    ns: &str,
    checkpoint_id: &str,
    task_id: &str,
    idx: i64,
    channel: &str,
) -> Vec<u8> {
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
