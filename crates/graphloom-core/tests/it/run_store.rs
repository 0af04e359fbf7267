//! A run's own store (`RunConfig::store`) replaces the graph's compiled-in store for that
//! run, in its nodes and in its subgraphs' nodes; other runs keep the compiled one.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use graphloom_core::store::{PutOptions, SearchQuery};
use graphloom_core::*;
use serde_json::json;
use std::sync::Arc;

#[derive(State, Clone, Default, Debug)]
struct Notes {
    /// Who wrote to the store, in order.
    #[reducer(append)]
    wrote: Vec<String>,
}

fn ns(label: &str) -> Vec<String> {
    vec!["notes".to_owned(), label.to_owned()]
}

/// A node that puts an item under `notes.<name>` in the run's store.
fn writer(
    name: &'static str,
) -> impl Fn(Arc<Notes>, Runtime) -> futures::future::BoxFuture<'static, Result<NotesUpdate, NodeError>>
       + std::marker::Send
       + Sync
       + 'static {
    move |_s, rt: Runtime| {
        Box::pin(async move {
            let store = rt.store().ok_or_else(|| NodeError::fatal("no store"))?;
            store
                .put(&ns(name), "k", json!({"by": name}), PutOptions::default())
                .await
                .map_err(|e| NodeError::fatal(e.to_string()))?;
            Ok(NotesUpdate::new().wrote(vec![name.to_owned()]))
        })
    }
}

fn graph(compiled_store: Option<InMemoryStore>) -> CompiledGraph<Notes> {
    let child = StateGraph::<Notes>::new()
        .add_node("inner", writer("inner"))
        .add_edge(START, "inner")
        .add_edge("inner", END)
        .compile()
        .unwrap();
    let mut g = StateGraph::<Notes>::new()
        .add_node("outer", writer("outer"))
        .add_subgraph_shared("sub", child)
        .add_edge(START, "outer")
        .add_edge("outer", "sub")
        .add_edge("sub", END)
        .checkpointer(checkpoint::InMemorySaver::new());
    if let Some(s) = compiled_store {
        g = g.store(s);
    }
    g.compile().unwrap()
}

async fn labels(store: &InMemoryStore) -> Vec<String> {
    let mut v: Vec<String> = store
        .search(&["notes".to_owned()], SearchQuery::new().limit(100))
        .await
        .unwrap()
        .into_iter()
        .map(|i| i.item.namespace[1].clone())
        .collect();
    v.sort();
    v
}

#[tokio::test]
async fn a_runs_store_replaces_the_compiled_one_in_nodes_and_subgraphs() {
    let compiled = InMemoryStore::new();
    let per_run = InMemoryStore::new();
    let g = graph(Some(compiled.clone()));
    let out = g
        .invoke(
            NotesUpdate::new(),
            RunConfig::thread("a").store(Arc::new(per_run.clone()) as Arc<dyn store::DynStore>),
        )
        .await
        .unwrap();
    assert_eq!(out.values.wrote, vec!["outer", "inner"]);
    assert_eq!(labels(&per_run).await, vec!["inner", "outer"]);
    assert!(
        labels(&compiled).await.is_empty(),
        "the compiled store was not touched"
    );
    // A run without one uses the compiled store.
    g.invoke(NotesUpdate::new(), RunConfig::thread("b"))
        .await
        .unwrap();
    assert_eq!(labels(&compiled).await, vec!["inner", "outer"]);
}

#[tokio::test]
async fn a_graph_without_a_store_gets_the_runs() {
    let per_run = InMemoryStore::new();
    let g = graph(None);
    let err = g
        .invoke(NotesUpdate::new(), RunConfig::thread("a"))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("no store"), "{err}");
    g.invoke(
        NotesUpdate::new(),
        RunConfig::thread("b").store(Arc::new(per_run.clone()) as Arc<dyn store::DynStore>),
    )
    .await
    .unwrap();
    assert_eq!(labels(&per_run).await, vec!["inner", "outer"]);
}
