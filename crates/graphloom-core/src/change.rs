//! How a merge changed a state's fields: what reducers report and checkpoint encoding reads
//! (only changed fields are stored, and of a sequence only its appended tail).

/// How one field changed during a merge. Checkpoint encoding uses it to store only what
/// changed, and for sequence fields only the appended tail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldChange {
    /// The field now holds a new value, stored whole.
    Replaced,
    /// `n` items were appended to a sequence field and nothing else changed in it.
    Appended(usize),
}

impl FieldChange {
    /// The change after two successive changes to the same field in one step.
    #[must_use]
    pub fn then(self, next: FieldChange) -> FieldChange {
        match (self, next) {
            (FieldChange::Appended(a), FieldChange::Appended(b)) => FieldChange::Appended(a + b),
            _ => FieldChange::Replaced,
        }
    }
}

/// One field's change after a merge: its index and how it changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Changed {
    /// Index of the field in declaration order.
    pub field: usize,
    /// What happened to it.
    pub change: FieldChange,
}
