//! The resources of the API, in the JSON shapes the `langgraph-sdk` clients expect: they
//! live in `graphloom-server-db` (below the database backends that store them) and are
//! re-exported here.

pub use graphloom_server_db::models::*;
