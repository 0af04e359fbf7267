//! [`ScriptedModel`]: a model that answers from a list, for tests and offline examples.

use crate::chunk::{ChatChunk, ChunkAssembler};
use crate::error::{Error, Result};
use crate::message::{new_message_id, AiParts, MessageExt};
use crate::model::{ChatModel, ChunkStream};
use crate::options::ChatOptions;
use crate::telemetry::{traced_invoke, traced_stream};
use crate::usage::{estimate_tokens, Usage};
use futures::StreamExt;
use graphloom_core::{Message, ToolCall};
use serde_json::Value;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

#[derive(Debug, Clone)]
enum ReplyKind {
    Text(String),
    ToolCalls(String, Vec<ToolCall>),
    Message(Box<Message>),
    Chunks(Vec<ChatChunk>),
    Error(Error),
}

/// One scripted answer.
#[derive(Debug, Clone)]
pub struct Reply {
    kind: ReplyKind,
    delay: Option<Duration>,
    usage: Option<Usage>,
}

impl Reply {
    fn of(kind: ReplyKind) -> Self {
        Self {
            kind,
            delay: None,
            usage: None,
        }
    }
    /// Answer with text.
    #[must_use]
    pub fn text(text: impl Into<String>) -> Self {
        Self::of(ReplyKind::Text(text.into()))
    }
    /// Answer with JSON text (for structured output).
    #[must_use]
    pub fn json(value: Value) -> Self {
        Self::text(value.to_string())
    }
    /// Call one tool, under a fresh `call_...` id (pass ids with [`Reply::tool_calls`] when
    /// they matter).
    #[must_use]
    pub fn tool_call(name: impl Into<String>, args: Value) -> Self {
        let call = ToolCall {
            id: crate::message::new_call_id(),
            name: name.into(),
            args,
        };
        Self::of(ReplyKind::ToolCalls(String::new(), vec![call]))
    }
    /// Answer with text and tool calls.
    #[must_use]
    pub fn tool_calls(text: impl Into<String>, calls: Vec<ToolCall>) -> Self {
        Self::of(ReplyKind::ToolCalls(text.into(), calls))
    }
    /// Answer with this message (an id is assigned when it has none).
    #[must_use]
    pub fn message(message: Message) -> Self {
        Self::of(ReplyKind::Message(Box::new(message)))
    }
    /// Stream exactly these chunks (`invoke` assembles them).
    #[must_use]
    pub fn chunks(chunks: Vec<ChatChunk>) -> Self {
        Self::of(ReplyKind::Chunks(chunks))
    }
    /// Fail with this error.
    #[must_use]
    pub fn error(error: Error) -> Self {
        Self::of(ReplyKind::Error(error))
    }
    /// Fail with a scripted error message.
    #[must_use]
    pub fn failure(message: impl Into<String>) -> Self {
        Self::error(Error::Scripted(message.into()))
    }
    /// Wait this long before answering (a call's `timeout` cuts the wait short with
    /// [`Error::Timeout`]).
    #[must_use]
    pub fn after(mut self, delay: Duration) -> Self {
        self.delay = Some(delay);
        self
    }
    /// Report this usage instead of the estimate (four bytes a token).
    #[must_use]
    pub fn with_usage(mut self, usage: Usage) -> Self {
        self.usage = Some(usage);
        self
    }
}

impl From<&str> for Reply {
    fn from(s: &str) -> Self {
        Reply::text(s)
    }
}
impl From<String> for Reply {
    fn from(s: String) -> Self {
        Reply::text(s)
    }
}

/// A request the scripted model received.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordedRequest {
    /// The messages.
    pub messages: Vec<Message>,
    /// The options.
    pub options: ChatOptions,
    /// True for a `stream` call.
    pub streamed: bool,
}

/// The reply function of [`ScriptedModel::responding`].
type RespondFn = dyn Fn(&[Message], &ChatOptions) -> Reply + Send + Sync;

/// A reply function, shown by name only.
#[derive(Clone)]
struct Responder(Arc<RespondFn>);

impl std::fmt::Debug for Responder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Responder(..)")
    }
}

/// How many requests a [`ScriptedModel`] keeps by default: the most recent ones (see
/// [`ScriptedModel::keep_requests`]).
pub const DEFAULT_KEPT_REQUESTS: usize = 64;

