// The official JS client (@langchain/langgraph-sdk 1.15) driving a server through the
// thread-centric protocol: `node thread_client.mjs <api url>`. Runs the `weather` graph
// (tests/it/weather.rs, tests/js/reference/graph.py) over SSE and over a WebSocket, and
// prints one JSON line `{"ok": true, "checks": [...]}` at the end (or throws).
import { Client } from "@langchain/langgraph-sdk";
import WebSocket from "ws";

const url = process.argv[2];
if (!url) throw new Error("usage: node thread_client.mjs <api url>");
const client = new Client({ apiUrl: url });
const checks = [];
const ANSWER = ["It", " is", " sunny", " in", " Paris."];
const INPUT = { messages: [{ type: "human", content: "weather in Paris?" }] };

// GRAPHLOOM_REFERENCE=1: the server is the reference (`langgraph dev`), which sends only
// the values, messages, lifecycle and input channels and tags no message with its node:
// the checks of what graphloom adds (`extra`) are skipped there.
const reference = process.env.GRAPHLOOM_REFERENCE === "1";
function extra(name, cond, detail) {
  if (!reference) check(name, cond, detail);
}

function check(name, cond, detail) {
  if (!cond) throw new Error(`check failed: ${name}: ${JSON.stringify(detail, null, 1)?.slice(0, 3000)}`);
  checks.push(name);
}

