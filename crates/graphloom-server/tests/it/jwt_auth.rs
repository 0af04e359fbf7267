//! Bearer JWTs ([`Jwt`]): HS256 with a shared secret and RS256 with a JWKS file. A good
//! token acts as its `sub` (each subject sees only its own threads); a token expired,
//! not yet valid, signed with another key, from another issuer, or naming another
//! algorithm (`none` included) is a 401 saying why, and nothing is created. The HS256
//! checks run on SQLite and on PostgreSQL.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::{split, TestServer};
use graphloom_server::auth::Jwt;
use jsonwebtoken::{encode, Algorithm, EncodingKey, Header};
use serde_json::{json, Value};
use std::path::PathBuf;

const SECRET: &str = "a test secret that is long enough for HS256";

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

fn now() -> i64 {
    i64::try_from(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs(),
    )
    .unwrap()
}

fn hs(claims: &Value, secret: &str) -> String {
    encode(
        &Header::new(Algorithm::HS256),
        claims,
        &EncodingKey::from_secret(secret.as_bytes()),
    )
    .unwrap()
}

fn rs(claims: &Value, kid: Option<&str>) -> String {
    let pem = std::fs::read(fixture("jwt_rs256_test_key.pem")).unwrap();
    let mut h = Header::new(Algorithm::RS256);
    h.kid = kid.map(str::to_owned);
    encode(&h, claims, &EncodingKey::from_rsa_pem(&pem).unwrap()).unwrap()
}

/// An unsigned token (`alg: none`) with these claims.
fn unsigned(claims: &Value) -> String {
    format!("{}.{}.", b64(&json!({"alg": "none", "typ": "JWT"})), b64(claims))
}

/// Base64url without padding, of a value's JSON.
fn b64(v: &Value) -> String {
    const ABC: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let bytes = v.to_string().into_bytes();
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | (u32::from(*b) << (16 - 8 * i)));
        for i in 0..=chunk.len() {
            out.push(char::from(ABC[((n >> (18 - 6 * i)) & 63) as usize]));
        }
    }
    out
}

async fn with_token(
    s: &TestServer,
    token: &str,
    method: reqwest::Method,
    path: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let mut rb = s.http.request(method, s.u(path)).bearer_auth(token);
    if let Some(b) = body {
        rb = rb.json(&b);
    }
    split(rb.send().await.unwrap()).await
}

async fn thread_count(s: &TestServer, token: &str) -> u64 {
    let (st, n) = with_token(s, token, reqwest::Method::POST, "/threads/count", Some(json!({}))).await;
    assert_eq!(st, 200, "{n}");
    n.as_u64().unwrap()
}

