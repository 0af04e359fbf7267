// graphloom console: loads the server-rendered fragment of each page with the API key,
// sends what a person does through the run-centric API, and follows live runs over SSE.
// Plain JavaScript, no dependency. Text from runs is only ever set as text, never as HTML.
"use strict";

(() => {
  const KEY = "graphloom.apiKey";
  // `debug` carries each task's start and end with the server's time: node timings are the
  // nodes' own, even when the stream is read after the run.
  const STREAM_MODES = ["values", "updates", "messages-tuple", "debug"];
  const view = () => document.getElementById("view");
  const timings = (window.__glTimings = window.__glTimings || []);
  let generation = 0; // bumps on every navigation; stale work stops
  let graphWatch = null; // the graphs page's runs in flight
  let streams = []; // the event streams the current view reads; closed when it goes

  // ---- the API key ---------------------------------------------------------------------
  const key = () => sessionStorage.getItem(KEY) || "";
  function headers(extra) {
    const h = Object.assign({}, extra || {});
    if (key()) h["x-api-key"] = key();
    return h;
  }
  async function api(method, path, body) {
    const res = await fetch(path, {
      method,
      headers: headers(body === undefined ? {} : { "content-type": "application/json" }),
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    let data = null;
    try {
      data = text ? JSON.parse(text) : null;
    } catch (_) {
      data = text;
    }
    if (res.status === 401) {
      showLogin(true);
      throw new Error("the API key was refused");
    }
    if (!res.ok) {
      const detail = data && data.detail ? data.detail : res.statusText;
      throw new Error(`${res.status}: ${typeof detail === "string" ? detail : JSON.stringify(detail)}`);
    }
    return data;
  }

  function showLogin(refused) {
    const login = document.getElementById("login");
    login.hidden = false;
    view().replaceChildren();
    const err = document.getElementById("login-error");
    if (refused && key()) {
      err.textContent = "That API key was refused: check it and try again.";
      err.hidden = false;
    } else {
      err.hidden = true;
    }
    document.getElementById("login-key").focus();
  }

  // ---- pages -----------------------------------------------------------------------------
  function fragmentUrl() {
    let path = location.pathname.replace(/^\/ui\/?/, "");
    if (path === "" || path === "/") path = "graphs";
    return `/ui/frag/${path}${location.search}`;
  }

  async function render() {
    const my = ++generation;
    // A stream of a quiet run would otherwise hold its connection until its next event.
    streams.forEach((c) => c.abort());
    streams = [];
    const started = performance.now();
    const section = (location.pathname.split("/")[2] || "graphs").replace("runs", "threads");
    document.querySelectorAll("nav a").forEach((a) => a.classList.toggle("active", a.dataset.section === section));
    let res;
    try {
      res = await fetch(fragmentUrl(), { headers: headers() });
    } catch (e) {
      setBanner(`Cannot reach the server: ${e.message}`, "error");
      return;
    }
    if (my !== generation) return;
    if (res.status === 401) {
      showLogin(true);
      return;
    }
    document.getElementById("login").hidden = true;
    document.getElementById("logout").hidden = !key();
    const html = await res.text();
    if (my !== generation) return;
    const loaded = performance.now();
    view().innerHTML = html;
    document.title = `${(view().querySelector("h1") || {}).textContent || "graphloom"} · graphloom console`;
    hydrate(view(), my);
    timings.push({ url: location.pathname + location.search, status: res.status, fetchMs: loaded - started, totalMs: performance.now() - started });
    document.body.dataset.ready = String(my);
  }

  function navigate(url, replace) {
    if (replace) history.replaceState(null, "", url);
    else history.pushState(null, "", url);
    render();
  }

  function setBanner(text, kind, link) {
    const b = document.getElementById("banner");
    b.className = kind || "";
    b.replaceChildren(document.createTextNode(text));
    if (link) {
      const a = document.createElement("a");
      a.href = link.href;
      a.dataset.nav = "";
      a.textContent = link.text;
      b.append(" ", a);
    }
    b.hidden = !text;
  }

  // ---- what the fragments do -------------------------------------------------------------
  // An id shows only what tells it apart; a click copies it whole (and does not follow the
  // link it may sit in).
  function bindCopy(root) {
    root.querySelectorAll("code[data-copy]").forEach((c) => {
      if (c.closest("a")) return; // a link's id navigates; its tooltip has the whole
      c.title = `${c.dataset.copy} · click to copy`;
      c.classList.add("copyable");
      c.addEventListener("click", async (e) => {
        e.preventDefault();
        e.stopPropagation();
        const whole = c.dataset.copy;
        try {
          await navigator.clipboard.writeText(whole);
        } catch (_) {
          // Without clipboard access: select the whole id for a manual copy.
          const range = document.createRange();
          c.textContent = whole;
          range.selectNodeContents(c);
          const sel = window.getSelection();
          sel.removeAllRanges();
          sel.addRange(range);
        }
        c.classList.add("copied");
        c.dataset.copied = whole;
        setTimeout(() => c.classList.remove("copied"), 1200);
      });
    });
  }

  // What tells an id apart (as the server's pages show it): a UUID's last 8 characters, a
  // short id whole, a long one's head and tail.
  function distinct(id) {
    const s = String(id || "");
    if (/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(s)) return `…${s.slice(28)}`;
    if (s.length <= 20) return s;
    return `${s.slice(0, 10)}…${s.slice(-6)}`;
  }

  function hydrate(root, my) {
    bindCopy(root);
    root.querySelectorAll("form.search").forEach((f) =>
      f.addEventListener("submit", (e) => {
        e.preventDefault();
        const params = new URLSearchParams();
        new FormData(f).forEach((v, k) => v && params.set(k, v));
        navigate(`${f.dataset.search}?${params}`);
      })
    );
    root.querySelectorAll("form.start-run").forEach((f) => f.addEventListener("submit", (e) => startRun(e, f)));
    root.querySelectorAll("form.resume").forEach((f) => f.addEventListener("submit", (e) => resume(e, f)));
    root.querySelectorAll("form.fork").forEach((f) => f.addEventListener("submit", (e) => fork(e, f)));
    root.querySelectorAll("button.cancel").forEach((b) => b.addEventListener("click", () => cancel(b)));
    root.querySelectorAll("[data-download]").forEach((a) => a.addEventListener("click", (e) => download(e, a)));
    root.querySelectorAll(".svg-wrap[data-graph-svg]").forEach((w) => bindSubgraphs(w));
    graphWatch = root.querySelector("section.graph") ? watchGraphs(root, my) : null;
    const live = root.querySelector("[data-live-run]");
    if (live) followRun(live, my);
  }

  function formError(f, e) {
    const span = f.querySelector(".form-error");
    if (span) span.textContent = e ? e.message || String(e) : "";
  }

  function parseJson(text, what) {
    try {
      return JSON.parse(text);
    } catch (e) {
      throw new Error(`${what} is not valid JSON: ${e.message}`);
    }
  }

  function runBody(graph, extra) {
    return Object.assign(
      { assistant_id: graph, stream_mode: STREAM_MODES, stream_subgraphs: true, stream_resumable: true, on_disconnect: "continue" },
      extra
    );
  }

  async function startRun(e, f) {
    e.preventDefault();
    formError(f);
    try {
      const input = parseJson(f.elements.input.value, "the input");
      const graph = f.dataset.graph;
      let thread = f.dataset.thread;
      if (!thread) thread = (await api("POST", "/threads", { metadata: { graph_id: graph } })).thread_id;
      const run = await api("POST", `/threads/${thread}/runs`, runBody(graph, { input }));
      if (f.elements.here && f.elements.here.checked && graphWatch) graphWatch.follow(graph, thread, run.run_id);
      else navigate(`/ui/runs/${thread}/${run.run_id}`);
    } catch (err) {
      formError(f, err);
    }
  }

  function decisionsOf(f) {
    return Array.from(f.querySelectorAll("fieldset.action")).map((fs) => {
      const n = fs.dataset.index;
      const type = (fs.querySelector(`input[name="decision-${n}"]:checked`) || {}).value || "approve";
      const message = (fs.querySelector(`[name="message-${n}"]`) || {}).value || "";
      if (type === "edit") {
        const args = parseJson(fs.querySelector(`[name="args-${n}"]`).value, "the edited arguments");
        return { type, edited_action: { name: fs.dataset.name, args } };
      }
      if (type === "reject") return message ? { type, message } : { type };
      if (type === "respond") return { type, message };
      return { type };
    });
  }

  async function resume(e, f) {
    e.preventDefault();
    formError(f);
    const thread = view().querySelector("[data-thread]");
    try {
      const value = f.dataset.kind === "hitl" ? { decisions: decisionsOf(f) } : parseJson(f.elements.value.value, "the answer");
      const resumeValue = Number(f.dataset.count) > 1 ? { [f.dataset.interrupt]: value } : value;
      const run = await api(
        "POST",
        `/threads/${thread.dataset.thread}/runs`,
        runBody(thread.dataset.graph, { command: { resume: resumeValue } })
      );
      f.querySelector("button[type=submit]").disabled = true;
      await awaitRun(thread.dataset.thread, run.run_id);
    } catch (err) {
      formError(f, err);
    }
  }

  // A run started from a thread's page: say so, wait for its end, then show the thread again.
  async function awaitRun(threadId, runId) {
    const my = generation;
    setBanner(`Run ${distinct(runId)} is running…`, "info", { href: `/ui/runs/${threadId}/${runId}`, text: "watch it live" });
    try {
      await api("GET", `/threads/${threadId}/runs/${runId}/join`);
      const run = await api("GET", `/threads/${threadId}/runs/${runId}`);
      setBanner(`Run ${distinct(runId)} ended: ${run.status}.`, run.status === "error" ? "error" : "ok", {
        href: `/ui/runs/${threadId}/${runId}`,
        text: "see it",
      });
    } catch (err) {
      setBanner(`Run ${distinct(runId)}: ${err.message}`, "error");
    }
    if (my === generation) render();
  }

  async function fork(e, f) {
    e.preventDefault();
    formError(f);
    const thread = view().querySelector("[data-thread]");
    try {
      const values = parseJson(f.elements.values.value, "the values");
      const body = { values, checkpoint_id: f.dataset.checkpoint };
      if (f.elements.as_node.value.trim()) body.as_node = f.elements.as_node.value.trim();
      const saved = await api("POST", `/threads/${thread.dataset.thread}/state`, body);
      const id = saved.checkpoint.checkpoint_id;
      setBanner(`Forked: checkpoint ${distinct(id)} branches from ${distinct(f.dataset.checkpoint)}.`, "ok");
      if (f.elements.run.checked) {
        const run = await api("POST", `/threads/${thread.dataset.thread}/runs`, runBody(thread.dataset.graph, { checkpoint_id: id, input: null }));
        history.pushState(null, "", `/ui/threads/${thread.dataset.thread}?at=${id}`);
        await awaitRun(thread.dataset.thread, run.run_id);
      } else {
        navigate(`/ui/threads/${thread.dataset.thread}?at=${id}`);
      }
    } catch (err) {
      formError(f, err);
    }
  }

  async function cancel(b) {
    const thread = view().querySelector("[data-thread]").dataset.thread;
    b.disabled = true;
    try {
      await api("POST", `/threads/${thread}/runs/${b.dataset.run}/cancel?wait=true&action=interrupt`);
      setBanner(`Run ${distinct(b.dataset.run)} cancelled.`, "ok");
    } catch (err) {
      setBanner(err.message, "error");
    }
    render();
  }

  async function download(e, a) {
    e.preventDefault();
    const res = await fetch(a.dataset.download, { headers: headers() });
    if (!res.ok) return setBanner(`Download failed: ${res.status}`, "error");
    const url = URL.createObjectURL(await res.blob());
    const tmp = document.createElement("a");
    tmp.href = url;
    tmp.download = a.dataset.filename || "state.json";
    document.body.append(tmp);
    tmp.click();
    tmp.remove();
    setTimeout(() => URL.revokeObjectURL(url), 10000);
  }

  // Subgraph boxes expand (and collapse) on click: the server draws the graph again.
  function bindSubgraphs(wrap) {
    const open = new Set((wrap.dataset.expand || "").split(",").filter(Boolean));
    wrap.addEventListener("click", async (e) => {
      const box = e.target.closest("[data-subgraph]");
      if (!box) return;
      const path = box.dataset.subgraph;
      if (open.has(path)) {
        for (const p of Array.from(open)) if (p === path || p.startsWith(path + "|")) open.delete(p);
      } else open.add(path);
      const res = await fetch(`/ui/frag/graphs/${encodeURIComponent(wrap.dataset.graphSvg)}/svg?expand=${encodeURIComponent(Array.from(open).join(","))}`, { headers: headers() });
      if (res.ok) {
        wrap.innerHTML = await res.text();
        wrap.dataset.expand = Array.from(open).join(",");
      }
    });
  }

  // ---- a live run --------------------------------------------------------------------------
  // Server-sent events read with fetch (EventSource cannot send the key), split into frames.
  async function* sse(url, my) {
    const closer = new AbortController();
    streams.push(closer);
    const res = await fetch(url, { headers: headers({ accept: "text/event-stream" }), signal: closer.signal });
    if (res.status === 401) return showLogin(true);
    if (!res.ok || !res.body) throw new Error(`stream: ${res.status}`);
    const reader = res.body.getReader();
    const decoder = new TextDecoder();
    let buf = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done || my !== generation) break;
      buf += decoder.decode(value, { stream: true });
      let cut;
      while ((cut = buf.search(/\r?\n\r?\n/)) >= 0) {
        const block = buf.slice(0, cut);
        buf = buf.slice(cut).replace(/^\r?\n\r?\n/, "");
        let event = "message";
        const data = [];
        for (const line of block.split(/\r?\n/)) {
          if (line.startsWith("event:")) event = line.slice(6).trim();
          else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
        }
        if (data.length) yield { event, data: data.join("\n") };
      }
    }
    if (my !== generation) reader.cancel().catch(() => {});
  }

  function textOf(content) {
    if (typeof content === "string") return content;
    if (Array.isArray(content)) return content.map((p) => (typeof p === "string" ? p : p && p.text) || "").join("");
    return "";
  }

  // A task's start or end: from a `tasks` event, or from a `debug` one, which also carries
  // the server's time (`at`, ms since the epoch, with the microseconds it sends).
  function taskOf(base, data) {
    if (!data || typeof data !== "object") return null;
    if (base === "tasks" && data.id) return { p: data, start: "triggers" in data || "input" in data, at: null, step: null };
    if (base === "debug" && (data.type === "task" || data.type === "task_result") && data.payload && data.payload.id) {
      const ts = typeof data.timestamp === "string" ? data.timestamp : "";
      const frac = (ts.match(/\.(\d+)/) || [, ""])[1];
      const whole = Date.parse(ts.replace(/\.\d+/, ""));
      const at = Number.isNaN(whole) ? null : whole + (frac ? Number(`0.${frac}`) * 1000 : 0);
      return { p: data.payload, start: data.type === "task", at, step: data.step };
    }
    return null;
  }

  // The box of a node in a drawing: its path through the subgraphs of the event's namespace.
  function nodePath(ns, name) {
    return ns.map((s) => s.split(":")[0]).concat([name]).join("|");
  }

  // The graphs page: the owner's runs in flight (asked every second) and the runs started
  // here light their graph's nodes as their tasks start, and put them back as they end.
  function watchGraphs(root, my) {
    const followed = new Map(); // run id -> its watch
    const stats = (window.__glGraphs = { runs: [], lit: [] });
    const sectionOf = (graph) => root.querySelector(`section.graph[data-graph="${CSS.escape(graph)}"]`);
    const light = (s, path, on) => {
      const el = s.querySelector(`svg.gl-graph [data-node="${CSS.escape(path)}"]`);
      if (!el) return;
      el.classList.toggle("gl-active", on);
      if (on) stats.lit.push(path);
    };
    function follow(graph, thread, run, next) {
      if (followed.has(run)) return followed.get(run);
      const s = sectionOf(graph);
      if (!s) return null;
      const w = { streamed: false, next: [], done: false };
      followed.set(run, w);
      const seen = { graph, thread, run, done: false };
      stats.runs.push(seen);
      const list = s.querySelector("ul.live-runs");
      const li = document.createElement("li");
      li.dataset.run = run;
      const code = document.createElement("code");
      code.textContent = distinct(run);
      const a = document.createElement("a");
      a.href = `/ui/runs/${thread}/${run}`;
      a.dataset.nav = "";
      a.textContent = "follow it live";
      li.append("Run ", code, " is running · ", a);
      if (list) {
        list.append(li);
        list.hidden = false;
      }
      // The nodes the thread runs next, for a run whose stream has no task events.
      w.showNext = (names) => {
        if (w.streamed || w.done) return;
        for (const n of w.next) if (!names.includes(n)) light(s, n, false);
        for (const n of names) if (!w.next.includes(n)) light(s, n, true);
        w.next = names.slice();
      };
      w.showNext(next || []);
      const running = new Map(); // task id -> node path
      (async () => {
        try {
          for await (const { event, data } of sse(`/threads/${thread}/runs/${run}/stream`, my)) {
            const [base, ...ns] = event.split("|");
            let parsed = null;
            try {
              parsed = JSON.parse(data);
            } catch (_) {
              continue;
            }
            const t = taskOf(base, parsed);
            if (!t) continue;
            if (!w.streamed) {
              w.showNext([]);
              w.streamed = true;
            }
            const path = nodePath(ns, t.p.name);
            if (t.start) {
              running.set(t.p.id, path);
              light(s, path, true);
            } else {
              running.delete(t.p.id);
              if (!Array.from(running.values()).includes(path)) light(s, path, false);
            }
          }
        } catch (_) {}
        if (my !== generation) return;
        w.showNext([]);
        w.done = true;
        for (const p of running.values()) light(s, p, false);
        li.remove();
        if (list && !list.children.length) list.hidden = true;
        seen.done = true;
      })();
      return w;
    }
    const poll = async () => {
      if (my !== generation) return;
      try {
        const res = await fetch("/ui/frag/graphs/live", { headers: headers() });
        if (res.ok && my === generation) {
          for (const r of await res.json()) {
            const w = follow(r.graph, r.thread, r.run, (r.next || []).filter((n) => typeof n === "string"));
            if (w) w.showNext((r.next || []).filter((n) => typeof n === "string"));
          }
        }
      } catch (_) {}
      if (my === generation) setTimeout(poll, 1000);
    };
    poll();
    return { follow };
  }

  function followRun(root, my) {
    const thread = root.dataset.thread;
    const runId = root.dataset.liveRun;
    const tokens = root.querySelector("#tokens");
    const tools = root.querySelector("#tools");
    const timingsBody = root.querySelector("#timings");
    const svg = root.querySelector("svg.gl-graph");
    const started = new Map(); // task id -> {at, row}
    const blocks = new Map(); // message id -> its block of text
    let lastBlock = null;
    const blockFor = (id) => {
      if (id && blocks.has(id)) return blocks.get(id);
      if (!id && lastBlock) return lastBlock;
      const b = document.createElement("span");
      b.className = "msg-block";
      if (id) {
        b.dataset.message = id;
        blocks.set(id, b);
      }
      tokens.append(b);
      lastBlock = b;
      return b;
    };
    const seenTools = new Set();
    const usage = new Map(); // model -> [in, out]
    const usageSeen = new Set();
    const answers = new Set(); // ids of the model's answers seen
    const stats = (window.__glLive = { run: runId, tokens: 0, events: 0, text: "", firstEventMs: null, lastTokenMs: null, done: false });
    const t0 = performance.now();
    const box = (ns, name) => (svg ? svg.querySelector(`[data-node="${CSS.escape(nodePath(ns, name))}"]`) : null);
    const addTool = (id, label, body, cls) => {
      const li = document.createElement("li");
      li.className = cls;
      if (id) li.dataset.call = id;
      const b = document.createElement("b");
      b.textContent = label;
      const pre = document.createElement("pre");
      pre.textContent = body;
      li.append(b, pre);
      tools.append(li);
    };
    const onMessage = (m) => {
      const type = m.type || m.role;
      if ((type === "ai" || type === "assistant") && Array.isArray(m.tool_calls)) {
        for (const c of m.tool_calls) {
          if (!c.id || seenTools.has("call:" + c.id)) continue;
          seenTools.add("call:" + c.id);
          addTool(c.id, `→ ${c.name}`, JSON.stringify(c.args, null, 2), "call");
        }
      }
      if (type === "tool" && m.tool_call_id && !seenTools.has("result:" + m.tool_call_id)) {
        seenTools.add("result:" + m.tool_call_id);
        addTool(m.tool_call_id, `← ${m.name || "result"}${m.status === "error" ? " (error)" : ""}`, textOf(m.content), "result");
      }
      if ((type === "ai" || type === "assistant") && m.id && !answers.has(m.id)) {
        answers.add(m.id);
        usageSoon();
      }
      const u = m.usage_metadata;
      if (u && (m.id ? !usageSeen.has(m.id) : true)) {
        if (m.id) usageSeen.add(m.id);
        const model = (m.response_metadata && m.response_metadata.model_name) || "unknown";
        const cur = usage.get(model) || [0, 0];
        usage.set(model, [cur[0] + (u.input_tokens || 0), cur[1] + (u.output_tokens || 0)]);
        usageSoon();
      }
    };
    // Tokens and cost follow the run: refreshed shortly after each model answer.
    let usageTimer = null;
    const usageSoon = () => {
      if (usageTimer === null) usageTimer = setTimeout(() => ((usageTimer = null), showUsage()), 300);
    };
    const showUsage = async () => {
      if (my !== generation) return;
      if (!usage.size) {
        if (answers.size) {
          const p = document.createElement("p");
          p.className = "muted";
          p.textContent = `${answers.size} model answer${answers.size === 1 ? "" : "s"}; no token usage reported.`;
          root.querySelector("#usage").replaceChildren(p);
        }
        return;
      }
      const q = Array.from(usage, ([m, [i, o]]) => `m=${encodeURIComponent(`${m}:${i}:${o}`)}`).join("&");
      const res = await fetch(`/ui/frag/usage?${q}`, { headers: headers() });
      if (res.ok && my === generation) root.querySelector("#usage").innerHTML = await res.text();
    };
    const handle = (event, data) => {
      stats.events += 1;
      if (stats.firstEventMs === null) stats.firstEventMs = performance.now() - t0;
      const [base, ...nsParts] = event.split("|");
      const ns = nsParts;
      if (base === "messages" && Array.isArray(data)) {
        const [chunk] = data;
        const type = chunk && (chunk.type || chunk.role);
        if (type === "AIMessageChunk" || type === "ai") {
          const t = textOf(chunk.content);
          if (t) {
            blockFor(chunk.id).append(document.createTextNode(t));
            stats.tokens += 1;
            stats.text += t;
            stats.lastTokenMs = performance.now() - t0;
          }
        }
        if (chunk) onMessage(chunk);
      } else if (taskOf(base, data)) {
        const task = taskOf(base, data);
        const p = task.p;
        const el = box(ns, p.name);
        const at = task.at === null ? Date.now() : task.at;
        if (task.start) {
          if (!started.has(p.id)) {
            const row = document.createElement("tr");
            row.dataset.node = p.name;
            for (const v of [ns.length ? `${ns.map((s) => s.split(":")[0]).join("/")}/${p.name}` : p.name, String(task.step ?? ""), "…", "running"]) {
              const td = document.createElement("td");
              td.textContent = v;
              row.append(td);
            }
            timingsBody.append(row);
            started.set(p.id, { at, row });
          }
          if (el) el.classList.add("gl-active");
        } else {
          const s = started.get(p.id);
          if (s) {
            const ms = Math.max(0, at - s.at);
            s.row.dataset.ms = ms.toFixed(1);
            s.row.children[2].textContent = ms.toFixed(0);
            s.row.children[3].textContent = p.error ? "error" : (p.interrupts || []).length ? "interrupted" : "done";
          }
          if (el) {
            el.classList.remove("gl-active");
            el.classList.add(p.error ? "gl-failed" : "gl-done");
          }
        }
      } else if (base === "updates" && data && typeof data === "object") {
        for (const update of Object.values(data)) {
          if (update && Array.isArray(update.messages)) update.messages.forEach(onMessage);
        }
      } else if (base === "values" && data && Array.isArray(data.messages) && !ns.length) {
        data.messages.forEach(onMessage);
      } else if (base === "error") {
        addTool(null, "error", typeof data === "string" ? data : JSON.stringify(data, null, 2), "error");
      }
      root.querySelector("#token-count").textContent = String(stats.tokens);
      root.querySelector("#event-count").textContent = String(stats.events);
    };
    (async () => {
      try {
        for await (const { event, data } of sse(`/threads/${thread}/runs/${runId}/stream`, my)) {
          let parsed = null;
          try {
            parsed = JSON.parse(data);
          } catch (_) {
            parsed = data;
          }
          handle(event, parsed);
        }
      } catch (err) {
        if (my === generation) setBanner(err.message, "error");
      }
      if (my !== generation) return;
      await showUsage();
      try {
        const run = await api("GET", `/threads/${thread}/runs/${runId}`);
        root.dataset.status = run.status;
        const badge = root.querySelector(".run-status .badge");
        badge.className = `badge ${run.status}`;
        badge.textContent = run.status;
        const end = root.querySelector("#run-end");
        end.replaceChildren(document.createTextNode(`The run ended: ${run.status}. `));
        const a = document.createElement("a");
        a.href = `/ui/threads/${thread}`;
        a.dataset.nav = "";
        a.textContent = "Open its thread";
        end.append(a);
      } catch (_) {}
      svg && svg.querySelectorAll(".gl-active").forEach((el) => el.classList.remove("gl-active"));
      stats.done = true;
      root.dataset.done = "true";
    })();
  }

  // ---- start --------------------------------------------------------------------------------
  document.addEventListener("click", (e) => {
    const a = e.target.closest("a[data-nav]");
    if (!a || e.ctrlKey || e.metaKey || e.shiftKey || a.target) return;
    e.preventDefault();
    setBanner("");
    navigate(a.getAttribute("href"));
  });
  window.addEventListener("popstate", render);
  document.addEventListener("DOMContentLoaded", () => {
    document.getElementById("login-form").addEventListener("submit", (e) => {
      e.preventDefault();
      sessionStorage.setItem(KEY, document.getElementById("login-key").value.trim());
      render();
    });
    document.getElementById("logout").addEventListener("click", () => {
      sessionStorage.removeItem(KEY);
      render();
    });
    render();
  });
})();
