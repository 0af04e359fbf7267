//! The graph's own billing consumer: every model call's charge receipt is written to the
//! graph's store before the model node returns, keyed by an invocation id derived from the
//! task, so a run cut short after a receipt and before its checkpoint, then continued,
//! still has exactly one receipt per model call.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use chat_runtime::{graph_with, AiEvent, ChatStateUpdate, CompletionAdapter, StoreLedger, ToolRunner};
use common::ask;
use futures::StreamExt;
use graphloom_core::checkpoint::InMemorySaver;
use graphloom_core::store::{
    DynStore, InMemoryStore, Item, ListNamespaces, PutOptions, SearchItem, SearchQuery, Store,
};
use graphloom_core::{Message, RunConfig};
use graphloom_llm::{Reply, ScriptedModel, Usage};
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Notify;

fn four_calls() -> ScriptedModel {
    ScriptedModel::new([
        Reply::tool_call("knowledge_search", json!({"query": "a"})).with_usage(Usage::new(100, 10)),
        Reply::tool_call("knowledge_search", json!({"query": "b"})).with_usage(Usage::new(200, 20)),
        Reply::tool_call("knowledge_search", json!({"query": "c"})).with_usage(Usage::new(300, 30)),
        Reply::text("done reading").with_usage(Usage::new(400, 40)),
    ])
}

