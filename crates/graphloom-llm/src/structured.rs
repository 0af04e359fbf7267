//! Structured output: a Rust type's JSON Schema out, a validated value of that type back.

use crate::error::{truncate_raw, Error, Result};
use crate::options::{provider_schema, ResponseFormat};
use graphloom_core::Message;
use serde::de::DeserializeOwned;
use serde_json::Value;

/// Most schema violations listed in an error.
const MAX_VIOLATIONS: usize = 5;

/// A compiled schema and the name of the type it is for.
pub struct StructuredValidator {
    type_name: String,
    validator: jsonschema::Validator,
}

impl std::fmt::Debug for StructuredValidator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StructuredValidator")
            .field("type_name", &self.type_name)
            .finish_non_exhaustive()
    }
}

fn short_type_name<T>() -> String {
    let full = std::any::type_name::<T>();
    let base = full.split('<').next().unwrap_or(full);
    base.rsplit("::").next().unwrap_or(base).to_owned()
}

/// A schema name providers accept: letters, digits, `_` and `-`, at most 64 characters.
fn schema_name<T: schemars::JsonSchema>() -> String {
    let raw = T::schema_name();
    let mut name: String = raw
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect();
    if name.is_empty() {
        name.push_str("response");
    }
    name
}

/// The response format to send for `T`, and the validator for the answer.
pub fn prepare<T: schemars::JsonSchema>() -> (ResponseFormat, Result<StructuredValidator>) {
    let schema = provider_schema::<T>();
    let type_name = short_type_name::<T>();
    let validator = jsonschema::validator_for(&schema)
        .map(|validator| StructuredValidator {
            type_name: type_name.clone(),
            validator,
        })
        .map_err(|e| Error::Config(format!("the JSON Schema of `{type_name}` does not compile: {e}")));
    let format = ResponseFormat {
        name: schema_name::<T>(),
        schema,
        strict: false,
    };
    (format, validator)
}

/// Strip a Markdown code fence (```json ... ```) some models wrap JSON in.
fn strip_fence(text: &str) -> &str {
    let t = text.trim();
    let Some(rest) = t.strip_prefix("```") else {
        return t;
    };
    let rest = rest.strip_prefix("json").unwrap_or(rest);
    rest.strip_suffix("```").unwrap_or(rest).trim()
}

/// Parse `text` as JSON, validate it against the schema, deserialise it into `T`.
pub fn parse_text<T: DeserializeOwned>(text: &str, v: &StructuredValidator) -> Result<T> {
    let reject = |reason: String| Error::StructuredOutput {
        type_name: v.type_name.clone(),
        reason,
        raw: truncate_raw(text),
    };
    let value: Value =
        serde_json::from_str(strip_fence(text)).map_err(|e| reject(format!("not valid JSON: {e}")))?;
    let violations: Vec<String> = v
        .validator
        .iter_errors(&value)
        .take(MAX_VIOLATIONS)
        .map(|e| {
            let at = e.instance_path().to_string();
            if at.is_empty() {
                e.to_string()
            } else {
                format!("at {at}: {e}")
            }
        })
        .collect();
    if !violations.is_empty() {
        return Err(reject(format!(
            "does not match the schema: {}",
            violations.join("; ")
        )));
    }
    serde_json::from_value(value).map_err(|e| reject(format!("does not fit the type: {e}")))
}

/// The structured answer of `msg`: its text, or when the text is empty, the arguments of its
/// first tool call (providers that return structured output as a forced tool call).
pub fn parse_message<T: DeserializeOwned>(msg: &Message, v: &StructuredValidator) -> Result<T> {
    let text = msg.text();
    if text.trim().is_empty() {
        if let Some(call) = msg.tool_calls.first() {
            return parse_text(&call.args.to_string(), v);
        }
    }
    parse_text(&text, v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;

    #[derive(serde::Deserialize, schemars::JsonSchema, Debug, PartialEq)]
    struct Plan {
        /// Next tool.
        tool: String,
        confidence: f64,
    }

    #[test]
    fn valid_fenced_and_invalid_answers() {
        let (format, v) = prepare::<Plan>();
        let v = v.unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(format.name, "Plan");
        assert!(format.schema.get("$schema").is_none());
        let ok: Plan = parse_text("```json\n{\"tool\":\"a\",\"confidence\":0.5}\n```", &v)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(ok.tool, "a");
        let e = parse_text::<Plan>("{\"tool\":1}", &v).err();
        let e = e.unwrap_or_else(|| panic!("expected an error"));
        assert_eq!(e.kind(), ErrorKind::StructuredOutput);
        assert!(e.to_string().contains("does not match the schema"), "{e}");
        let long = "x".repeat(5000);
        let e = parse_text::<Plan>(&long, &v)
            .err()
            .unwrap_or_else(|| panic!("expected an error"));
        assert!(e.to_string().len() < 1000);
    }
}