#[derive(Debug)]
struct Inner {
    name: String,
    replies: Mutex<VecDeque<Reply>>,
    /// The most recent requests, oldest first, at most `keep` of them.
    requests: Mutex<VecDeque<RecordedRequest>>,
    keep: AtomicUsize,
    calls: AtomicUsize,
    repeat_last: bool,
    last: Mutex<Option<Reply>>,
    scripted: usize,
    respond: Option<Responder>,
}

/// A model that answers from a list of [`Reply`]s, in order, and records what it was asked.
///
/// Clones share the script and the record. `stream` splits text into word chunks and
/// each tool call's arguments into two pieces, so stream consumers see real assembly work.
/// Usage is reported as given with [`Reply::with_usage`] or estimated (four bytes a token).
///
/// The record is bounded: [`requests`](Self::requests) holds the last
/// [`DEFAULT_KEPT_REQUESTS`] requests (change it with [`keep_requests`](Self::keep_requests);
/// 0 keeps none), while [`calls`](Self::calls) counts every call. A model shared by every
/// run of a long-lived server (an offline demo's default model) must not hold on to each
/// conversation it was shown: give it `keep_requests(0)`.
///
/// ```
/// use graphloom_llm::{ChatModel, ChatOptions, Message, Reply, ScriptedModel};
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> graphloom_llm::Result<()> {
/// let model = ScriptedModel::new([Reply::text("Hello there")]);
/// let answer = model.invoke(&[Message::human("hi")], &ChatOptions::new()).await?;
/// assert_eq!(answer.text(), "Hello there");
/// assert_eq!(model.requests()[0].messages[0].text(), "hi");
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct ScriptedModel {
    inner: Arc<Inner>,
}

impl ScriptedModel {
    /// A model answering with `replies`, in order; after the last it fails.
    pub fn new<I, R>(replies: I) -> Self
    where
        I: IntoIterator<Item = R>,
        R: Into<Reply>,
    {
        Self::build("scripted", replies, false)
    }
    /// Like [`ScriptedModel::new`], but the last reply repeats forever.
    pub fn repeating<I, R>(replies: I) -> Self
    where
        I: IntoIterator<Item = R>,
        R: Into<Reply>,
    {
        Self::build("scripted", replies, true)
    }
    /// A model whose every reply is `respond(messages, options)`: a function of the
    /// conversation, so one model answers any number of runs, each the same way, in any
    /// order (an offline demo served to many clients). Replies [`ScriptedModel::push`]ed
    /// are used first.
    ///
    /// ```
    /// use graphloom_llm::{ChatModel, ChatOptions, Message, Reply, ScriptedModel};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> graphloom_llm::Result<()> {
    /// let echo = ScriptedModel::responding(|msgs, _opts| {
    ///     Reply::text(format!("you said: {}", msgs.last().map(Message::text).unwrap_or_default()))
    /// });
    /// for _ in 0..3 {
    ///     let m = echo.invoke(&[Message::human("hi")], &ChatOptions::new()).await?;
    ///     assert_eq!(m.text(), "you said: hi");
    /// }
    /// # Ok(()) }
    /// ```
    pub fn responding<F>(respond: F) -> Self
    where
        F: Fn(&[Message], &ChatOptions) -> Reply + Send + Sync + 'static,
    {
        Self::build_with(
            "scripted",
            Vec::<Reply>::new(),
            false,
            Some(Responder(Arc::new(respond))),
        )
    }
    fn build<I, R>(name: &str, replies: I, repeat_last: bool) -> Self
    where
        I: IntoIterator<Item = R>,
        R: Into<Reply>,
    {
        Self::build_with(name, replies, repeat_last, None)
    }
    fn build_with<I, R>(name: &str, replies: I, repeat_last: bool, respond: Option<Responder>) -> Self
    where
        I: IntoIterator<Item = R>,
        R: Into<Reply>,
    {
        let replies: VecDeque<Reply> = replies.into_iter().map(Into::into).collect();
        Self {
            inner: Arc::new(Inner {
                name: name.to_owned(),
                scripted: replies.len(),
                replies: Mutex::new(replies),
                requests: Mutex::new(VecDeque::new()),
                keep: AtomicUsize::new(DEFAULT_KEPT_REQUESTS),
                calls: AtomicUsize::new(0),
                repeat_last,
                last: Mutex::new(None),
                respond,
            }),
        }
    }
    /// The same script under another model name (for price lookups and prompt hashes).
    #[must_use]
    pub fn named(self, name: impl Into<String>) -> Self {
        let replies = self
            .inner
            .replies
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let keep = self.inner.keep.load(Ordering::Relaxed);
        Self::build_with(
            &name.into(),
            replies,
            self.inner.repeat_last,
            self.inner.respond.clone(),
        )
        .keep_requests(keep)
    }
    /// Keep the last `n` requests for [`requests`](Self::requests) (default
    /// [`DEFAULT_KEPT_REQUESTS`]; 0 keeps none). Clones share the setting; requests
    /// already kept beyond `n` go at once.
    #[must_use]
    pub fn keep_requests(self, n: usize) -> Self {
        self.inner.keep.store(n, Ordering::Relaxed);
        let mut kept = self.inner.requests.lock().unwrap_or_else(PoisonError::into_inner);
        while kept.len() > n {
            kept.pop_front();
        }
        drop(kept);
        self
    }
    /// Append a reply to the script.
    pub fn push(&self, reply: impl Into<Reply>) {
        self.inner
            .replies
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push_back(reply.into());
    }
    /// The requests received so far, oldest first: every one while there were at most
    /// [`keep_requests`](Self::keep_requests) of them ([`DEFAULT_KEPT_REQUESTS`] by
    /// default), else the most recent ones.
    #[must_use]
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.inner
            .requests
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .cloned()
            .collect()
    }
    /// How many calls were made (all of them, kept or not).
    #[must_use]
    pub fn calls(&self) -> usize {
        self.inner.calls.load(Ordering::SeqCst)
    }
    /// Replies not used yet.
    #[must_use]
    pub fn remaining(&self) -> usize {
        self.inner
            .replies
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    fn next(&self, messages: &[Message], options: &ChatOptions, streamed: bool) -> Result<Reply> {
        self.inner.calls.fetch_add(1, Ordering::SeqCst);
        let keep = self.inner.keep.load(Ordering::Relaxed);
        if keep > 0 {
            let request = RecordedRequest {
                messages: messages.to_vec(),
                options: options.clone(),
                streamed,
            };
            let mut kept = self.inner.requests.lock().unwrap_or_else(PoisonError::into_inner);
            while kept.len() >= keep {
                kept.pop_front();
            }
            kept.push_back(request);
        }
        let popped = self
            .inner
            .replies
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop_front();
        if let (None, Some(f)) = (&popped, &self.inner.respond) {
            return Ok((f.0)(messages, options));
        }
        let mut last = self.inner.last.lock().unwrap_or_else(PoisonError::into_inner);
        match popped {
            Some(r) => {
                if self.inner.repeat_last {
                    *last = Some(r.clone());
                }
                Ok(r)
            }
            None => last.clone().ok_or_else(|| {
                Error::Scripted(format!(
                    "no reply left: the script had {} repl{}",
                    self.inner.scripted,
                    if self.inner.scripted == 1 { "y" } else { "ies" }
                ))
            }),
        }
    }
}

fn input_estimate(messages: &[Message]) -> u64 {
    messages
        .iter()
        .map(|m| {
            estimate_tokens(&m.text())
                + m.tool_calls
                    .iter()
                    .map(|c| estimate_tokens(&c.name) + estimate_tokens(&c.args.to_string()))
                    .sum::<u64>()
        })
        .sum()
}

/// Wait out a reply's delay, or fail when the call's timeout is shorter.
async fn wait(delay: Option<Duration>, timeout: Option<Duration>) -> Result<()> {
    let Some(delay) = delay else { return Ok(()) };
    match timeout {
        Some(t) if t < delay => {
            tokio::time::sleep(t).await;
            Err(Error::Timeout {
                provider: "scripted".into(),
                after_ms: u64::try_from(t.as_millis()).unwrap_or(u64::MAX),
                attempts: 1,
            })
        }
        _ => {
            tokio::time::sleep(delay).await;
            Ok(())
        }
    }
}

/// The chunks of `text`: words with their trailing whitespace.
fn text_chunks(text: &str) -> Vec<ChatChunk> {
    text.split_inclusive(char::is_whitespace)
        .map(ChatChunk::text)
        .collect()
}

/// Split `s` near its middle, on a char boundary.
fn halves(s: &str) -> (&str, &str) {
    let mut mid = s.len() / 2;
    while !s.is_char_boundary(mid) {
        mid += 1;
    }
    s.split_at(mid)
}

impl ScriptedModel {
    fn chunks_for(&self, reply: Reply, input: u64) -> Result<Vec<ChatChunk>> {
        let (text, calls, usage) = match reply.kind {
            ReplyKind::Error(e) => return Err(e),
            ReplyKind::Chunks(c) => return Ok(c),
            ReplyKind::Text(t) => (t, Vec::new(), reply.usage),
            ReplyKind::ToolCalls(t, c) => (t, c, reply.usage),
            ReplyKind::Message(m) => {
                let u = reply.usage.or_else(|| m.usage());
                (m.text(), m.tool_calls.clone(), u)
            }
        };
        let usage = usage.unwrap_or_else(|| Usage::new(input, output_estimate(&text, &calls)));
        let mut out = text_chunks(&text);
        for (index, c) in calls.iter().enumerate() {
            let args = c.args.to_string();
            let (a, b) = halves(&args);
            out.push(ChatChunk::tool_call(index, Some(&c.id), Some(&c.name), a));
            out.push(ChatChunk::tool_call(index, None, None, b));
        }
        let finish = if calls.is_empty() { "stop" } else { "tool_calls" };
        out.push(ChatChunk::end(Some(usage), finish));
        let id = new_message_id();
        for c in &mut out {
            c.id = Some(id.clone());
            c.model = Some(self.inner.name.clone());
        }
        Ok(out)
    }
}

fn output_estimate(text: &str, calls: &[ToolCall]) -> u64 {
    estimate_tokens(text)
        + calls
            .iter()
            .map(|c| estimate_tokens(&c.name) + estimate_tokens(&c.args.to_string()))
            .sum::<u64>()
}

impl ChatModel for ScriptedModel {
    fn model_name(&self) -> &str {
        &self.inner.name
    }
    fn provider(&self) -> &str {
        "scripted"
    }
    async fn invoke(&self, messages: &[Message], options: &ChatOptions) -> Result<Message> {
        if let Some(rt) = graphloom_core::message_stream::current() {
            // A node's run streams `messages` or `events`: stream, report, assemble, as
            // the HTTP providers do.
            return crate::stream_into::invoke_forwarded(rt, self, messages, options).await;
        }
        traced_invoke("scripted", &self.inner.name, self.answer(messages, options)).await
    }
    fn stream(&self, messages: &[Message], options: &ChatOptions) -> ChunkStream {
        if let Some(rt) = graphloom_core::message_stream::current() {
            return crate::stream_into::forwarded(rt, self, messages, options);
        }
        traced_stream(
            "scripted",
            &self.inner.name,
            self.answer_stream(messages, options),
        )
    }
}

impl ScriptedModel {
    async fn answer(&self, messages: &[Message], options: &ChatOptions) -> Result<Message> {
        let reply = self.next(messages, options, false)?;
        wait(reply.delay, options.timeout).await?;
        let input = input_estimate(messages);
        match reply.kind {
            ReplyKind::Error(e) => Err(e),
            ReplyKind::Message(mut m) => {
                if m.id.is_none() {
                    m.id = Some(new_message_id());
                }
                Ok(*m)
            }
            ReplyKind::Chunks(chunks) => {
                let mut asm = ChunkAssembler::with_provider("scripted");
                for c in &chunks {
                    asm.push(c);
                }
                Ok(asm.finish())
            }
            ReplyKind::Text(text) => Ok(self.parts(input, reply.usage, text, Vec::new())),
            ReplyKind::ToolCalls(text, calls) => Ok(self.parts(input, reply.usage, text, calls)),
        }
    }
    fn answer_stream(&self, messages: &[Message], options: &ChatOptions) -> ChunkStream {
        let input = input_estimate(messages);
        let timeout = options.timeout;
        let prepared = self
            .next(messages, options, true)
            .and_then(|r| Ok((r.delay, self.chunks_for(r, input)?)));
        let fut = async move {
            let (delay, chunks) = prepared?;
            wait(delay, timeout).await?;
            Ok::<_, Error>(chunks)
        };
        Box::pin(futures::stream::once(fut).flat_map(|r| match r {
            Ok(chunks) => futures::stream::iter(chunks.into_iter().map(Ok)).left_stream(),
            Err(e) => futures::stream::iter(vec![Err(e)]).right_stream(),
        }))
    }
}

impl ScriptedModel {
    fn parts(&self, input: u64, usage: Option<Usage>, text: String, calls: Vec<ToolCall>) -> Message {
        let usage = usage.unwrap_or_else(|| Usage::new(input, output_estimate(&text, &calls)));
        let finish = if calls.is_empty() { "stop" } else { "tool_calls" };
        AiParts {
            id: None,
            text,
            tool_calls: calls,
            invalid_tool_calls: Vec::new(),
            usage: Some(usage),
            finish_reason: Some(finish.to_owned()),
            model: Some(self.inner.name.clone()),
            provider: "scripted".to_owned(),
        }
        .into_message()
    }
}
