//! The bundled transaction data set (`data/transactions.json`, compiled in with
//! `include_str!`) and the per-transaction risk signals the tools derive from it.
//!
//! Amounts are compared in each transaction's own currency units against the account's
//! typical amount: the data set is small and synthetic, so no currency conversion is done.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

/// The data set's JSON text.
pub const BUNDLED_JSON: &str = include_str!("../data/transactions.json");

/// Amounts at or below this are "test" charges (card testing).
pub const SMALL_AMOUNT: f64 = 2.0;
/// Window for velocity and card-testing signals, in seconds.
pub const VELOCITY_WINDOW_SECS: i64 = 60 * 60;
/// Two card-present transactions in different countries closer than this are impossible
/// travel, in seconds.
pub const IMPOSSIBLE_TRAVEL_SECS: i64 = 6 * 60 * 60;
/// A device first seen less than this long ago does not count as known, in seconds.
pub const DEVICE_TRUST_SECS: i64 = 24 * 60 * 60;

/// A customer account.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Account {
    /// Id.
    pub account_id: String,
    /// Holder's name.
    pub customer_name: String,
    /// ISO country code of the holder's residence.
    pub home_country: String,
    /// Customer since (date).
    pub customer_since: String,
    /// A typical purchase amount.
    pub typical_amount: f64,
}

/// A payment card.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Card {
    /// Id.
    pub card_id: String,
    /// Owning account.
    pub account_id: String,
    /// Devices the holder enrolled or used for a long time.
    pub known_devices: Vec<String>,
}

/// A merchant.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Merchant {
    /// Id.
    pub merchant_id: String,
    /// Display name. **Untrusted text**: it comes from the acquirer and may contain
    /// anything, including instructions aimed at a language model.
    pub name: String,
    /// Merchant category code.
    pub mcc: String,
    /// Category name.
    pub category: String,
    /// Country of the merchant.
    pub country: String,
}

/// A card transaction.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Transaction {
    /// Id.
    pub transaction_id: String,
    /// Card used.
    pub card_id: String,
    /// Merchant.
    pub merchant_id: String,
    /// Amount.
    pub amount: f64,
    /// Currency.
    pub currency: String,
    /// When (RFC 3339, UTC, `Z`).
    pub timestamp: String,
    /// `card_present` or `ecommerce`.
    pub channel: String,
    /// Where it happened (terminal country, or IP country online).
    pub country: String,
    /// Device id (online transactions).
    pub device_id: Option<String>,
    /// `fraud` or `legit` for closed cases; `None` for open ones.
    pub label: Option<String>,
}

impl Transaction {
    /// True for online (card-not-present) transactions.
    #[must_use]
    pub fn is_ecommerce(&self) -> bool {
        self.channel == "ecommerce"
    }
    /// Seconds since the Unix epoch (0 when the timestamp does not parse).
    #[must_use]
    pub fn epoch(&self) -> i64 {
        parse_epoch(&self.timestamp).unwrap_or(0)
    }
}

/// The whole data set.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Dataset {
    /// What it is.
    pub description: String,
    /// Merchant category codes that are often used to monetise stolen cards.
    pub high_risk_mccs: Vec<String>,
    /// Accounts.
    pub accounts: Vec<Account>,
    /// Cards.
    pub cards: Vec<Card>,
    /// Merchants.
    pub merchants: Vec<Merchant>,
    /// Transactions, in any order.
    pub transactions: Vec<Transaction>,
}

/// The data set could not be read.
#[derive(Debug, thiserror::Error)]
pub enum DataError {
    /// The JSON does not parse.
    #[error("the transaction data set does not parse: {0}")]
    Parse(#[from] serde_json::Error),
    /// A reference points nowhere.
    #[error("the transaction data set is inconsistent: {0}")]
    Inconsistent(String),
}

/// What the tools derive from one transaction and the card's earlier activity.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TxSignals {
    /// Amount divided by the account's typical amount.
    pub amount_ratio: f64,
    /// Online transaction.
    pub ecommerce: bool,
    /// Transaction country differs from the holder's home country.
    pub foreign: bool,
    /// For online transactions: whether the device is enrolled or was used on the card
    /// more than a day earlier. `None` for card-present transactions.
    pub device_known: Option<bool>,
    /// Merchant category is high risk.
    pub high_risk_mcc: bool,
    /// Between 00:00 and 06:00 UTC.
    pub night: bool,
    /// Earlier charges of at most [`SMALL_AMOUNT`] in the hour before.
    pub small_txn_count_1h: u32,
    /// Transactions on the card in the hour up to and including this one.
    pub txn_count_1h: u32,
    /// An earlier card-present transaction in another country within
    /// [`IMPOSSIBLE_TRAVEL_SECS`]: (its id, its country, hours between).
    pub impossible_travel: Option<(String, String, f64)>,
}

