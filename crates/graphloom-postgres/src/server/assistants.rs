//! Assistants and their versions.

use super::push_page;
use super::rows::{all, one, FromRow, VERSION_COLUMNS};
use crate::error::ServerResultExt;
use graphloom_server_db::kit::{assistant_sort_column, now_micros, order_keyword, patched};
use graphloom_server_db::models::{rfc3339_from_micros, Assistant};
use graphloom_server_db::{AssistantPatch, AssistantQuery, DbError, DbResult};
use serde_json::{Map, Value};
use sqlx::postgres::PgPool;
use sqlx::types::Json;
use sqlx::{Postgres, QueryBuilder};

pub(super) async fn create(pool: &PgPool, owner: &str, a: &Assistant) -> DbResult<Assistant> {
    let now = now_micros();
    let mut tx = pool.begin().await.db()?;
    let inserted = sqlx::query(
        "INSERT INTO server_assistants (assistant_id, owner, graph_id, config, context, metadata, \
         version, name, description, created_at, updated_at) \
         VALUES ($1, $2, $3, $4, $5, $6, 1, $7, $8, $9, $9) ON CONFLICT (assistant_id) DO NOTHING",
    )
    .bind(&a.assistant_id)
    .bind(owner)
    .bind(&a.graph_id)
    .bind(Json(&a.config))
    .bind(Json(&a.context))
    .bind(Json(&a.metadata))
    .bind(&a.name)
    .bind(&a.description)
    .bind(now)
    .execute(&mut *tx)
    .await
    .db()?
    .rows_affected();
    if inserted == 0 {
        return Err(DbError::Conflict(format!("assistant {}", a.assistant_id)));
    }
    sqlx::query(
        "INSERT INTO server_assistant_versions (assistant_id, version, owner, graph_id, config, \
         context, metadata, name, description, created_at) \
         SELECT assistant_id, version, owner, graph_id, config, context, metadata, name, description, \
         created_at FROM server_assistants WHERE assistant_id = $1",
    )
    .bind(&a.assistant_id)
    .execute(&mut *tx)
    .await
    .db()?;
    tx.commit().await.db()?;
    Ok(Assistant {
        version: 1,
        created_at: rfc3339_from_micros(now),
        updated_at: rfc3339_from_micros(now),
        ..a.clone()
    })
}

pub(super) async fn get(pool: &PgPool, owner: &str, id: &str) -> DbResult<Option<Assistant>> {
    let row = sqlx::query(&format!(
        "SELECT {} FROM server_assistants WHERE assistant_id = $1 AND owner = $2",
        Assistant::COLUMNS
    ))
    .bind(id)
    .bind(owner)
    .fetch_optional(pool)
    .await
    .db()?;
    one(row)
}

pub(super) async fn patch(
    pool: &PgPool,
    owner: &str,
    id: &str,
    patch: AssistantPatch,
) -> DbResult<Option<Assistant>> {
    let now = now_micros();
    let mut tx = pool.begin().await.db()?;
    let row = sqlx::query(&format!(
        "SELECT {} FROM server_assistants WHERE assistant_id = $1 AND owner = $2 FOR UPDATE",
        Assistant::COLUMNS
    ))
    .bind(id)
    .bind(owner)
    .fetch_optional(&mut *tx)
    .await
    .db()?;
    let Some(mut a) = one::<Assistant>(row)? else {
        return Ok(None);
    };
    let latest: Option<i64> =
        sqlx::query_scalar("SELECT MAX(version) FROM server_assistant_versions WHERE assistant_id = $1")
            .bind(id)
            .fetch_one(&mut *tx)
            .await
            .db()?;
    patched(&mut a, patch, latest, now);
    sqlx::query(
        "INSERT INTO server_assistant_versions (assistant_id, version, owner, graph_id, config, \
         context, metadata, name, description, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
    )
    .bind(id)
    .bind(a.version)
    .bind(owner)
    .bind(&a.graph_id)
    .bind(Json(&a.config))
    .bind(Json(&a.context))
    .bind(Json(&a.metadata))
    .bind(&a.name)
    .bind(&a.description)
    .bind(now)
    .execute(&mut *tx)
    .await
    .db()?;
    sqlx::query(
        "UPDATE server_assistants SET graph_id = $1, config = $2, context = $3, metadata = $4, \
         version = $5, name = $6, description = $7, updated_at = $8 WHERE assistant_id = $9",
    )
    .bind(&a.graph_id)
    .bind(Json(&a.config))
    .bind(Json(&a.context))
    .bind(Json(&a.metadata))
    .bind(a.version)
    .bind(&a.name)
    .bind(&a.description)
    .bind(now)
    .bind(id)
    .execute(&mut *tx)
    .await
    .db()?;
    tx.commit().await.db()?;
    Ok(Some(a))
}

