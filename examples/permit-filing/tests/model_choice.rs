//! `default_model`: `GRAPHLOOM_MODEL` picks a real provider, otherwise the offline script.
//! One test in its own binary: it changes the process environment.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use graphloom_llm::DynChatModel;
use permit_filing::default_model;

#[test]
fn graphloom_model_selects_the_provider_and_its_absence_the_script() {
    std::env::remove_var("GRAPHLOOM_MODEL");
    let m = default_model();
    assert_eq!(m.dyn_provider(), "scripted");

    std::env::set_var("GRAPHLOOM_MODEL", "ollama:llama3.2");
    let m = default_model();
    assert_eq!((m.dyn_provider(), m.dyn_model_name()), ("ollama", "llama3.2"));

    // A spec that cannot be built (no key) falls back to the script instead of failing.
    std::env::remove_var("ANTHROPIC_API_KEY");
    std::env::set_var("GRAPHLOOM_MODEL", "anthropic:claude-3-5-haiku-latest");
    assert_eq!(default_model().dyn_provider(), "scripted");
    std::env::remove_var("GRAPHLOOM_MODEL");
}