function within(promise, ms, what) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms: ${what}`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/** Whether `cond()` holds within `ms` (asked every 20 ms). */
async function eventually(cond, ms) {
  const until = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > until) return false;
    await new Promise((r) => setTimeout(r, 20));
  }
  return true;
}

const terminalOf = (events) => events.filter(isRootTerminal).at(-1)?.params.data.event;
const isRootTerminal = (e) =>
  e.method === "lifecycle" && e.params.namespace.length === 0 && ["completed", "interrupted", "failed"].includes(e.params.data.event);

/**
 * Events of a raw subscription until the SDK pauses it after the root's terminal lifecycle
 * event (breaking out would close the subscription; a paused one goes on with the next run).
 */
async function untilTerminal(sub, what) {
  const out = [];
  await within(
    (async () => {
      for await (const e of sub) out.push(e);
    })(),
    20000,
    what,
  );
  return out;
}

const streamOptions = (transport) =>
  transport === "websocket"
    ? { assistantId: "weather", transport: "websocket", webSocketFactory: (u) => new WebSocket(u) }
    : { assistantId: "weather" };

/** One conversation: stream the run, hit the interrupt, answer it, await the output. */
async function conversation(transport) {
  const tag = `${transport}:`;
  const thread = client.threads.stream(streamOptions(transport));
  const threadId = thread.threadId;
  const messages = [];
  const toolCalls = [];
  const collect = (async () => {
    for await (const m of thread.messages) {
      const deltas = [];
      for await (const d of m.text) deltas.push(d);
      messages.push({ id: m.id, deltas, node: m.node, namespace: m.namespace });
    }
  })();
  const tools = (async () => {
    for await (const tc of thread.toolCalls) toolCalls.push({ name: tc.name, args: tc.args, output: await tc.output });
  })();
  // Every event the thread delivers, once each (whichever subscription or replay brought
  // it): what the raw subscription below asks for, seen even when the SDK has paused it.
  const all = [];
  let ends = 0;
  let onEnd = () => {};
  thread.onEvent((e) => {
    all.push(e);
    if (isRootTerminal(e)) {
      ends += 1;
      onEnd();
    }
  });
  const ended = (n) => new Promise((resolve) => {
    onEnd = () => ends >= n && resolve();
    onEnd();
  });
  const started = await thread.run.start({ input: INPUT });
  check(`${tag}run.start answers a run id`, typeof started?.run_id === "string", started);
  const sub = await thread.subscribe({ channels: ["lifecycle", "input", "values", "tools", "custom", "updates", "checkpoints"] });
  await within(ended(1), 20000, `${tag}first run`);
  await untilTerminal(sub, `${tag}first run's subscription`);
  // The SDK opens a stream for the subscription that replays the run from its start; a run
  // that reached its end first, on the stream run.start opened, ends `sub` before that
  // replay is read. What graphloom adds comes on the replay: wait for it (the checks below
  // say what is missing).
  const replayed = ["custom", "updates", "checkpoints"];
  if (!reference) await eventually(() => replayed.every((m) => all.some((e) => e.method === m)), 10000);
  const first = [...all];
  await within(collect, 10000, `${tag}messages projection`);
  await within(tools, 10000, `${tag}toolCalls projection`);

  const answer = messages.find((m) => m.deltas.join("") === ANSWER.join(""));
  check(`${tag}tokens arrive one by one`, answer && JSON.stringify(answer.deltas) === JSON.stringify(ANSWER), messages);
  extra(`${tag}a message is tagged with its node`, answer.node === "agent", answer);
  check(`${tag}a returned message is not streamed`, !messages.some((m) => m.deltas.join("").startsWith("review:")), messages);
  extra(`${tag}tool calls assemble`, toolCalls.some((t) => t.name === "get_weather" && t.args?.city === "Paris"), toolCalls);
  const toolEvents = first.filter((e) => e.method === "tools").map((e) => e.params.data.event);
  extra(`${tag}tool start and end`, toolEvents.join() === "tool-started,tool-finished", toolEvents);
  const rootValues = first.filter((e) => e.method === "values" && e.params.namespace.length === 0);
  check(`${tag}values stream`, rootValues.length >= 3 && rootValues.at(-1).params.data.messages.length === 4, rootValues.length);
  const subStart = first.find((e) => e.method === "lifecycle" && e.params.data.event === "started");
  check(`${tag}a subgraph starts in its namespace`, subStart && /^review:/.test(subStart.params.namespace[0]) && subStart.params.data.graph_name === "review", subStart);
  check(`${tag}subgraph values carry the namespace`, first.some((e) => e.method === "values" && e.params.namespace[0]?.startsWith("review:")), null);
  extra(`${tag}custom events`, first.some((e) => e.method === "custom" && e.params.data.payload?.progress === "thinking"), null);
  extra(`${tag}updates name their node`, first.some((e) => e.method === "updates" && e.params.data.node === "tools"), null);
  extra(`${tag}checkpoints`, first.some((e) => e.method === "checkpoints" && typeof e.params.data.id === "string"), null);
  check(`${tag}every event has its own sequence number`, new Set(first.map((e) => e.seq)).size === first.length, first.map((e) => e.seq));
  check(`${tag}the run ends interrupted`, terminalOf(first) === "interrupted" && thread.interrupted, first.at(-1));
  const interrupt = thread.interrupts[0];
  check(`${tag}the interrupt is the HITL request`, interrupt?.payload?.action_requests?.[0]?.name === "send_report" && interrupt.payload.review_configs?.[0]?.allowed_decisions?.includes("approve"), thread.interrupts);
  check(`${tag}the interrupt is in the subgraph`, interrupt.namespace[0]?.startsWith("review:"), interrupt);

  await thread.input.respond({ namespace: interrupt.namespace, interrupt_id: interrupt.interruptId, response: { decisions: [{ type: "approve" }] } });
  await within(ended(2), 20000, `${tag}resumed run`);
  await untilTerminal(sub, `${tag}resumed run's subscription`);
  const second = all.slice(first.length);
  check(`${tag}the resumed run completes`, terminalOf(second) === "completed", second.map((e) => e.method));
  const last = second.filter((e) => e.method === "values" && e.params.namespace.length === 0).at(-1);
  check(`${tag}the output has the approval`, last?.params.data.messages.at(-1).content === "review: approve", last);
  check(`${tag}the subgraph completes`, second.some((e) => e.method === "lifecycle" && e.params.namespace.length === 1 && e.params.data.event === "completed"), null);
  const state = await client.threads.getState(threadId);
  check(`${tag}the thread was created by run.start`, state.values.messages.length === 5, state.values);
  await thread.close();
  return { threadId, first, second };
}