impl TxSignals {
    /// The signals as a vector for similarity search (every component in `[0, 1]`).
    #[must_use]
    pub fn vector(&self) -> Vec<f32> {
        let b = |x: bool| if x { 1.0f32 } else { 0.0 };
        #[allow(clippy::cast_possible_truncation)]
        let ratio = (self.amount_ratio.min(20.0) / 20.0) as f32;
        vec![
            ratio,
            b(self.ecommerce),
            b(!self.ecommerce),
            b(self.foreign),
            b(self.device_known == Some(false)),
            b(self.high_risk_mcc),
            b(self.night),
            (self.small_txn_count_1h.min(3) as f32) / 3.0,
            b(self.impossible_travel.is_some()),
        ]
    }
}

/// Seconds since the Unix epoch of an RFC 3339 UTC timestamp such as
/// `2026-02-18T02:24:00Z` (fractions and a `+00:00` offset are accepted).
#[must_use]
pub fn parse_epoch(ts: &str) -> Option<i64> {
    let b = ts.as_bytes();
    if b.len() < 19 || b[4] != b'-' || b[7] != b'-' || b[10] != b'T' || b[13] != b':' || b[16] != b':' {
        return None;
    }
    let num = |r: std::ops::Range<usize>| ts.get(r)?.parse::<i64>().ok();
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, s) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || s > 60 {
        return None;
    }
    // Days from civil (Howard Hinnant's algorithm).
    let y = if mo <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (mo + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(days * 86_400 + h * 3600 + mi * 60 + s)
}

impl Dataset {
    /// Parse and check a data set.
    ///
    /// # Errors
    /// When the JSON does not parse or a card, account or merchant reference is dangling.
    pub fn from_json(text: &str) -> Result<Self, DataError> {
        let ds: Dataset = serde_json::from_str(text)?;
        for t in &ds.transactions {
            let card = ds.card(&t.card_id).ok_or_else(|| {
                DataError::Inconsistent(format!("{}: unknown card {}", t.transaction_id, t.card_id))
            })?;
            ds.account(&card.account_id).ok_or_else(|| {
                DataError::Inconsistent(format!("{}: unknown account {}", card.card_id, card.account_id))
            })?;
            ds.merchant(&t.merchant_id).ok_or_else(|| {
                DataError::Inconsistent(format!(
                    "{}: unknown merchant {}",
                    t.transaction_id, t.merchant_id
                ))
            })?;
            if parse_epoch(&t.timestamp).is_none() {
                return Err(DataError::Inconsistent(format!(
                    "{}: bad timestamp {}",
                    t.transaction_id, t.timestamp
                )));
            }
        }
        Ok(ds)
    }

    /// The bundled data set, parsed once.
    ///
    /// # Errors
    /// When the bundled file is broken (a test checks that it is not).
    pub fn bundled() -> Result<Arc<Dataset>, DataError> {
        static CELL: OnceLock<Result<Arc<Dataset>, String>> = OnceLock::new();
        CELL.get_or_init(|| {
            Dataset::from_json(BUNDLED_JSON)
                .map(Arc::new)
                .map_err(|e| e.to_string())
        })
        .clone()
        .map_err(DataError::Inconsistent)
    }

    /// A transaction by id.
    #[must_use]
    pub fn transaction(&self, id: &str) -> Option<&Transaction> {
        self.transactions.iter().find(|t| t.transaction_id == id)
    }
    /// A card by id.
    #[must_use]
    pub fn card(&self, id: &str) -> Option<&Card> {
        self.cards.iter().find(|c| c.card_id == id)
    }
    /// An account by id.
    #[must_use]
    pub fn account(&self, id: &str) -> Option<&Account> {
        self.accounts.iter().find(|a| a.account_id == id)
    }
    /// A merchant by id.
    #[must_use]
    pub fn merchant(&self, id: &str) -> Option<&Merchant> {
        self.merchants.iter().find(|m| m.merchant_id == id)
    }
    /// The account holding `card_id`.
    #[must_use]
    pub fn account_of_card(&self, card_id: &str) -> Option<&Account> {
        self.account(&self.card(card_id)?.account_id)
    }
    /// Transactions of the same card strictly before `tx`, oldest first.
    #[must_use]
    pub fn prior_on_card(&self, tx: &Transaction) -> Vec<&Transaction> {
        let at = tx.epoch();
        let mut v: Vec<&Transaction> = self
            .transactions
            .iter()
            .filter(|t| t.card_id == tx.card_id && t.transaction_id != tx.transaction_id && t.epoch() < at)
            .collect();
        v.sort_by_key(|t| t.epoch());
        v
    }
    /// Open transactions (no label): the ones worth investigating.
    pub fn open_transactions(&self) -> impl Iterator<Item = &Transaction> {
        self.transactions.iter().filter(|t| t.label.is_none())
    }
    /// Closed (labelled) transactions.
    pub fn labelled(&self) -> impl Iterator<Item = &Transaction> {
        self.transactions.iter().filter(|t| t.label.is_some())
    }

