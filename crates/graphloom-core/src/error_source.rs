//! [`ErrorSource`]: the error beneath a graphloom error, kept whole so a caller can match
//! on its type.

use std::error::Error as StdError;
use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

/// The underlying error of a graphloom error (a node's own error, a database driver's
/// error), kept with its type and its own source chain.
///
/// It is what [`std::error::Error::source`] returns for
/// [`Error::Node`](crate::Error::Node) and [`BackendError`](crate::BackendError): the
/// original error itself, so `err.source()?.downcast_ref::<MyError>()` finds it. It is
/// shared (an `Arc`), so the errors that hold it stay cheap to clone: a node error is
/// handed to a retry predicate and then to the run's error, and one failed commit of a
/// SQLite batch answers every caller of the batch.
///
/// It dereferences to `dyn Error + Send + Sync` and deliberately does not implement
/// `Error` itself, so that it is never a link of its own in a source chain.
///
/// ```
/// use graphloom_core::error::ErrorSource;
///
/// let io = std::io::Error::new(std::io::ErrorKind::BrokenPipe, "gone");
/// let source = ErrorSource::new(io);
/// assert_eq!(source.to_string(), "gone");
/// assert!(source.downcast_ref::<std::io::Error>().is_some());
/// ```
#[derive(Clone)]
pub struct ErrorSource(Arc<dyn StdError + Send + Sync + 'static>);

impl ErrorSource {
    /// Keep `error`.
    pub fn new<E: StdError + Send + Sync + 'static>(error: E) -> Self {
        Self(Arc::new(error))
    }

    /// Keep an error that is already boxed (its type stays visible to downcasts).
    #[must_use]
    pub fn from_boxed(error: Box<dyn StdError + Send + Sync + 'static>) -> Self {
        Self(Arc::from(error))
    }

    /// The error, as a trait object.
    #[must_use]
    pub fn as_error(&self) -> &(dyn StdError + Send + Sync + 'static) {
        &*self.0
    }

    /// The error as an `E`, if it is one.
    #[must_use]
    pub fn downcast_ref<E: StdError + 'static>(&self) -> Option<&E> {
        self.0.downcast_ref::<E>()
    }

    /// The first `E` in this error or its source chain: a node error that wraps a driver
    /// error, say, is found through the wrapper.
    #[must_use]
    pub fn find<E: StdError + 'static>(&self) -> Option<&E> {
        find_in_chain(self.as_error())
    }
}

/// The first `E` in `error` or its source chain.
pub(crate) fn find_in_chain<'a, E: StdError + 'static>(error: &'a (dyn StdError + 'static)) -> Option<&'a E> {
    let mut at = Some(error);
    while let Some(e) = at {
        if let Some(found) = e.downcast_ref::<E>() {
            return Some(found);
        }
        at = e.source();
    }
    None
}

impl Deref for ErrorSource {
    type Target = dyn StdError + Send + Sync + 'static;
    fn deref(&self) -> &Self::Target {
        &*self.0
    }
}

impl fmt::Debug for ErrorSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl fmt::Display for ErrorSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&*self.0, f)
    }
}

impl<E: StdError + Send + Sync + 'static> From<E> for ErrorSource {
    fn from(error: E) -> Self {
        Self::new(error)
    }
}