/// Every bad token is refused with a 401 naming why, and creates nothing.
async fn refuses(s: &TestServer, good: &str, bad: &[(String, &str)]) {
    for (token, why) in bad {
        let (st, b) = with_token(s, token, reqwest::Method::POST, "/threads", Some(json!({}))).await;
        assert_eq!(st, 401, "{why}: {b}");
        assert!(b["detail"].as_str().unwrap().contains(why), "{why}: {b}");
    }
    let (st, _) = split(
        s.http
            .post(s.u("/threads"))
            .json(&json!({}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(st, 401);
    assert_eq!(thread_count(s, good).await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hs256_tokens_act_as_their_subject_and_bad_ones_are_refused() {
    hs256_checks(
        TestServer::sqlite_with(|_| {}, |b| b.auth(Jwt::hs256(SECRET).issuer("https://id.test"))).await,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hs256_tokens_act_as_their_subject_on_postgres() {
    let (url, _db) = graphloom_postgres::testing::test_database().await;
    let cfg = graphloom_server::ServerConfig::postgres(url);
    hs256_checks(TestServer::start_with(cfg, |b| b.auth(Jwt::hs256(SECRET).issuer("https://id.test"))).await)
        .await;
}

/// Good HS256 tokens act as their subject (each sees only its own threads, and the identity
/// reaches the run's config); every bad one is refused with a 401 and creates nothing.
async fn hs256_checks(s: TestServer) {
    let claims = |sub: &str, exp: i64| json!({"sub": sub, "iss": "https://id.test", "exp": exp, "scope": "read write"});
    let ann = hs(&claims("ann", now() + 600), SECRET);
    let bob = hs(&claims("bob", now() + 600), SECRET);
    refuses(
        &s,
        &ann,
        &[
            (hs(&claims("ann", now() - 3600), SECRET), "expired"),
            (hs(&claims("ann", now() + 600), "another secret, also long enough"), "signature"),
            (unsigned(&claims("ann", now() + 600)), "invalid token"),
            (rs(&claims("ann", now() + 600), None), "algorithm"),
            (
                hs(&json!({"sub": "ann", "iss": "https://evil.test", "exp": now() + 600}), SECRET),
                "issuer",
            ),
            (hs(&json!({"sub": "ann", "iss": "https://id.test"}), SECRET), "claim"),
            (
                hs(&json!({"sub": "ann", "iss": "https://id.test", "exp": now() + 7200, "nbf": now() + 3600}), SECRET),
                "not valid yet",
            ),
            (hs(&json!({"iss": "https://id.test", "exp": now() + 600}), SECRET), "sub"),
            ("not-a-jwt".to_owned(), "invalid token"),
        ],
    )
    .await;
    let (st, t) = with_token(&s, &ann, reqwest::Method::POST, "/threads", Some(json!({}))).await;
    assert_eq!(st, 200, "{t}");
    let id = t["thread_id"].as_str().unwrap();
    let (st, _) = with_token(&s, &ann, reqwest::Method::GET, &format!("/threads/{id}"), None).await;
    assert_eq!(st, 200);
    let (st, _) = with_token(&s, &bob, reqwest::Method::GET, &format!("/threads/{id}"), None).await;
    assert_eq!(st, 404);
    assert_eq!(thread_count(&s, &bob).await, 0);
    // The identity, with the token's scopes as permissions, reaches the run's config.
    let (st, run) = with_token(
        &s,
        &ann,
        reqwest::Method::POST,
        &format!("/threads/{id}/runs"),
        Some(json!({"assistant_id": "echo", "input": common::human("hi")})),
    )
    .await;
    assert_eq!(st, 200, "{run}");
    let configurable = &run["kwargs"]["config"]["configurable"];
    assert_eq!(configurable["langgraph_auth_user_id"], "ann");
    assert_eq!(
        configurable["langgraph_auth_permissions"],
        json!(["read", "write"])
    );
    assert_eq!(configurable["langgraph_auth_user"]["iss"], "https://id.test");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rs256_tokens_are_checked_against_the_jwks_file() {
    let jwt = Jwt::rs256_jwks_file(fixture("jwt_rs256_test_jwks.json"))
        .unwrap()
        .audience("graphloom");
    let s = TestServer::sqlite_with(|_| {}, |b| b.auth(jwt)).await;
    let claims =
        |exp: i64| json!({"sub": "ann", "aud": "graphloom", "exp": exp, "permissions": ["threads:write"]});
    let good = rs(&claims(now() + 600), Some("test-key-1"));
    refuses(
        &s,
        &good,
        &[
            (rs(&claims(now() - 3600), Some("test-key-1")), "expired"),
            (rs(&claims(now() + 600), Some("another-key")), "kid"),
            (hs(&claims(now() + 600), SECRET), "algorithm"),
            (unsigned(&claims(now() + 600)), "invalid token"),
            (
                rs(
                    &json!({"sub": "ann", "aud": "other", "exp": now() + 600}),
                    Some("test-key-1"),
                ),
                "audience",
            ),
            // A valid signature over other claims: the payload swapped.
            (
                {
                    let real = rs(&claims(now() + 600), Some("test-key-1"));
                    let other = rs(
                        &json!({"sub": "root", "aud": "graphloom", "exp": now() + 600}),
                        Some("test-key-1"),
                    );
                    let (h, rest) = real.split_once('.').unwrap();
                    let sig = rest.split_once('.').unwrap().1;
                    let payload = other.split('.').nth(1).unwrap();
                    format!("{h}.{payload}.{sig}")
                },
                "signature",
            ),
        ],
    )
    .await;
    // A token without a kid works with a set of one key.
    let no_kid = rs(&claims(now() + 600), None);
    let (st, t) = with_token(&s, &no_kid, reqwest::Method::POST, "/threads", Some(json!({}))).await;
    assert_eq!(st, 200, "{t}");
    assert_eq!(thread_count(&s, &good).await, 1);
    s.stop().await;
}

#[test]
fn a_jwks_without_rsa_keys_or_unreadable_is_an_error_at_setup() {
    assert!(Jwt::rs256_jwks(r#"{"keys": []}"#).is_err());
    assert!(Jwt::rs256_jwks("not json").is_err());
    assert!(Jwt::rs256_jwks_file(fixture("does-not-exist.json")).is_err());
    assert!(Jwt::rs256_jwks_file(fixture("jwt_rs256_test_jwks.json")).is_ok());
}
