//! A `tools/call` result as the tool message the model reads.
//!
//! - `isError: true`: a [`ToolError`] (code `execution`) with the result's text, so the
//!   tool message has `status: "error"` and the run goes on.
//! - Structured content (`structuredContent`) that the text blocks only repeat (the
//!   serialised copy the spec asks servers to add), or with no blocks at all: the JSON value
//!   itself, so a `ToolNode`'s stream allowlist can pick its fields. When the text says
//!   something else (the Python SDK's `{"result": ..}` wrapping of a plain return, a summary
//!   for the model), the text is what the model reads, as the server's author wrote it.
//! - Otherwise the blocks as text, one after the other on their own lines: text as it is;
//!   an embedded text resource as a `[resource <uri> (<mime>)]` line followed by its text;
//!   images, audio and binary resources as a one-line description with their MIME type and
//!   size (a tool message is text, so the bytes could only reach the model as base64 noise);
//!   resource links as `[resource link: <uri> (<name>, <mime>)]`.

use graphloom_prebuilt::{ToolError, ToolOutput};
use rmcp::model::{CallToolResult, ContentBlock, ResourceContents};
use serde_json::Value;

/// `result` of the server's tool as a tool output, or the error it reports.
pub(crate) fn to_output(result: CallToolResult) -> Result<ToolOutput, ToolError> {
    let text = render(&result.content);
    if result.is_error.unwrap_or(false) {
        let message = if !text.is_empty() {
            text
        } else if let Some(v) = &result.structured_content {
            v.to_string()
        } else {
            "the tool reported an error and gave no message".to_owned()
        };
        return Err(ToolError::execution(message));
    }
    if let Some(structured) = result.structured_content {
        if repeats(&result.content, &structured) {
            return Ok(ToolOutput::json(structured));
        }
    }
    Ok(ToolOutput::text(text))
}

/// Whether `blocks` say nothing `structured` does not: none at all, or text blocks holding
/// exactly that JSON.
fn repeats(blocks: &[ContentBlock], structured: &Value) -> bool {
    if blocks.is_empty() {
        return true;
    }
    let mut joined = String::new();
    for b in blocks {
        match b {
            ContentBlock::Text(t) => joined.push_str(&t.text),
            _ => return false,
        }
    }
    serde_json::from_str::<Value>(&joined).is_ok_and(|v| &v == structured)
}

/// The blocks as text, one per line group.
fn render(blocks: &[ContentBlock]) -> String {
    let parts: Vec<String> = blocks.iter().map(render_block).collect();
    parts.join("\n")
}

fn render_block(block: &ContentBlock) -> String {
    match block {
        ContentBlock::Text(t) => t.text.clone(),
        ContentBlock::Image(i) => format!("[image: {}, {} bytes]", i.mime_type, decoded_len(&i.data)),
        ContentBlock::Audio(a) => format!("[audio: {}, {} bytes]", a.mime_type, decoded_len(&a.data)),
        ContentBlock::Resource(r) => match &r.resource {
            ResourceContents::TextResourceContents {
                uri, mime_type, text, ..
            } => match mime_type {
                Some(m) => format!("[resource {uri} ({m})]\n{text}"),
                None => format!("[resource {uri}]\n{text}"),
            },
            ResourceContents::BlobResourceContents {
                uri, mime_type, blob, ..
            } => format!(
                "[resource {uri}: {}, {} bytes]",
                mime_type.as_deref().unwrap_or("application/octet-stream"),
                decoded_len(blob)
            ),
            other => serde_json::to_value(other).unwrap_or(Value::Null).to_string(),
        },
        ContentBlock::ResourceLink(link) => {
            let mut details = vec![link.name.clone()];
            if let Some(m) = &link.mime_type {
                details.push(m.clone());
            }
            let mut line = format!("[resource link: {} ({})]", link.uri, details.join(", "));
            if let Some(d) = &link.description {
                line.push(' ');
                line.push_str(d);
            }
            line
        }
        // A block kind newer than this crate: its JSON, which the model can still read.
        #[allow(unreachable_patterns)]
        other => serde_json::to_value(other).unwrap_or(Value::Null).to_string(),
    }
}

/// The size of the bytes behind base64 `data`.
fn decoded_len(data: &str) -> usize {
    let trimmed = data.trim_end_matches('=');
    trimmed.len() * 3 / 4
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn base64_sizes() {
        assert_eq!(decoded_len("TWFu"), 3);
        assert_eq!(decoded_len("TWE="), 2);
        assert_eq!(decoded_len("TQ=="), 1);
        assert_eq!(decoded_len(""), 0);
    }

    #[test]
    fn text_blocks_join_on_lines() {
        let r = CallToolResult::success(vec![ContentBlock::text("a"), ContentBlock::text("b")]);
        assert_eq!(to_output(r).unwrap().content, json!("a\nb"));
    }

    #[test]
    fn an_error_result_is_a_tool_error_with_its_text() {
        let r = CallToolResult::error(vec![ContentBlock::text("no such order")]);
        let e = to_output(r).unwrap_err();
        assert_eq!(e.code, graphloom_prebuilt::ToolErrorCode::Execution);
        assert_eq!(e.message, "no such order");
    }

    #[test]
    fn structured_content_wins_over_its_text_copy() {
        let r = CallToolResult::structured(json!({"sum": 5}));
        assert_eq!(to_output(r).unwrap().content, json!({"sum": 5}));
    }

    #[test]
    fn text_that_says_more_than_the_structured_content_wins() {
        let mut r = CallToolResult::success(vec![ContentBlock::text("5")]);
        r.structured_content = Some(json!({"result": 5}));
        assert_eq!(to_output(r).unwrap().content, json!("5"));
        let mut r = CallToolResult::success(vec![]);
        r.structured_content = Some(json!({"result": 5}));
        assert_eq!(to_output(r).unwrap().content, json!({"result": 5}));
    }
}
