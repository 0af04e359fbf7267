// One conversation on the `weather` graph through the thread-centric protocol, over raw
// HTTP (no client library between the frames and the record): `run.start` on a new
// thread, the thread's SSE stream until the run pauses at its interrupt, `input.respond`,
// the stream again (`since` the last event) until the run completes. Shared by
// record.mjs (against `langgraph dev`) and compare.mjs (against graphloom).
import { randomUUID } from "node:crypto";

export const CHANNELS = ["values", "messages", "lifecycle", "input"];

async function post(url, body) {
  const res = await fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
  if (!res.ok) throw new Error(`${url}: ${res.status} ${await res.text()}`);
  return res;
}

/** Events of the thread's stream (from `since`) until the root's lifecycle says `until`. */
async function streamUntil(api, thread, since, until) {
  const ac = new AbortController();
  const timer = setTimeout(() => ac.abort(), 30000);
  const res = await fetch(`${api}/threads/${thread}/stream/events`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ channels: CHANNELS, ...(since != null ? { since } : {}) }),
    signal: ac.signal,
  });
  const reader = res.body.getReader();
  const dec = new TextDecoder();
  let buf = "";
  const out = [];
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) throw new Error(`stream ended before ${until}`);
      buf += dec.decode(value, { stream: true }).replaceAll("\r\n", "\n");
      let i;
      while ((i = buf.indexOf("\n\n")) >= 0) {
        const frame = buf.slice(0, i);
        buf = buf.slice(i + 2);
        const data = frame.split("\n").find((l) => l.startsWith("data: "));
        if (!data) continue;
        const ev = JSON.parse(data.slice(6));
        out.push(ev);
        if (ev.method === "lifecycle" && ev.params.namespace.length === 0 && ev.params.data.event === until) {
          // Events the reference sends right after the terminal one.
          await new Promise((r) => setTimeout(r, 300));
          return out;
        }
      }
    }
  } finally {
    clearTimeout(timer);
    ac.abort();
  }
}

export async function converse(api) {
  const thread = randomUUID();
  const input = { messages: [{ type: "human", content: "weather in Paris?" }] };
  await post(`${api}/threads/${thread}/commands`, { id: 1, method: "run.start", params: { assistant_id: "weather", input } });
  const first = await streamUntil(api, thread, null, "interrupted");
  const ask = first.find((e) => e.method === "input.requested");
  const answer = await (
    await post(`${api}/threads/${thread}/commands`, {
      id: 2,
      method: "input.respond",
      params: { namespace: ask.params.namespace, interrupt_id: ask.params.data.interrupt_id, response: { decisions: [{ type: "approve" }] } },
    })
  ).json();
  if (answer.type !== "success") throw new Error(`input.respond: ${JSON.stringify(answer)}`);
  const since = Math.max(...first.map((e) => e.seq));
  const second = await streamUntil(api, thread, since, "completed");
  return { first, second };
}
