//! Assistants and their versions.

use super::rows::VERSION_COLUMNS;
use super::{exec, push_page, text, SqliteDb};
use crate::error::ServerResultExt;
use crate::row::{query_all_once, query_one, FromRow};
use graphloom_server_db::kit::{
    assistant_sort_column, map_contains, now_micros, order_keyword, patched, slice_page,
};
use graphloom_server_db::models::{rfc3339_from_micros, Assistant};
use graphloom_server_db::{AssistantPatch, AssistantQuery, DbError, DbResult};
use rusqlite::params;
use rusqlite::types::Value as SqlValue;
use serde_json::{Map, Value};

pub(super) async fn create(db: &SqliteDb, owner: &str, a: &Assistant) -> DbResult<Assistant> {
    let now = now_micros();
    let (config, context, metadata) = (text(&a.config)?, text(&a.context)?, text(&a.metadata)?);
    let (owner, new) = (owner.to_owned(), a.clone());
    db.write(move |c| {
        let inserted = exec(
            c,
            "INSERT INTO server_assistants (assistant_id, owner, graph_id, config, context, metadata, \
             version, name, description, created_at, updated_at) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, 1, ?7, ?8, ?9, ?9) ON CONFLICT (assistant_id) DO NOTHING",
            params![new.assistant_id, owner, new.graph_id, config, context, metadata, new.name, new.description, now],
        )?;
        if inserted == 0 {
            return Err(DbError::Conflict(format!("assistant {}", new.assistant_id)));
        }
        exec(
            c,
            "INSERT INTO server_assistant_versions (assistant_id, version, owner, graph_id, config, \
             context, metadata, name, description, created_at) VALUES (?1, 1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
            params![new.assistant_id, owner, new.graph_id, config, context, metadata, new.name, new.description, now],
        )?;
        Ok(())
    })
    .await?;
    Ok(Assistant {
        version: 1,
        created_at: rfc3339_from_micros(now),
        updated_at: rfc3339_from_micros(now),
        ..a.clone()
    })
}

/// The SELECT of an assistant of an owner by id.
fn by_id() -> String {
    format!(
        "SELECT {} FROM server_assistants WHERE assistant_id = ?1 AND owner = ?2",
        Assistant::COLUMNS
    )
}

pub(super) fn get(db: &SqliteDb, owner: &str, id: &str) -> DbResult<Option<Assistant>> {
    db.read(|c| query_one(c, &by_id(), params![id, owner]))
}

pub(super) async fn patch(
    db: &SqliteDb,
    owner: &str,
    id: &str,
    patch: AssistantPatch,
) -> DbResult<Option<Assistant>> {
    let now = now_micros();
    let (owner, id) = (owner.to_owned(), id.to_owned());
    db.write(move |c| {
        let Some(mut a) = query_one::<Assistant>(c, &by_id(), params![id, owner])? else {
            return Ok(None);
        };
        let latest: Option<i64> = c
            .prepare_cached("SELECT MAX(version) FROM server_assistant_versions WHERE assistant_id = ?1")
            .db()?
            .query_row(params![id], |r| r.get(0))
            .db()?;
        patched(&mut a, patch.clone(), latest, now);
        let (config, context, metadata) = (text(&a.config)?, text(&a.context)?, text(&a.metadata)?);
        exec(
            c,
            "INSERT INTO server_assistant_versions (assistant_id, version, owner, graph_id, config, \
             context, metadata, name, description, created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
            params![id, a.version, owner, a.graph_id, config, context, metadata, a.name, a.description, now],
        )?;
        exec(
            c,
            "UPDATE server_assistants SET graph_id = ?1, config = ?2, context = ?3, metadata = ?4, \
             version = ?5, name = ?6, description = ?7, updated_at = ?8 WHERE assistant_id = ?9",
            params![a.graph_id, config, context, metadata, a.version, a.name, a.description, now, id],
        )?;
        Ok(Some(a))
    })
    .await
}

pub(super) async fn delete(db: &SqliteDb, owner: &str, id: &str) -> DbResult<bool> {
    let (owner, id) = (owner.to_owned(), id.to_owned());
    db.write(move |c| {
        let n = exec(
            c,
            "DELETE FROM server_assistants WHERE assistant_id = ?1 AND owner = ?2",
            params![id, owner],
        )?;
        if n > 0 {
            exec(
                c,
                "DELETE FROM server_assistant_versions WHERE assistant_id = ?1",
                params![id],
            )?;
        }
        Ok(n > 0)
    })
    .await
}

