//! `graphloom serve --jwt-secret`: a bearer JWT signed with the secret acts as its `sub`,
//! anything else is a 401; conflicting or weak auth options stop the command at start.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::json;
use std::process::Stdio;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;

const SECRET: &str = "a secret for the serve test, 32+ bytes";

fn graphloom(dir: &std::path::Path, args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_graphloom"));
    c.current_dir(dir)
        .env_remove("GRAPHLOOM_MODEL")
        .args(args)
        .kill_on_drop(true);
    c
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_takes_bearer_jwts_signed_with_the_secret() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = graphloom(
        dir.path(),
        &[
            "serve",
            "--db",
            "g.db",
            "--addr",
            "127.0.0.1:0",
            "--jwt-secret",
            SECRET,
            "--jwt-issuer",
            "id.test",
        ],
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::null())
    .spawn()
    .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let url = tokio::time::timeout(Duration::from_secs(60), async {
        while let Some(line) = lines.next_line().await.unwrap() {
            if let Some(rest) = line.strip_prefix("graphloom listening on ") {
                return rest.split_whitespace().next().unwrap().to_owned();
            }
        }
        panic!("graphloom serve ended before listening");
    })
    .await
    .unwrap();
    let exp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        + 600;
    let token = |iss: &str| {
        jsonwebtoken::encode(
            &jsonwebtoken::Header::default(),
            &json!({"sub": "ann", "iss": iss, "exp": exp}),
            &jsonwebtoken::EncodingKey::from_secret(SECRET.as_bytes()),
        )
        .unwrap()
    };
    let http = reqwest::Client::new();
    let post = |t: String| {
        http.post(format!("{url}/threads"))
            .bearer_auth(t)
            .json(&json!({}))
            .send()
    };
    assert_eq!(post(token("id.test")).await.unwrap().status().as_u16(), 200);
    assert_eq!(post(token("evil.test")).await.unwrap().status().as_u16(), 401);
    let r = http
        .post(format!("{url}/threads"))
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 401);
    child.kill().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_refuses_auth_options_that_do_not_fit() {
    let dir = tempfile::tempdir().unwrap();
    for (args, says) in [
        (vec!["--jwt-secret", "short"], "at least 32 bytes"),
        (
            vec!["--jwt-secret", SECRET, "--api-key", "k=ann"],
            "choose one of --api-key",
        ),
        (vec!["--jwt-issuer", "x"], "need --jwt-secret or --jwt-jwks"),
        (vec!["--jwt-jwks", "missing.json"], "--jwt-jwks missing.json"),
    ] {
        let mut all = vec!["serve", "--db", "g.db", "--addr", "127.0.0.1:0"];
        all.extend(args.iter().copied());
        let out = tokio::time::timeout(Duration::from_secs(60), graphloom(dir.path(), &all).output())
            .await
            .unwrap()
            .unwrap();
        assert!(!out.status.success(), "{args:?} started");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(says), "{args:?}: {err}");
    }
}
