//! A server that cannot start says why, with the cause kept as the error's source.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use graphloom_server::{ConfigError, GraphDeps, GraphFactory, Server, ServerConfig, StartError};
use std::error::Error as _;
use std::sync::Arc;
use std::time::Duration;

async fn start_error(builder: graphloom_server::ServerBuilder) -> StartError {
    match builder.build().await {
        Ok(_) => panic!("the server started"),
        Err(e) => e,
    }
}

#[tokio::test]
async fn a_graph_that_does_not_compile_is_named_with_its_error() {
    let dir = tempfile::tempdir().unwrap();
    let broken: GraphFactory = Arc::new(|_: &GraphDeps| {
        Err(graphloom_core::Error::InvalidGraph(
            "node `a` has no way out".into(),
        ))
    });
    let e =
        start_error(Server::builder(ServerConfig::sqlite(dir.path().join("g.db"))).graph("planner", broken))
            .await;
    assert!(
        matches!(&e, StartError::Graph { graph_id, .. } if graph_id == "planner"),
        "{e:?}"
    );
    assert_eq!(
        e.to_string(),
        "server start: graph `planner`: invalid graph: node `a` has no way out"
    );
    let cause = e.source().and_then(|s| s.downcast_ref::<graphloom_core::Error>());
    assert!(
        matches!(cause, Some(graphloom_core::Error::InvalidGraph(_))),
        "{e:?}"
    );
}

#[tokio::test]
async fn a_database_directory_that_cannot_be_made_keeps_the_io_error() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("not-a-dir");
    std::fs::write(&file, b"x").unwrap();
    let e = start_error(Server::builder(ServerConfig::sqlite(file.join("g.db")))).await;
    assert!(
        matches!(&e, StartError::CreateDir { path, .. } if *path == file),
        "{e:?}"
    );
    assert!(
        e.source()
            .and_then(|s| s.downcast_ref::<std::io::Error>())
            .is_some(),
        "{e:?}"
    );
}

#[tokio::test]
async fn settings_that_disagree_are_a_config_error() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = ServerConfig::sqlite(dir.path().join("g.db"));
    cfg.lease = Duration::ZERO;
    let e = start_error(Server::builder(cfg)).await;
    assert!(matches!(e, StartError::Config(ConfigError::ZeroLease)), "{e:?}");
    let mut cfg = ServerConfig::sqlite(dir.path().join("g.db"));
    cfg.heartbeat = Some(cfg.lease);
    assert!(matches!(
        cfg.validate(),
        Err(ConfigError::Heartbeat { heartbeat, lease }) if heartbeat == lease
    ));
}

#[tokio::test]
async fn a_postgres_url_that_does_not_parse_keeps_the_storage_error() {
    // An SSL mode PostgreSQL does not have: refused before any connection.
    let url = "postgres://nobody@127.0.0.1:1/none?sslmode=sometimes";
    let e = start_error(Server::builder(ServerConfig::postgres(url))).await;
    assert!(matches!(&e, StartError::Storage { .. }), "{e:?}");
    assert!(
        e.source()
            .and_then(|s| s.downcast_ref::<graphloom_core::Error>())
            .is_some(),
        "{e:?}"
    );
}