pub(super) async fn delete(pool: &PgPool, owner: &str, id: &str) -> DbResult<bool> {
    let mut tx = pool.begin().await.db()?;
    let n = sqlx::query("DELETE FROM server_assistants WHERE assistant_id = $1 AND owner = $2")
        .bind(id)
        .bind(owner)
        .execute(&mut *tx)
        .await
        .db()?
        .rows_affected();
    if n > 0 {
        sqlx::query("DELETE FROM server_assistant_versions WHERE assistant_id = $1")
            .bind(id)
            .execute(&mut *tx)
            .await
            .db()?;
    }
    tx.commit().await.db()?;
    Ok(n > 0)
}

pub(super) async fn search(
    pool: &PgPool,
    owner: &str,
    q: &AssistantQuery,
) -> DbResult<(Vec<Assistant>, i64)> {
    let col = assistant_sort_column(q.sort_by.as_deref());
    let ord = order_keyword(q.sort_order);
    let mut qb = QueryBuilder::new(format!("SELECT {} FROM server_assistants", Assistant::COLUMNS));
    push_filters(&mut qb, owner, q);
    qb.push(format!(" ORDER BY {col} {ord}, assistant_id {ord}"));
    push_page(&mut qb, q.limit, q.offset);
    let rows = qb.build().fetch_all(pool).await.db()?;
    let found = all(&rows)?;
    let mut count = QueryBuilder::new("SELECT COUNT(*) FROM server_assistants");
    push_filters(&mut count, owner, q);
    let total: i64 = count.build_query_scalar().fetch_one(pool).await.db()?;
    Ok((found, total))
}

pub(super) async fn versions(
    pool: &PgPool,
    owner: &str,
    id: &str,
    metadata: &Map<String, Value>,
    limit: i64,
    offset: i64,
) -> DbResult<Vec<Assistant>> {
    let mut qb = QueryBuilder::new(format!(
        "SELECT {VERSION_COLUMNS} FROM server_assistant_versions WHERE assistant_id = "
    ));
    qb.push_bind(id.to_owned())
        .push(" AND owner = ")
        .push_bind(owner.to_owned())
        .push(" AND metadata @> ")
        .push_bind(Json(Value::Object(metadata.clone())))
        .push(" ORDER BY version DESC");
    push_page(&mut qb, limit, offset);
    let rows = qb.build().fetch_all(pool).await.db()?;
    all(&rows)
}

pub(super) async fn set_version(
    pool: &PgPool,
    owner: &str,
    id: &str,
    version: i64,
) -> DbResult<Option<Assistant>> {
    let row = sqlx::query(&format!(
        "UPDATE server_assistants a SET graph_id = v.graph_id, config = v.config, context = v.context, \
         metadata = v.metadata, version = v.version, name = v.name, description = v.description, \
         updated_at = $4 FROM server_assistant_versions v \
         WHERE a.assistant_id = $1 AND a.owner = $2 AND v.assistant_id = a.assistant_id AND v.version = $3 \
         RETURNING {}",
        Assistant::COLUMNS
            .split(", ")
            .map(|c| format!("a.{c}"))
            .collect::<Vec<_>>()
            .join(", ")
    ))
    .bind(id)
    .bind(owner)
    .bind(version)
    .bind(now_micros())
    .fetch_optional(pool)
    .await
    .db()?;
    one(row)
}

fn push_filters(qb: &mut QueryBuilder<'_, Postgres>, owner: &str, q: &AssistantQuery) {
    qb.push(" WHERE owner = ").push_bind(owner.to_owned());
    if let Some(g) = &q.graph_id {
        qb.push(" AND graph_id = ").push_bind(g.clone());
    }
    if let Some(n) = &q.name {
        qb.push(" AND strpos(lower(name), lower(")
            .push_bind(n.clone())
            .push(")) > 0");
    }
    if !q.metadata.is_empty() {
        qb.push(" AND metadata @> ")
            .push_bind(Json(Value::Object(q.metadata.clone())));
    }
}