/** A second client attaches to the thread afterwards and replays. */
async function reattach(transport, threadId, expectedRuns) {
  const tag = `${transport}:`;
  const thread = client.threads.stream(threadId, streamOptions(transport));
  const sub = await thread.subscribe({ channels: ["lifecycle"] });
  const seen = [];
  // The SDK pauses a subscription after each run's end; a replay of several runs resumes it.
  await within(
    (async () => {
      while (seen.filter(isRootTerminal).length < expectedRuns) {
        for await (const e of sub) {
          seen.push(e);
          if (seen.filter(isRootTerminal).length === expectedRuns) break;
        }
        if (seen.filter(isRootTerminal).length === expectedRuns || !sub.isPaused) break;
        await sub.waitForResume();
      }
    })(),
    20000,
    `${tag}replay`,
  );
  const running = seen.filter((e) => e.params.data.event === "running").length;
  check(`${tag}reattaching replays ${expectedRuns === 2 ? "the whole history" : "the latest run"}`, running === expectedRuns && isRootTerminal(seen.at(-1)) && seen.at(-1).params.data.event === "completed", seen.map((e) => e.params.data.event));
  await thread.close();
}

/** Two clients on one thread (besides the one that started the run) see the same events. */
async function twoClients() {
  const a = client.threads.stream({ assistantId: "weather" });
  await a.run.start({ input: INPUT });
  const b = client.threads.stream(a.threadId, { assistantId: "weather" });
  const c = client.threads.stream(a.threadId, streamOptions("sse"));
  const [sb, sc] = await Promise.all([
    b.subscribe({ channels: ["messages", "lifecycle", "values"] }),
    c.subscribe({ channels: ["messages", "lifecycle", "values"] }),
  ]);
  const [eb, ec] = await Promise.all([untilTerminal(sb, "client b"), untilTerminal(sc, "client c")]);
  const ids = (es) => es.map((e) => e.event_id).sort().join();
  check("two clients on one thread see the same events", eb.length > 10 && ids(eb) === ids(ec), [eb.length, ec.length]);
  check("each event once", new Set(eb.map((e) => e.event_id)).size === eb.length, eb.length);
  await a.close();
  await b.close();
  await c.close();
  return a.threadId;
}

/** Raw SSE: read some events, drop the connection, come back with `since`: nothing lost, nothing twice. */
async function sseReconnect(threadId) {
  const body = (extra) => JSON.stringify({ channels: ["values", "messages", "lifecycle", "input", "tools", "custom", "updates"], ...extra });
  async function read(extra, stopAfter) {
    const ac = new AbortController();
    const res = await fetch(`${url}/threads/${threadId}/stream/events`, { method: "POST", headers: { "content-type": "application/json" }, body: body(extra), signal: ac.signal });
    const reader = res.body.getReader();
    const dec = new TextDecoder();
    let buf = "";
    const out = [];
    try {
      while (true) {
        const { value, done } = await within(reader.read(), 10000, "sse read");
        if (done) break;
        buf += dec.decode(value, { stream: true });
        let i;
        while ((i = buf.indexOf("\r\n\r\n")) >= 0) {
          const frame = buf.slice(0, i);
          buf = buf.slice(i + 4);
          const data = frame.split("\r\n").find((l) => l.startsWith("data: "));
          if (!data) continue;
          const ev = JSON.parse(data.slice(6));
          out.push(ev);
          if (stopAfter(ev, out)) return out;
        }
      }
    } finally {
      ac.abort();
    }
    return out;
  }
  const all = await read({}, (e, out) => out.filter(isRootTerminal).length === 1);
  const head = await read({}, (e, out) => out.length === 7);
  const tail = await read({ since: head.at(-1).seq }, (e) => isRootTerminal(e));
  const ids = (es) => es.map((e) => e.event_id);
  check("an SSE client that reconnects with since loses nothing", JSON.stringify([...ids(head), ...ids(tail)]) === JSON.stringify(ids(all)), [head.length, tail.length, all.length]);
}

