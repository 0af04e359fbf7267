//! `default_model`: `GRAPHLOOM_MODEL` picks a real provider or, as `scripted` or unset, the
//! offline script; a model that cannot be built is an error, never the script.
//! One test in its own binary: it changes the process environment.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use graphloom_llm::{DynChatModel, ErrorKind};
use permit_filing::default_model;

#[test]
fn graphloom_model_selects_the_provider_scripted_the_script_and_a_bad_spec_an_error() {
    std::env::remove_var("GRAPHLOOM_MODEL");
    assert_eq!(default_model().unwrap().dyn_provider(), "scripted");

    std::env::set_var("GRAPHLOOM_MODEL", "scripted");
    assert_eq!(default_model().unwrap().dyn_provider(), "scripted");

    std::env::set_var("GRAPHLOOM_MODEL", "ollama:llama3.2");
    let m = default_model().unwrap();
    assert_eq!((m.dyn_provider(), m.dyn_model_name()), ("ollama", "llama3.2"));

    // A spec that cannot be built (no key) is an error naming the variable and the fix.
    std::env::remove_var("ANTHROPIC_API_KEY");
    std::env::set_var("GRAPHLOOM_MODEL", "anthropic:claude-3-5-haiku-latest");
    let err = default_model()
        .err()
        .expect("a model without its key is an error");
    assert_eq!(err.kind(), ErrorKind::Config);
    let msg = err.to_string();
    assert!(
        msg.contains("GRAPHLOOM_MODEL=anthropic:claude-3-5-haiku-latest cannot be used")
            && msg.contains("ANTHROPIC_API_KEY")
            && msg.contains("GRAPHLOOM_MODEL=scripted"),
        "{msg}"
    );

    // So is a model string naming no provider.
    std::env::set_var("GRAPHLOOM_MODEL", "gpt-4o");
    assert!(default_model().is_err());
    std::env::remove_var("GRAPHLOOM_MODEL");
}
