//! graphloom-test-kit: the conformance kits every graphloom backend runs against itself.
//!
//! The executor relies on promises that every [`Checkpointer`](graphloom_core::checkpoint::Checkpointer)
//! and every [`Store`](graphloom_core::Store) keeps: what a saved checkpoint reads back as,
//! how deltas resolve, the order of a listing, what a deleted thread leaves behind, what a
//! store's search and TTL do. These kits check them, one function per contract, so a new
//! backend proves itself with a few lines in its tests:
//!
//! | kit | checks |
//! |---|---|
//! | [`checkpointer_conformance`] | put and get, deltas, listing, pending writes, copy and delete of threads and runs ([`checkpointer`] has each area on its own) |
//! | [`store_conformance`] | put, get, delete, validation, search with filters, namespaces, TTL |
//! | [`store_vector_conformance`] | vector search with [`HashEmbedder`](graphloom_core::store::HashEmbedder) |
//!
//! [`python::venv`] gives tests that use a real Python tool as the judge a pinned virtualenv;
//! [`first_use::prepare`] makes any such first-use install once, however many test processes
//! ask for it at the same moment.
//!
//! ```
//! use graphloom_core::{checkpoint::InMemorySaver, InMemoryStore};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! graphloom_test_kit::checkpointer_conformance(&InMemorySaver::new()).await;
//! graphloom_test_kit::store_conformance(&InMemoryStore::new()).await;
//! # }
//! ```
//!
//! The kits live in their own crate rather than behind a feature of `graphloom-core`: the
//! libraries carry no test code, and the backends (and the server) take the kit as a
//! dev-dependency only. A failed check panics with a message naming it.

pub mod checkpointer;
pub mod first_use;
pub mod python;
pub mod store;

pub use checkpointer::checkpointer_conformance;
pub use store::{store_conformance, store_vector_conformance};