/** Raw WebSocket: subscribe, leave after a few events, come back with subscription.reconnect. */
async function wsReconnect(threadId) {
  function socket() {
    const ws = new WebSocket(`${url.replace(/^http/, "ws")}/threads/${threadId}/stream/events`);
    const inbox = [];
    let wake = null;
    ws.on("message", (d) => {
      inbox.push(JSON.parse(String(d)));
      wake?.();
    });
    const next = async () => {
      while (inbox.length === 0) await within(new Promise((r) => (wake = r)), 10000, "ws message");
      return inbox.shift();
    };
    return { ws, next, open: new Promise((r) => ws.on("open", r)) };
  }
  const channels = ["values", "messages", "lifecycle", "input"];
  const s1 = socket();
  await s1.open;
  s1.ws.send(JSON.stringify({ id: 1, method: "subscription.subscribe", params: { channels } }));
  const all = [];
  let m;
  while ((m = await s1.next()).type === "event") all.push(m);
  check("ws: subscribe answers after replaying", m.type === "success" && m.result.replayed_events === all.length && all.length > 10, m);
  const cut = all[5];
  s1.ws.close();
  const s2 = socket();
  await s2.open;
  s2.ws.send(JSON.stringify({ id: 1, method: "subscription.reconnect", params: { channels, run_id: "latest", last_event_id: cut.event_id } }));
  const rest = [];
  while ((m = await s2.next()).type === "event") rest.push(m);
  extra("ws: reconnecting with the last event id loses nothing", m.type === "success" && JSON.stringify(rest.map((e) => e.event_id)) === JSON.stringify(all.slice(6).map((e) => e.event_id)), [rest.length, all.length]);
  s2.ws.send(JSON.stringify({ id: 2, method: "state.fork" }));
  m = await s2.next();
  check("ws: a bad command gets an error frame", m.type === "error" && m.id === 2 && m.error === "invalid_argument", m);
  s2.ws.close();
}

/** The other commands the client offers. */
async function otherCommands(threadId) {
  const thread = client.threads.stream(threadId, { assistantId: "weather" });
  const tree = await thread.agent.getTree();
  extra("agent.getTree", tree.tree.graph_name === "weather" && tree.tree.children?.[0]?.graph_name === "review", tree);
  const st = await thread.state.get({ namespace: [] });
  extra("state.get", st.values.messages.length === 5 && typeof st.checkpoint.id === "string", st);
  const list = await thread.state.listCheckpoints({ limit: 3 });
  extra("state.listCheckpoints", list.checkpoints.length === 3 && typeof list.checkpoints[0].step === "number", list);
  let err;
  try {
    await thread.input.respond({ namespace: [], interrupt_id: "nope", response: 1 });
  } catch (e) {
    err = e;
  }
  check("a respond to no pending interrupt is a protocol error", err?.name === "ProtocolError" && err.code === "no_such_run", String(err));
  const fork = await thread.state.fork({ checkpoint_id: list.checkpoints[2].id });
  extra("state.fork starts a run", typeof fork.run_id === "string" && fork.thread_id === threadId, fork);
  await client.runs.join(threadId, fork.run_id);
  await thread.close();
}

const sse = await conversation("sse");
await reattach("sse", sse.threadId, 2);
const ws = await conversation("websocket");
await reattach("websocket", ws.threadId, 1);
const shared = await twoClients();
await sseReconnect(shared);
await wsReconnect(shared);
await otherCommands(sse.threadId);
console.log(JSON.stringify({ ok: true, checks }));
process.exit(0);