#[tokio::test]
async fn the_runtime_and_the_store_ledger_see_the_same_calls() {
    let store = Arc::new(InMemoryStore::new());
    let graph = graph_with(
        Arc::new(InMemorySaver::new()),
        store.clone(),
        CompletionAdapter::new(Arc::new(four_calls())),
        ToolRunner::new([chat_runtime::knowledge_search()]),
    )
    .unwrap();
    let billing = chat_runtime::InMemoryBilling::new();
    let h = common::Harness {
        runtime: chat_runtime::ChatRuntime::new(
            Arc::new(chat_runtime::InProcGraphExecutor::new(graph.clone())),
            billing.clone(),
        ),
        billing,
        graph,
    };
    let run = ask(&h, "t-ledger", "read everything");
    let run_id = run.graph_run_id.clone();
    let events: Vec<_> = run.events.collect().await;
    let streamed: Vec<String> = events
        .iter()
        .filter_map(|e| match &e.event {
            AiEvent::UsageReport { fact } => Some(fact.invocation_id.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(streamed.len(), 4);

    let stored = StoreLedger::new(store.clone()).receipts("acct-1").await.unwrap();
    let stored_ids: Vec<String> = stored.iter().map(|r| r.fact.invocation_id.clone()).collect();
    assert_eq!(
        stored_ids.iter().collect::<BTreeSet<_>>(),
        streamed.iter().collect::<BTreeSet<_>>(),
        "the stream's usage reports are the store's receipts"
    );
    let relayed: Vec<String> = h
        .billing
        .receipts()
        .into_iter()
        .map(|r| r.fact.invocation_id)
        .collect();
    assert_eq!(relayed, streamed, "the relay saw them in call order");
    let mut tokens: Vec<u64> = stored.iter().map(|r| r.fact.usage.input_tokens).collect();
    tokens.sort_unstable();
    assert_eq!(tokens, vec![100, 200, 300, 400]);
    for r in &stored {
        assert_eq!(
            (r.billing_account_id.as_str(), r.virtual_key_id.as_str()),
            ("acct-1", "vk-1")
        );
        assert_eq!(r.correlation.request_id, "req-42");
        assert_eq!(r.correlation.graph_run_id, run_id);
        assert_eq!(r.fact.usage.output_tokens * 10, r.fact.usage.input_tokens);
    }
    // The item itself, as SQL or `/store/items/search` show it: flat, keyed by the id.
    let items = Store::search(store.as_ref(), &["billing".to_owned()], SearchQuery::default())
        .await
        .unwrap();
    assert_eq!(items.len(), 4);
    let first = &items[0].item;
    assert_eq!(first.namespace, vec!["billing", "acct-1", "receipts"]);
    assert_eq!(first.value["invocation_id"], json!(first.key));
    assert_eq!(first.value["billing_account_id"], "acct-1");
    assert!(first.value["usage"]["input_tokens"].is_u64(), "{}", first.value);
}

/// A graph run the way `graphloom serve` starts it: a JSON context, no runtime.
async fn hosted_style_run(context: Value) -> (Arc<InMemoryStore>, String) {
    let store = Arc::new(InMemoryStore::new());
    let model = ScriptedModel::new([
        Reply::tool_call("knowledge_search", json!({"query": "a"})).with_usage(Usage::new(7, 3)),
        Reply::text("ok").with_usage(Usage::new(9, 4)),
    ]);
    let graph = chat_runtime::graph(Arc::new(InMemorySaver::new()), store.clone(), Arc::new(model)).unwrap();
    let run_id = "run-hosted-1".to_owned();
    graph
        .invoke(
            ChatStateUpdate::new().messages(vec![Message::human("q")]),
            RunConfig::thread("t-hosted")
                .run_id(run_id.clone())
                .context(context),
        )
        .await
        .unwrap();
    (store, run_id)
}

#[tokio::test]
async fn a_context_names_the_account_and_an_authenticated_identity_overrides_it() {
    // Auth off: the run's context names who pays.
    let (store, run_id) = hosted_style_run(json!({
        "billing_account_id": "acct.9", "virtual_key_id": "vk-9", "request_id": "req-9"
    }))
    .await;
    let receipts = StoreLedger::new(store.clone()).receipts("acct.9").await.unwrap();
    assert_eq!(receipts.len(), 2);
    for r in &receipts {
        assert_eq!(r.virtual_key_id, "vk-9");
        assert_eq!(r.correlation.request_id, "req-9");
        assert_eq!(r.correlation.trace_id, run_id, "no trace id given: the run's");
        assert_eq!(r.correlation.graph_run_id, run_id);
        assert_eq!(r.correlation.graph_name, chat_runtime::GRAPH_ID);
    }
    let tokens: BTreeSet<u64> = receipts.iter().map(|r| r.fact.usage.total_tokens).collect();
    assert_eq!(tokens, BTreeSet::from([10, 13]));

    // Auth on: the server's identity pays, whatever account the client's context names.
    let (store, _) = hosted_style_run(json!({
        "billing_account_id": "mallory",
        "langgraph_auth_user_id": "ann",
        "langgraph_auth_user": {"identity": "ann", "permissions": []},
    }))
    .await;
    let ledger = StoreLedger::new(store.clone());
    assert_eq!(ledger.receipts("ann").await.unwrap().len(), 2);
    assert!(ledger.receipts("mallory").await.unwrap().is_empty());
    // An authenticator's `billing_account_id` claim names the identity's account.
    let (store, _) = hosted_style_run(json!({
        "langgraph_auth_user_id": "ann",
        "langgraph_auth_user": {"identity": "ann", "billing_account_id": "team-red"},
    }))
    .await;
    let ledger = StoreLedger::new(store.clone());
    assert_eq!(ledger.receipts("team-red").await.unwrap().len(), 2);
    assert!(ledger.receipts("ann").await.unwrap().is_empty());
}

/// A store that never finishes the `nth` receipt write after doing it: the model node
/// never returns, so its checkpoint is never written, as when the process dies between
/// the receipt and the checkpoint.
struct StallAfterReceipt {
    inner: InMemoryStore,
    receipts: AtomicUsize,
    stall_at: AtomicUsize,
    stalled: Notify,
}

impl Store for StallAfterReceipt {
    fn get(
        &self,
        namespace: &[String],
        key: &str,
    ) -> impl Future<Output = graphloom_core::Result<Option<Item>>> + Send {
        Store::get(&self.inner, namespace, key)
    }
    fn put(
        &self,
        namespace: &[String],
        key: &str,
        value: Value,
        opts: PutOptions,
    ) -> impl Future<Output = graphloom_core::Result<()>> + Send {
        let receipt = namespace.first().is_some_and(|l| l == "billing");
        let namespace = namespace.to_vec();
        let key = key.to_owned();
        async move {
            Store::put(&self.inner, &namespace, &key, value, opts).await?;
            if receipt {
                let n = self.receipts.fetch_add(1, Ordering::SeqCst) + 1;
                if n == self.stall_at.load(Ordering::SeqCst) {
                    self.stalled.notify_one();
                    std::future::pending::<()>().await;
                }
            }
            Ok(())
        }
    }
    fn delete(
        &self,
        namespace: &[String],
        key: &str,
    ) -> impl Future<Output = graphloom_core::Result<()>> + Send {
        Store::delete(&self.inner, namespace, key)
    }
    fn search(
        &self,
        namespace_prefix: &[String],
        query: SearchQuery,
    ) -> impl Future<Output = graphloom_core::Result<Vec<SearchItem>>> + Send {
        Store::search(&self.inner, namespace_prefix, query)
    }
    fn list_namespaces(
        &self,
        opts: ListNamespaces,
    ) -> impl Future<Output = graphloom_core::Result<Vec<Vec<String>>>> + Send {
        Store::list_namespaces(&self.inner, opts)
    }
    fn sweep_expired(&self) -> impl Future<Output = graphloom_core::Result<usize>> + Send {
        Store::sweep_expired(&self.inner)
    }
}

#[tokio::test]
async fn a_run_cut_between_a_receipt_and_its_checkpoint_charges_each_call_once() {
    let store = Arc::new(StallAfterReceipt {
        inner: InMemoryStore::new(),
        receipts: AtomicUsize::new(0),
        stall_at: AtomicUsize::new(2),
        stalled: Notify::new(),
    });
    // The second call is made twice: once in the run that is cut, once when it continues.
    let model = ScriptedModel::new([
        Reply::tool_call("knowledge_search", json!({"query": "a"})).with_usage(Usage::new(100, 10)),
        Reply::text("first answer").with_usage(Usage::new(200, 20)),
        Reply::text("second answer").with_usage(Usage::new(250, 25)),
    ]);
    let saver = Arc::new(InMemorySaver::new());
    let graph = chat_runtime::graph(saver.clone(), store.clone(), Arc::new(model.clone())).unwrap();
    let cfg = RunConfig::thread("t-cut")
        .run_id("run-cut")
        .context(json!({"billing_account_id": "acct-cut"}));

    let first = tokio::spawn({
        let (graph, cfg) = (graph.clone(), cfg.clone());
        async move {
            graph
                .invoke(ChatStateUpdate::new().messages(vec![Message::human("q")]), cfg)
                .await
        }
    });
    tokio::time::timeout(Duration::from_secs(30), store.stalled.notified())
        .await
        .expect("the second receipt is written");
    // The process dies: the second call's receipt is stored, its checkpoint is not.
    first.abort();
    let _ = first.await;
    let ledger = StoreLedger::new(store.clone() as Arc<dyn DynStore>);
    let before = ledger.receipts("acct-cut").await.unwrap();
    assert_eq!(before.len(), 2);
    let state = graph.get_state(&cfg).await.unwrap();
    assert_eq!(
        state.values.messages.len(),
        3,
        "the checkpoint holds the question, the tool call and its result, not the answer"
    );

    // Continue from the checkpoint: the model node runs again, its call under the same id.
    store.stall_at.store(usize::MAX, Ordering::SeqCst);
    let out = tokio::time::timeout(Duration::from_secs(30), graph.invoke(None, cfg.clone()))
        .await
        .expect("the run continues")
        .unwrap();
    assert_eq!(out.values.messages.last().unwrap().text(), "second answer");
    assert_eq!(model.calls(), 3, "the cut call was made again");

    let after = ledger.receipts("acct-cut").await.unwrap();
    assert_eq!(
        after.len(),
        2,
        "one receipt per model call of the run: {after:#?}"
    );
    let ids = |rs: &[chat_runtime::ChargeReceipt]| -> BTreeSet<String> {
        rs.iter().map(|r| r.fact.invocation_id.clone()).collect()
    };
    assert_eq!(ids(&after), ids(&before), "the call kept its invocation id");
    let tokens: BTreeSet<u64> = after.iter().map(|r| r.fact.usage.input_tokens).collect();
    assert_eq!(
        tokens,
        BTreeSet::from([100, 250]),
        "the second call's receipt is the call the run kept"
    );
}
