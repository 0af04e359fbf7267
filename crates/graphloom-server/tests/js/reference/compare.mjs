// Hold a server's thread-protocol frames to the reference's: `node compare.mjs <api url>`
// drives the same conversation as record.mjs did against `langgraph dev` (frames.json)
// and compares, channel by channel, what both send (values, messages, lifecycle, input):
// ids, timestamps and sequence numbers aside, and graphloom's additions (a message
// event's `node`, a message-finish `reason`/`usage`) left out. The reference orders a
// subgraph's first values before its `started` event and its root's end before its
// subgraph's; so events are compared in order per channel and namespace, not across them.
// Values are compared as the states they show (messages by type and text, consecutive
// repeats as one).
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { converse } from "./drive.mjs";

const api = process.argv[2];
const here = path.dirname(fileURLToPath(import.meta.url));
const reference = JSON.parse(fs.readFileSync(path.join(here, "frames.json"), "utf8"));
const ours = await converse(api);
const checks = [];

const nsKey = (ns) => ns.map((s) => s.split(":")[0]).join("/") || "(root)";
const text = (content) =>
  typeof content === "string"
    ? content
    : Array.isArray(content)
      ? content.filter((b) => b?.type === "text").map((b) => b.text).join("")
      : JSON.stringify(content);

/** JSON with object keys sorted (key order carries no meaning). */
const canon = (v) =>
  Array.isArray(v)
    ? `[${v.map(canon).join(",")}]`
    : v && typeof v === "object"
      ? `{${Object.keys(v).sort().map((k) => `${JSON.stringify(k)}:${canon(v[k])}`).join(",")}}`
      : JSON.stringify(v);

function view(frames) {
  const events = [...frames.first, ...frames.second];
  const by = {};
  const push = (k, v) => (by[k] ??= []).push(canon(v));
  for (const e of events) {
    const ns = nsKey(e.params.namespace);
    const d = e.params.data;
    switch (e.method) {
      case "messages": {
        const { id, reason, usage, ...rest } = d;
        push(`messages@${ns}`, rest);
        break;
      }
      case "lifecycle":
        push(`lifecycle@${ns}`, [d.event, d.graph_name]);
        break;
      case "input.requested":
        push(`input@${ns}`, d.payload);
        break;
      case "values": {
        const state = (d.messages ?? []).map((m) => [m.type, text(m.content)]);
        const list = (by[`values@${ns}`] ??= []);
        const s = canon(state);
        if (list.at(-1) !== s) list.push(s);
        break;
      }
      default:
        break;
    }
  }
  return by;
}

const a = view(ours);
const b = view(reference);
const keys = [...new Set([...Object.keys(a), ...Object.keys(b)])].sort();
const diffs = [];
for (const k of keys) {
  const x = JSON.stringify(a[k] ?? []);
  const y = JSON.stringify(b[k] ?? []);
  if (x === y) checks.push(k);
  else diffs.push({ channel: k, graphloom: a[k] ?? [], reference: b[k] ?? [] });
}
if (diffs.length > 0) {
  console.error(JSON.stringify(diffs, null, 1));
  throw new Error(`frames differ from the reference on ${diffs.map((d) => d.channel).join(", ")}`);
}
console.log(JSON.stringify({ ok: true, checks }));
process.exit(0);
