// The smallest chat page on @langchain/react's useStream: a send button, the messages,
// the pending interrupt with an approve button. Built by react_check.mjs with esbuild.
import React from "react";
import { createRoot } from "react-dom/client";
import { useStream } from "@langchain/react";

const apiUrl = new URLSearchParams(window.location.search).get("api");

function text(m) {
  if (typeof m.text === "string") return m.text;
  return typeof m.content === "string" ? m.content : JSON.stringify(m.content);
}

function App() {
  const stream = useStream({ assistantId: "weather", apiUrl });
  const send = () => stream.submit({ messages: [{ type: "human", content: "weather in Paris?" }] });
  const approve = () => stream.respond({ decisions: [{ type: "approve" }] });
  return (
    <main>
      <button id="send" onClick={send}>send</button>
      <ul id="messages">
        {stream.messages.map((m, i) => (
          <li key={m.id ?? i} className={typeof m.getType === "function" ? m.getType() : m.type}>
            {text(m)}
          </li>
        ))}
      </ul>
      {stream.interrupt ? (
        <div id="interrupt">
          <span id="action">{stream.interrupt.value?.action_requests?.[0]?.name}</span>
          <button id="approve" onClick={approve}>approve</button>
        </div>
      ) : null}
      <div id="loading">{String(stream.isLoading)}</div>
      <div id="error">{stream.error ? String(stream.error?.message ?? stream.error) : ""}</div>
    </main>
  );
}

createRoot(document.getElementById("root")).render(<App />);