    /// The risk signals of `tx` given the card's earlier activity.
    #[must_use]
    pub fn signals(&self, tx: &Transaction) -> TxSignals {
        let at = tx.epoch();
        let account = self.account_of_card(&tx.card_id);
        let home = account.map_or("", |a| a.home_country.as_str());
        let typical = account.map_or(1.0, |a| a.typical_amount).max(1.0);
        let merchant = self.merchant(&tx.merchant_id);
        let prior = self.prior_on_card(tx);
        let in_hour: Vec<&&Transaction> = prior
            .iter()
            .filter(|t| at - t.epoch() <= VELOCITY_WINDOW_SECS)
            .collect();
        let device_known = if tx.is_ecommerce() {
            let enrolled = self
                .card(&tx.card_id)
                .is_some_and(|c| tx.device_id.as_ref().is_some_and(|d| c.known_devices.contains(d)));
            let long_used = prior.iter().any(|t| {
                t.device_id.is_some() && t.device_id == tx.device_id && at - t.epoch() > DEVICE_TRUST_SECS
            });
            Some(enrolled || long_used)
        } else {
            None
        };
        let impossible_travel = if tx.is_ecommerce() {
            None
        } else {
            prior
                .iter()
                .rev()
                .filter(|t| !t.is_ecommerce() && t.country != tx.country)
                .find(|t| at - t.epoch() < IMPOSSIBLE_TRAVEL_SECS)
                .map(|t| {
                    #[allow(clippy::cast_precision_loss)]
                    let hours = (at - t.epoch()) as f64 / 3600.0;
                    (
                        t.transaction_id.clone(),
                        t.country.clone(),
                        (hours * 10.0).round() / 10.0,
                    )
                })
        };
        let hour = at.rem_euclid(86_400) / 3600;
        TxSignals {
            amount_ratio: (tx.amount / typical * 100.0).round() / 100.0,
            ecommerce: tx.is_ecommerce(),
            foreign: !home.is_empty() && tx.country != home,
            device_known,
            high_risk_mcc: merchant.is_some_and(|m| self.high_risk_mccs.contains(&m.mcc)),
            night: hour < 6,
            small_txn_count_1h: u32::try_from(in_hour.iter().filter(|t| t.amount <= SMALL_AMOUNT).count())
                .unwrap_or(u32::MAX),
            txn_count_1h: u32::try_from(in_hour.len() + 1).unwrap_or(u32::MAX),
            impossible_travel,
        }
    }

    /// Counts of labelled transactions by label.
    #[must_use]
    pub fn label_counts(&self) -> BTreeMap<String, usize> {
        let mut m = BTreeMap::new();
        for t in self.labelled() {
            if let Some(l) = &t.label {
                *m.entry(l.clone()).or_default() += 1;
            }
        }
        m
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bundled_data_parses_and_is_consistent() {
        let ds = Dataset::bundled().unwrap();
        assert!(ds.transactions.len() >= 30);
        assert!(ds.open_transactions().count() >= 4);
        let counts = ds.label_counts();
        assert!(counts["fraud"] >= 5 && counts["legit"] >= 10, "{counts:?}");
    }

    #[test]
    fn epoch_parsing() {
        assert_eq!(parse_epoch("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(parse_epoch("2026-02-18T02:24:00Z"), Some(1_771_381_440));
        assert_eq!(parse_epoch("2000-03-01T00:00:00.123+00:00"), Some(951_868_800));
        assert_eq!(parse_epoch("yesterday"), None);
        assert_eq!(parse_epoch("2026-13-01T00:00:00Z"), None);
    }

    #[test]
    fn signals_of_the_card_testing_burst() {
        let ds = Dataset::bundled().unwrap();
        let tx = ds.transaction("TX-1009").unwrap();
        let s = ds.signals(tx);
        assert_eq!(s.small_txn_count_1h, 3);
        assert_eq!(s.txn_count_1h, 4);
        assert_eq!(
            s.device_known,
            Some(false),
            "a device first seen 15 minutes ago is not trusted"
        );
        assert!(s.foreign && s.high_risk_mcc && s.night && s.ecommerce);
        assert!(s.amount_ratio > 20.0);
    }

    #[test]
    fn signals_of_impossible_travel_and_a_normal_dinner() {
        let ds = Dataset::bundled().unwrap();
        let s = ds.signals(ds.transaction("TX-3004").unwrap());
        let (prior, country, hours) = s.impossible_travel.clone().unwrap();
        assert_eq!((prior.as_str(), country.as_str()), ("TX-3003", "GB"));
        assert!((hours - 2.5).abs() < 1e-9);
        let dinner = ds.signals(ds.transaction("TX-2004").unwrap());
        assert!(!dinner.foreign && !dinner.high_risk_mcc && dinner.impossible_travel.is_none());
        assert!(dinner.amount_ratio < 3.0);
    }
}
