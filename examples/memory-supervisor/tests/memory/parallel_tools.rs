//! Parallel work merged by reducers (ADR-007 §2.5): a message's tool calls run at the same
//! time and `add_messages` merges their answers; the memory writer's two retrieval steps
//! run in one superstep and both append to `retrieved`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common::{as_user, call, connect, says, tool_results};
use futures::future::BoxFuture;
use graphloom_core::store::{DynStore, Item, ListNamespaces, PutOptions, SearchItem, SearchQuery};
use graphloom_core::{BackendError, BackendErrorKind, MessageKind, RunConfig};
use graphloom_llm::{Reply, ScriptedModel};
use memory_supervisor::{build_graph, GraphConfig, RouterMode, Tier};
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Barrier;

/// A store whose searches only proceed when two are in flight at once.
struct RendezvousStore {
    inner: Arc<dyn DynStore>,
    barrier: Arc<Barrier>,
}

impl DynStore for RendezvousStore {
    fn get<'a>(
        &'a self,
        namespace: &'a [String],
        key: &'a str,
    ) -> BoxFuture<'a, graphloom_core::Result<Option<Item>>> {
        self.inner.get(namespace, key)
    }
    fn put<'a>(
        &'a self,
        namespace: &'a [String],
        key: &'a str,
        value: Value,
        opts: PutOptions,
    ) -> BoxFuture<'a, graphloom_core::Result<()>> {
        self.inner.put(namespace, key, value, opts)
    }
    fn delete<'a>(
        &'a self,
        namespace: &'a [String],
        key: &'a str,
    ) -> BoxFuture<'a, graphloom_core::Result<()>> {
        self.inner.delete(namespace, key)
    }
    fn search<'a>(
        &'a self,
        namespace_prefix: &'a [String],
        query: SearchQuery,
    ) -> BoxFuture<'a, graphloom_core::Result<Vec<SearchItem>>> {
        Box::pin(async move {
            tokio::time::timeout(Duration::from_secs(20), self.barrier.wait())
                .await
                .map_err(|_| {
                    BackendError::new(
                        BackendErrorKind::Other,
                        "the other search never started: not parallel",
                    )
                })?;
            self.inner.search(namespace_prefix, query).await
        })
    }
    fn list_namespaces(
        &self,
        opts: ListNamespaces,
    ) -> BoxFuture<'_, graphloom_core::Result<Vec<Vec<String>>>> {
        self.inner.list_namespaces(opts)
    }
    fn sweep_expired(&self) -> BoxFuture<'_, graphloom_core::Result<usize>> {
        self.inner.sweep_expired()
    }
}

#[tokio::test]
async fn parallel_tool_calls_run_together_and_their_answers_merge_in_call_order() {
    let (url, _db) = graphloom_postgres::testing::test_database().await;
    let (saver, store) = memory_supervisor::open_database(&memory_supervisor::Database::Postgres(url))
        .await
        .unwrap();
    let q = json!({"query": "favourite colour"});
    let model = ScriptedModel::new([
        Reply::tool_calls(
            "",
            vec![
                call("first", "l3_search_knowledge", q.clone()),
                call("second", "l2_search_facts", q),
            ],
        ),
        Reply::text("Nothing yet."),
    ]);
    let graph = build_graph(GraphConfig {
        model: Arc::new(model),
        router: RouterMode::Keywords,
        checkpointer: Some(saver),
        store: Some(Arc::new(RendezvousStore {
            inner: store,
            barrier: Arc::new(Barrier::new(2)),
        })),
    })
    .unwrap();
    let out = graph
        .invoke(
            says("What do you remember about my favourite colour?"),
            as_user("alice", "p1"),
        )
        .await
        .unwrap();
    let msgs: Vec<_> = out.values.messages.iter().cloned().collect();
    // human, AI with two calls, two tool answers (call order), the final answer.
    assert_eq!(msgs.len(), 5);
    assert_eq!(msgs[1].tool_calls.len(), 2);
    assert_eq!(msgs[2].tool_call_id.as_deref(), Some("first"));
    assert_eq!(msgs[3].tool_call_id.as_deref(), Some("second"));
    assert!(msgs[2..4].iter().all(|m| m.kind == MessageKind::Tool));
    let r = tool_results(&out.values);
    assert!(
        r.iter().all(|(_, _, status)| status == "success"),
        "both searches met at the barrier: {r:?}"
    );
}

#[tokio::test]
async fn the_writers_parallel_recall_steps_both_append_to_retrieved() {
    let (url, _db) = graphloom_postgres::testing::test_database().await;
    let (graph, _store) = connect(
        &url,
        Arc::new(ScriptedModel::new(Vec::<Reply>::new())),
        RouterMode::Keywords,
    )
    .await;
    let cfg = as_user("alice", "w1");
    graph
        .invoke(says("Remember that my favourite colour is teal."), cfg.clone())
        .await
        .unwrap();
    let out = graph
        .invoke(says("Remember that my favourite food is pasta."), cfg.clone())
        .await
        .unwrap();
    // Both recall steps found the earlier fact (the session step in L2, the long-term step
    // in L3) in one superstep; the append reducer merged their writes in the fixed task
    // order (by node name: recall_long_term, recall_session), whichever finished first.
    let tiers: Vec<Tier> = out.values.retrieved.iter().map(|h| h.tier).collect();
    assert_eq!(tiers, [Tier::L3, Tier::L2], "{:?}", out.values.retrieved);
    assert!(out
        .values
        .retrieved
        .iter()
        .all(|h| h.content == "my favourite colour is teal"));
    let last = out.values.messages.last().unwrap().text();
    assert!(last.contains("Related: my favourite colour is teal"), "{last}");
    // The writer's steps are checkpointed in its own namespace, and the parent thread
    // shows the supervisor finished.
    let snap = graph.get_state(&RunConfig::thread("w1")).await.unwrap();
    assert!(snap.next.is_empty());
}
