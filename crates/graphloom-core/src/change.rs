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

/// Why a reducer refused an update: removing a message id that no message has, adding
/// values that cannot be added, a custom reducer's own reason. The merge reports it as
/// [`StateError::Reducer`](crate::StateError::Reducer), naming the field.
///
/// ```
/// use graphloom_core::reducers::ReducerError;
///
/// let e = ReducerError::new("cannot add \"a\" to 1");
/// assert_eq!(e.to_string(), "cannot add \"a\" to 1");
/// assert_eq!(e, ReducerError::from("cannot add \"a\" to 1"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ReducerError {
    message: String,
}

impl ReducerError {
    /// A refusal with this reason.
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
        }
    }
    /// The reason.
    #[must_use]
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl From<String> for ReducerError {
    fn from(message: String) -> Self {
        Self::new(message)
    }
}

impl From<&str> for ReducerError {
    fn from(message: &str) -> Self {
        Self::new(message)
    }
}
