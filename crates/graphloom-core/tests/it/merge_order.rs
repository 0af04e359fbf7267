//! The merged state does not depend on the order tasks finish in (proptest).
#![allow(clippy::unwrap_used, clippy::expect_used)]
use graphloom_core::*;
use proptest::prelude::*;
use std::collections::BTreeMap;
use std::time::Duration;

#[derive(State, Clone, Default, Debug, PartialEq)]
struct Acc {
    #[reducer(append)]
    order: Seq<String>,
    #[reducer(merge)]
    seen: BTreeMap<String, u64>,
    #[reducer(add)]
    sum: i64,
}

fn run_with_delays(delays: Vec<u64>) -> Acc {
    let mut g = StateGraph::<Acc>::new();
    for (i, d) in delays.iter().enumerate() {
        let name = format!("n{i:02}");
        let d = *d;
        let n = name.clone();
        g = g
            .add_node(name.clone(), move |_s, _rt| {
                let n = n.clone();
                async move {
                    tokio::time::sleep(Duration::from_millis(d)).await;
                    let mut seen = BTreeMap::new();
                    seen.insert("last".to_string(), d);
                    seen.insert(n.clone(), d);
                    Ok(AccUpdate::new()
                        .order(vec![n])
                        .seen(seen)
                        .sum(i64::try_from(d).unwrap_or(0)))
                }
            })
            .add_edge(START, name.clone())
            .add_edge(name, END);
    }
    let g = g.compile().unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        g.invoke(AccUpdate::new(), RunConfig::default())
            .await
            .unwrap()
            .values
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]
    #[test]
    fn random_completion_order_gives_the_same_state(delays in proptest::collection::vec(0u64..8, 2..8)) {
        let a = run_with_delays(delays.clone());
        let mut reversed = delays.clone();
        reversed.reverse();
        // Same nodes, opposite finishing order for distinct delays.
        let b = run_with_delays(delays.iter().map(|d| 8 - d).collect());
        let names: Vec<String> = (0..delays.len()).map(|i| format!("n{i:02}")).collect();
        prop_assert_eq!(a.order.to_vec(), names.clone());
        prop_assert_eq!(b.order.to_vec(), names);
        // A merge map takes the value of the last writer in node order, not finish order.
        prop_assert_eq!(a.seen.get("last").copied(), delays.last().copied());
        prop_assert_eq!(a.sum, delays.iter().map(|&d| i64::try_from(d).unwrap_or(0)).sum::<i64>());
        let _ = reversed;
    }
}
