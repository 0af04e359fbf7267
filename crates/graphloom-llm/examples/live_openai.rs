//! Opt-in check against a real OpenAI-compatible endpoint: invoke, stream, a tool call and
//! structured output, with usage and cost.
//!
//! It is an example, not a test, so that CI (which has no key and no network) never counts
//! it as skipped. Run it yourself:
//!
//! ```text
//! OPENAI_API_KEY=sk-... cargo run -p graphloom-llm --example live_openai
//! OPENAI_BASE_URL=http://127.0.0.1:11434/v1 LIVE_MODEL=llama3.2 cargo run -p graphloom-llm --example live_openai
//! ```
//!
//! `LIVE_MODEL` picks the model (default `gpt-4o-mini`). With only `OPENAI_BASE_URL` set the
//! endpoint is used as `openai-compatible` (no key needed, as for Ollama or vLLM).

use anyhow::{bail, Context};
use futures::StreamExt;
use graphloom_llm::{
    Budget, BudgetedModel, ChatModel, ChatModelExt, ChatOptions, Message, MessageExt, ModelSpec, ToolChoice,
    ToolSpec, UsageTracker,
};
use std::process::ExitCode;

#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
struct Capital {
    /// The country.
    country: String,
    /// Its capital city.
    capital: String,
}

#[tokio::main]
async fn main() -> ExitCode {
    match run().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("live_openai: {e:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run() -> anyhow::Result<()> {
    let has_key = std::env::var("OPENAI_API_KEY").is_ok_and(|k| !k.is_empty());
    let has_base = std::env::var("OPENAI_BASE_URL").is_ok_and(|k| !k.is_empty());
    if !has_key && !has_base {
        bail!("set OPENAI_API_KEY (OpenAI) or OPENAI_BASE_URL (any compatible server) to run this check");
    }
    let model_name = std::env::var("LIVE_MODEL").unwrap_or_else(|_| "gpt-4o-mini".to_owned());
    let provider = if has_key { "openai" } else { "openai-compatible" };
    let spec = ModelSpec::parse(&format!("{provider}:{model_name}"))?;
    let tracker = UsageTracker::shared();
    let model = BudgetedModel::new(spec.build()?, tracker.clone(), Budget::unlimited().calls(10));
    let opts = ChatOptions::new().temperature(0.0).max_tokens(200);

    let hello = model
        .invoke(&[Message::human("Say hello in three words.")], &opts)
        .await
        .context("invoke")?;
    println!("invoke: {:?} usage={:?}", hello.text(), hello.usage());

    let mut stream = model.stream(&[Message::human("Count from 1 to 5.")], &opts);
    let mut streamed = String::new();
    while let Some(chunk) = stream.next().await {
        streamed.push_str(&chunk.context("stream")?.text);
    }
    println!("stream: {streamed:?}");

    let weather = ToolSpec::new(
        "get_weather",
        "Current weather for a city",
        serde_json::json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}),
    );
    let call = model
        .invoke(
            &[Message::human("What's the weather in Oslo?")],
            &opts.clone().tools([weather]).tool_choice(ToolChoice::Required),
        )
        .await
        .context("tool call")?;
    println!("tool calls: {:?}", call.tool_calls);

    let capital: Capital = model
        .invoke_structured(&[Message::human("What is the capital of France?")], &opts)
        .await
        .context("structured output")?;
    println!(
        "structured: the capital of {} is {}",
        capital.country, capital.capital
    );

    let t = tracker.totals();
    println!(
        "totals: {} calls, {} input + {} output tokens, ${:.6}",
        t.calls, t.input_tokens, t.output_tokens, t.cost_usd
    );
    Ok(())
}