/// The WHERE clause of an assistant search (metadata is matched in Rust).
fn filters(owner: &str, q: &AssistantQuery) -> (String, Vec<SqlValue>) {
    let mut sql = String::from(" WHERE owner = ?");
    let mut params = vec![SqlValue::Text(owner.to_owned())];
    if let Some(g) = &q.graph_id {
        sql.push_str(" AND graph_id = ?");
        params.push(SqlValue::Text(g.clone()));
    }
    if let Some(n) = &q.name {
        sql.push_str(" AND instr(lower(name), lower(?)) > 0");
        params.push(SqlValue::Text(n.clone()));
    }
    (sql, params)
}

pub(super) async fn search(
    db: &SqliteDb,
    owner: &str,
    q: &AssistantQuery,
) -> DbResult<(Vec<Assistant>, i64)> {
    let col = assistant_sort_column(q.sort_by.as_deref());
    let ord = order_keyword(q.sort_order);
    let (filter, params) = filters(owner, q);
    let mut sql = format!(
        "SELECT {} FROM server_assistants{filter} ORDER BY {col} {ord}, assistant_id {ord}",
        Assistant::COLUMNS
    );
    let q = q.clone();
    db.scan(move |c| {
        if q.metadata.is_empty() {
            let mut page_params = params.clone();
            push_page(&mut sql, &mut page_params, q.limit, q.offset);
            let page = query_all_once(c, &sql, rusqlite::params_from_iter(page_params))?;
            let total: i64 = c
                .prepare(&format!("SELECT COUNT(*) FROM server_assistants{filter}"))
                .db()?
                .query_row(rusqlite::params_from_iter(params), |r| r.get(0))
                .db()?;
            return Ok((page, total));
        }
        let all: Vec<Assistant> = query_all_once::<Assistant>(c, &sql, rusqlite::params_from_iter(params))?
            .into_iter()
            .filter(|a| map_contains(&a.metadata, &q.metadata))
            .collect();
        let total = all.len() as i64;
        Ok((slice_page(all, q.limit, q.offset), total))
    })
    .await
}

pub(super) async fn versions(
    db: &SqliteDb,
    owner: &str,
    id: &str,
    metadata: &Map<String, Value>,
    limit: i64,
    offset: i64,
) -> DbResult<Vec<Assistant>> {
    let (owner, id, metadata) = (owner.to_owned(), id.to_owned(), metadata.clone());
    db.scan(move |c| {
        let all: Vec<Assistant> = query_all_once::<Assistant>(
            c,
            &format!(
                "SELECT {VERSION_COLUMNS} FROM server_assistant_versions WHERE assistant_id = ?1 AND owner = ?2 \
                 ORDER BY version DESC"
            ),
            params![id, owner],
        )?
        .into_iter()
        .filter(|a| map_contains(&a.metadata, &metadata))
        .collect();
        Ok(slice_page(all, limit, offset))
    })
    .await
}

pub(super) async fn set_version(
    db: &SqliteDb,
    owner: &str,
    id: &str,
    version: i64,
) -> DbResult<Option<Assistant>> {
    let now = now_micros();
    let (owner, id) = (owner.to_owned(), id.to_owned());
    db.write(move |c| {
        let n = exec(
            c,
            "UPDATE server_assistants SET (graph_id, config, context, metadata, version, name, description) = \
             (SELECT graph_id, config, context, metadata, version, name, description \
              FROM server_assistant_versions v WHERE v.assistant_id = ?1 AND v.version = ?3), updated_at = ?4 \
             WHERE assistant_id = ?1 AND owner = ?2 AND EXISTS \
             (SELECT 1 FROM server_assistant_versions v WHERE v.assistant_id = ?1 AND v.version = ?3)",
            params![id, owner, version, now],
        )?;
        if n == 0 {
            return Ok(None);
        }
        query_one(
            c,
            &format!(
                "SELECT {} FROM server_assistants WHERE assistant_id = ?1",
                Assistant::COLUMNS
            ),
            params![id],
        )
    })
    .await
}
