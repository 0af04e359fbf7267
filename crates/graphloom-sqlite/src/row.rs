//! Rows read into typed values: [`FromRow`], one impl per row type (its columns and how they
//! decode together), and the queries that use it.

use crate::error::rusqlite_error;
use graphloom_core::Error;
use rusqlite::{Connection, Params, Row};

/// A type read from a row of a `SELECT` of its [`COLUMNS`](FromRow::COLUMNS).
pub(crate) trait FromRow: Sized {
    /// The columns [`from_row`](FromRow::from_row) reads, in order, as a `SELECT` list.
    const COLUMNS: &'static str;
    /// The error of a row that does not decode.
    type Error: From<Error>;
    /// The value of a row of [`COLUMNS`](FromRow::COLUMNS).
    fn from_row(row: &Row<'_>) -> Result<Self, Self::Error>;
}

/// A BLOB column's bytes; TEXT is taken as its UTF-8 bytes (as a row written by hand or by
/// another tool may hold), anything else is a column type error.
pub(crate) fn bytes_of(row: &rusqlite::Row<'_>, i: usize) -> rusqlite::Result<Vec<u8>> {
    use rusqlite::types::ValueRef;
    match row.get_ref(i)? {
        ValueRef::Blob(b) | ValueRef::Text(b) => Ok(b.to_vec()),
        other => Err(rusqlite::Error::InvalidColumnType(
            i,
            String::new(),
            other.data_type(),
        )),
    }
}

/// Run a prepared (cached) query and hand each row to `f`.
pub(crate) fn each_row(
    conn: &Connection,
    sql: &str,
    params: impl Params,
    mut f: impl FnMut(&Row<'_>) -> Result<(), Error>,
) -> Result<(), Error> {
    let mut stmt = conn.prepare_cached(sql).map_err(rusqlite_error)?;
    let mut rows = stmt.query(params).map_err(rusqlite_error)?;
    while let Some(row) = rows.next().map_err(rusqlite_error)? {
        f(row)?;
    }
    Ok(())
}

/// The first row of a query (cached), as a `T`.
pub(crate) fn query_one<T: FromRow>(
    conn: &Connection,
    sql: &str,
    params: impl Params,
) -> Result<Option<T>, T::Error> {
    let mut stmt = conn.prepare_cached(sql).map_err(rusqlite_error)?;
    let mut rows = stmt.query(params).map_err(rusqlite_error)?;
    match rows.next().map_err(rusqlite_error)? {
        Some(row) => T::from_row(row).map(Some),
        None => Ok(None),
    }
}

/// Every row of a query (cached), as `T`s: for a query whose text is one of a few.
#[cfg_attr(not(feature = "server"), allow(dead_code))]
pub(crate) fn query_all<T: FromRow>(
    conn: &Connection,
    sql: &str,
    params: impl Params,
) -> Result<Vec<T>, T::Error> {
    let mut stmt = conn.prepare_cached(sql).map_err(rusqlite_error)?;
    all_rows(&mut stmt, params)
}

/// Every row of a query whose text varies (filters, lists): prepared for this call only, so
/// it does not push the connection's cached statements out.
#[cfg_attr(not(feature = "server"), allow(dead_code))]
pub(crate) fn query_all_once<T: FromRow>(
    conn: &Connection,
    sql: &str,
    params: impl Params,
) -> Result<Vec<T>, T::Error> {
    all_rows(&mut conn.prepare(sql).map_err(rusqlite_error)?, params)
}

fn all_rows<T: FromRow>(stmt: &mut rusqlite::Statement<'_>, params: impl Params) -> Result<Vec<T>, T::Error> {
    let mut rows = stmt.query(params).map_err(rusqlite_error)?;
    let mut out = Vec::new();
    while let Some(row) = rows.next().map_err(rusqlite_error)? {
        out.push(T::from_row(row)?);
    }
    Ok(out)
}
