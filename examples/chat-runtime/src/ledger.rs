//! Charge receipts kept in the graph's store: the billing consumer of every model call the
//! graph makes, whoever drives the run (the [`ChatRuntime`](crate::ChatRuntime) or
//! `graphloom serve`).
//!
//! Each model call writes one item, its [`ChargeReceipt`], under
//! `["billing", <billing account>, "receipts"]` with the call's invocation id as its key,
//! and the model node awaits that write before it returns its update: a checkpoint never
//! exists without the receipts of the calls it records. The invocation id is derived from
//! the node's task (`Runtime::idempotency_key`, stable across retries, resumes and a
//! server's crash and retake) and the call's index within the task, so a call made again
//! after a crash writes the same key: the put replaces the receipt of the attempt the crash
//! cut short instead of adding a second one. A run that completes has exactly one receipt
//! per model call it made. The same holds for a node retried after a failed call: its next
//! attempt's call replaces the failed call's receipt (a run is billed for the calls of each
//! task's last attempt).
//!
//! Hosted, the store is the server's (`GraphDeps::store`: the same SQLite or PostgreSQL
//! database as the runs and checkpoints), not the owner-scoped store a run sees with auth
//! on: receipts are the operator's record, which no client can overwrite or delete through
//! `/store`. With auth off they are readable at `POST /store/items/search` with
//! `{"namespace_prefix": ["billing"]}`; in every case with SQL (PostgreSQL: table
//! `graphloom_store`, JSONB `value`; SQLite: `store_items`; `prefix`
//! `billing.<account>.receipts`). Receipts are written without a vector index entry; a
//! store default TTL (`ServerConfig::retention.store_ttl`, off by default) applies to them
//! as to every item.

use crate::runtime::ChargeReceipt;
use graphloom_core::store::{DynStore, IndexFields, PutOptions, SearchQuery};
use graphloom_core::{BackendError, BackendErrorKind};
use std::sync::Arc;

/// The first label of every receipt namespace.
pub const BILLING_LABEL: &str = "billing";

/// The last label of every receipt namespace.
pub const RECEIPTS_LABEL: &str = "receipts";

/// A billing account as one namespace label: `.` (the namespace separator) and `%` are
/// percent-escaped, so `ann@example.com` is `ann@example%2Ecom`; an empty account is
/// `anonymous`.
#[must_use]
pub fn account_label(billing_account_id: &str) -> String {
    if billing_account_id.is_empty() {
        return "anonymous".to_owned();
    }
    billing_account_id.replace('%', "%25").replace('.', "%2E")
}

/// `["billing", <account label>, "receipts"]`.
#[must_use]
pub fn receipts_namespace(billing_account_id: &str) -> Vec<String> {
    vec![
        BILLING_LABEL.to_owned(),
        account_label(billing_account_id),
        RECEIPTS_LABEL.to_owned(),
    ]
}

/// Receipts in a store, one item per model call.
#[derive(Clone)]
pub struct StoreLedger {
    store: Arc<dyn DynStore>,
}

impl std::fmt::Debug for StoreLedger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreLedger").finish_non_exhaustive()
    }
}

impl StoreLedger {
    /// A ledger over `store`.
    #[must_use]
    pub fn new(store: Arc<dyn DynStore>) -> Self {
        Self { store }
    }

    /// Write `receipt` under its account, keyed by its invocation id (replacing a receipt
    /// with the same id: a call charges once however often it is recorded).
    ///
    /// # Errors
    /// The store's error (the write did not happen).
    pub async fn record(&self, receipt: &ChargeReceipt) -> graphloom_core::Result<()> {
        let value = serde_json::to_value(receipt).map_err(|e| {
            BackendError::caused_by(BackendErrorKind::InvalidInput, "a receipt that is not JSON", e)
        })?;
        self.store
            .put(
                &receipts_namespace(&receipt.billing_account_id),
                &receipt.fact.invocation_id,
                value,
                PutOptions::new().index(IndexFields::Skip),
            )
            .await
    }

    /// Every receipt of `billing_account_id`, in the order they were first written.
    ///
    /// # Errors
    /// The store's error, or an item under the account's namespace that is not a receipt.
    pub async fn receipts(&self, billing_account_id: &str) -> graphloom_core::Result<Vec<ChargeReceipt>> {
        const PAGE: usize = 100;
        let ns = receipts_namespace(billing_account_id);
        let mut items = Vec::new();
        loop {
            let page = self
                .store
                .search(
                    &ns,
                    SearchQuery {
                        limit: PAGE,
                        offset: items.len(),
                        refresh_ttl: Some(false),
                        ..SearchQuery::default()
                    },
                )
                .await?;
            let n = page.len();
            items.extend(page);
            if n < PAGE {
                break;
            }
        }
        // Searches come newest first; a receipt replaced after a crash keeps its first
        // write's `created_at`.
        items.sort_by(|a, b| {
            (&a.item.created_at, &a.item.updated_at).cmp(&(&b.item.created_at, &b.item.updated_at))
        });
        items
            .into_iter()
            .map(|i| {
                serde_json::from_value(i.item.value).map_err(|e| {
                    BackendError::caused_by(
                        BackendErrorKind::Corrupt,
                        format!("store item {:?} is not a charge receipt", i.item.key),
                        e,
                    )
                    .into()
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_account_is_one_label_whatever_it_holds() {
        assert_eq!(account_label("acct-7"), "acct-7");
        assert_eq!(account_label("ann@example.com"), "ann@example%2Ecom");
        assert_eq!(account_label("50%.x"), "50%25%2Ex");
        assert_eq!(account_label(""), "anonymous");
        graphloom_core::store::validate_namespace(&receipts_namespace("a.b.c")).unwrap();
    }
}
