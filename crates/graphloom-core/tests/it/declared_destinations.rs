//! Conditional edges with declared destinations (`add_conditional_edges_to`): drawn only
//! to those destinations in SVG and Mermaid, checked at compile time, enforced at run time.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use graphloom_core::draw::SvgOptions;
use graphloom_core::{checkpoint::InMemorySaver, Error, RunConfig, State, StateGraph, END, START};

#[derive(State, Clone, Default, Debug)]
struct Ticket {
    route: String,
}

fn graph(route_to: &'static str) -> StateGraph<Ticket> {
    StateGraph::<Ticket>::new()
        .add_node("triage", |_s, _rt| async { Ok(TicketUpdate::new()) })
        .add_node("answer", |_s, _rt| async { Ok(TicketUpdate::new()) })
        .add_node("escalate", |_s, _rt| async { Ok(TicketUpdate::new()) })
        .add_node("audit", |_s, _rt| async { Ok(TicketUpdate::new()) })
        .add_edge(START, "triage")
        .add_conditional_edges_to("triage", move |_s: &Ticket| route_to, ["answer", "escalate"])
        .add_edge("answer", END)
        .add_edge("escalate", "audit")
        .add_edge("audit", END)
}

#[test]
fn only_declared_destinations_are_drawn() {
    let g = graph("answer").compile().unwrap();
    let conditional: Vec<(String, String)> = g
        .edges()
        .into_iter()
        .filter(|e| e.2)
        .map(|(a, b, _)| (a, b))
        .collect();
    assert_eq!(
        conditional,
        vec![
            ("triage".into(), "answer".into()),
            ("triage".into(), "escalate".into())
        ]
    );
    let m = g.draw_mermaid();
    assert_eq!(m.matches("-.->").count(), 2, "{m}");
    let svg = g.draw_svg(&SvgOptions::new());
    assert_eq!(svg.matches("gl-conditional").count(), 2, "{svg}");
    for n in ["__start__", "triage", "answer", "escalate", "audit", "__end__"] {
        assert!(svg.contains(&format!("data-node=\"{n}\"")), "{n}");
    }
    // Boxes follow the order the nodes were added: audit is drawn below escalate.
    let y = |node: &str| -> f64 {
        let at = svg.find(&format!("data-node=\"{node}\"")).unwrap();
        let rest = &svg[at..];
        let y = rest.find(" y=\"").unwrap() + 4;
        rest[y..y + rest[y..].find('"').unwrap()].parse().unwrap()
    };
    assert!(y("triage") < y("escalate") && y("escalate") < y("audit") && y("audit") < y("__end__"));
}

#[test]
fn an_unknown_destination_is_a_compile_error() {
    let err = StateGraph::<Ticket>::new()
        .add_node("triage", |_s, _rt| async { Ok(TicketUpdate::new()) })
        .add_edge(START, "triage")
        .add_conditional_edges_to("triage", |_s: &Ticket| END, ["nowhere", END])
        .compile()
        .err()
        .expect("refused");
    assert!(err.to_string().contains("nowhere"), "{err}");
}

#[tokio::test]
async fn a_router_that_leaves_its_destinations_fails_the_run() {
    let ok = graph("escalate")
        .checkpointer(InMemorySaver::new())
        .compile()
        .unwrap();
    ok.invoke(TicketUpdate::new(), RunConfig::thread("t1"))
        .await
        .unwrap();
    let bad = graph("audit")
        .checkpointer(InMemorySaver::new())
        .compile()
        .unwrap();
    let Err(err) = bad.invoke(TicketUpdate::new(), RunConfig::thread("t1")).await else {
        panic!("a router going to an undeclared node fails the run");
    };
    assert!(
        matches!(err, Error::UnknownNode(ref m) if m.contains("audit")),
        "{err}"
    );
}
