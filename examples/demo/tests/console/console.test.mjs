// The console at /ui in Debian's Chromium, driven by Playwright. Run by
// examples/demo/tests/console.rs, which starts the servers and makes the threads named in
// GL_THREADS; it fails unless this script ends with "console: all checks passed".
import { chromium } from "playwright-core";
import assert from "node:assert/strict";
import { statSync } from "node:fs";
import { join } from "node:path";

const env = process.env;
const URL = env.GL_URL; // graphloom serve of the five seed graphs, keys for ann and bob
const LIMITS = env.GL_LIMITS_URL; // a server (auth off) with the `talk` graph
const KEY = env.GL_KEY; // ann's key
const THREADS = JSON.parse(env.GL_THREADS);
const TOKENS = Number(env.GL_TOKENS);
const CHECKPOINTS = Number(env.GL_CHECKPOINTS);
const SHOTS = env.GL_SHOTS;
const WAIT = 60_000;
const measured = {};

function step(name) {
  console.log(`- ${name}`);
}

const context = await chromium.launchPersistentContext(env.GL_PROFILE, {
  executablePath: env.GL_CHROMIUM,
  headless: true,
  viewport: { width: 1400, height: 900 },
  acceptDownloads: true,
  args: [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
  ],
});
const offsite = [];
await context.route("**/*", (route) => {
  const host = new globalThis.URL(route.request().url()).hostname;
  if (host === "127.0.0.1" || host === "localhost") return route.continue();
  offsite.push(route.request().url());
  return route.abort();
});
const page = context.pages()[0] || (await context.newPage());
const errors = [];
page.on("pageerror", (e) => errors.push(String(e)));
page.on("console", (m) => m.type() === "error" && !/status of 40[14]/.test(m.text()) && errors.push(m.text()));

async function shot(name) {
  await page.screenshot({ path: join(SHOTS, `${name}.png`), fullPage: false });
}
async function ready() {
  // After a page load: the shell marks each rendered fragment with its render number.
  await page.waitForFunction(() => document.body.dataset.ready, null, { timeout: WAIT });
}
async function go(url) {
  await page.goto(url);
  await ready();
}
// Do something that renders the view again in place (no page load), and wait for that
// render: the shell's render number changes.
async function rendered(action) {
  const before = await page.evaluate(() => document.body.dataset.ready || "");
  await action();
  await page.waitForFunction((b) => document.body.dataset.ready && document.body.dataset.ready !== b, before, { timeout: WAIT });
}

try {
  // ---- sign in --------------------------------------------------------------------------
  step("a wrong API key shows a login error");
  await page.goto(`${URL}/ui`);
  await page.locator("#login").waitFor({ state: "visible", timeout: WAIT });
  await page.fill("#login-key", "not-a-key");
  await page.click("#login-form button");
  await page.locator("#login-error").waitFor({ state: "visible", timeout: WAIT });
  assert.match(await page.textContent("#login-error"), /refused/);
  await shot("login");
  await page.fill("#login-key", KEY);
  await page.click("#login-form button");

  // ---- graphs -----------------------------------------------------------------------------
  step("the five graphs are drawn");
  await page.locator("section.graph").nth(4).waitFor({ timeout: WAIT });
  const graphs = await page.$$eval("section.graph", (s) => s.map((e) => e.dataset.graph));
  assert.deepEqual(graphs.sort(), ["chat_runtime", "fraud_investigation", "memory_supervisor", "permit_filing", "support_chat"]);
  for (const g of graphs) {
    const nodes = await page.locator(`section.graph[data-graph="${g}"] svg.gl-graph [data-node]`).count();
    assert.ok(nodes >= 4, `${g}: ${nodes} boxes`);
  }
  const permit = page.locator('section.graph[data-graph="permit_filing"]');
  assert.equal(await permit.locator("svg .gl-conditional").count(), 18, "permit_filing: only declared destinations");
  assert.equal(await permit.locator("svg [data-node]").count(), 12);
  step("a subgraph expands on click");
  const ms = page.locator('section.graph[data-graph="memory_supervisor"]');
  await ms.locator('[data-subgraph="memory_writer"]').click();
  await ms.locator('[data-node="memory_writer|score"]').waitFor({ timeout: WAIT });
  await page.locator('section.graph[data-graph="fraud_investigation"]').scrollIntoViewIfNeeded();
  await page.evaluate(() => window.scrollTo(0, 0));
  await shot("graphs");

  // ---- a live run of permit_filing, stopping at its approval -------------------------------
  step("permit_filing starts from the console and stops at the approval");
  await permit.locator("details.start-run summary").click();
  await permit.locator("form.start-run button").click();
  await page.waitForURL(/\/ui\/runs\//, { timeout: WAIT });
  await page.locator('[data-live-run][data-done="true"]').waitFor({ timeout: WAIT });
  assert.ok((await page.locator("#timings tr").count()) >= 5, "node timings");
  assert.ok((await page.locator("svg .gl-node.gl-done").count()) >= 5, "nodes lit as they ran");
  assert.match(await page.textContent(".run-status"), /interrupted|success/);
  assert.doesNotMatch(await page.textContent("#usage"), /No model call yet/, "the model's calls are counted");
  const fit = await page.$eval(".svg-wrap.fit", (w) => {
    const wrap = w.getBoundingClientRect();
    const svg = w.querySelector("svg").getBoundingClientRect();
    return { wrapBottom: wrap.bottom, svgBottom: svg.bottom, svgHeight: svg.height, viewport: window.innerHeight };
  });
  assert.ok(fit.svgBottom <= fit.wrapBottom + 1 && fit.svgHeight <= fit.viewport, `the whole graph is in view: ${JSON.stringify(fit)}`);
  await page.evaluate(() => window.scrollTo(0, 0));
  await shot("run");
  await rendered(() => page.click("#run-end a"));
  await page.locator("form.resume").waitFor({ timeout: WAIT });
  assert.equal(await page.getAttribute("form.resume", "data-kind"), "hitl", "LangChain's HITL request gets the decision form");
  assert.match(await page.textContent(".thread h1"), /interrupted/);
  const before = await page.locator("table.timeline tbody tr").count();
  await page.locator("form.resume").scrollIntoViewIfNeeded();
  await shot("thread");

  step("approving in the form finishes the run and the timeline grows");
  await page.locator('form.resume input[type=radio][value="approve"]').check();
  // The form waits for the run's end, says so in the banner, then shows the thread again.
  await rendered(() => page.click("form.resume button[type=submit]"));
  assert.match(await page.textContent("#banner"), /ended: success/);
  await page.waitForFunction(() => /idle/.test(document.querySelector(".thread h1").textContent), null, { timeout: WAIT });
  const after = await page.locator("table.timeline tbody tr").count();
  assert.ok(after > before, `timeline grew: ${before} -> ${after}`);
  assert.equal(await page.locator("form.resume").count(), 0, "nothing pending any more");
  const threadUrl = page.url().split("?")[0];

  step("forking an older checkpoint with an edited value makes a new branch");
  const older = page.locator("table.timeline tbody tr").nth(4);
  const olderId = await older.getAttribute("data-checkpoint");
  await rendered(() => older.locator("a").click());
  await page.locator(`tr.selected[data-checkpoint="${olderId}"]`).waitFor({ timeout: WAIT });
  await page.locator("details.fork summary").click();
  await page.fill("form.fork textarea[name=values]", JSON.stringify({ tenant_id: "tenant-forked-by-console" }));
  await rendered(() => page.click("form.fork button[type=submit]"));
  const forked = new globalThis.URL(page.url()).searchParams.get("at");
  assert.ok(forked && forked !== olderId, `the page shows the new checkpoint: ${page.url()}`);
  const top = page.locator("table.timeline tbody tr").first();
  assert.match(await top.textContent(), /fork of/, "the new checkpoint branches off");
  assert.equal(await top.getAttribute("class"), "selected");
  assert.equal(await top.getAttribute("data-checkpoint"), forked);
  assert.match(await page.textContent(".state-tree"), /tenant-forked-by-console/);
  assert.match(await page.textContent("details.diff"), /tenant_id/);
  // The banner and the new branch at the top of the timeline.
  await page.evaluate(() => window.scrollTo(0, 0));
  await shot("fork");

  // ---- threads, owners, overview -----------------------------------------------------------
  step("the threads list: search, and another owner's thread is neither listed nor shown");
  await go(`${URL}/ui/threads`);
  const listed = await page.$$eval("tr[data-thread]", (r) => r.map((e) => e.dataset.thread));
  assert.ok(listed.length >= 1);
  assert.ok(!listed.includes(THREADS.bob), "Bob's thread is not listed");
  step("ids show what tells them apart");
  // Two more threads made in the same second: UUIDv7s that start alike.
  await page.evaluate(async (k) => {
    for (let i = 0; i < 2; i++) {
      await fetch("/threads", { method: "POST", headers: { "x-api-key": k, "content-type": "application/json" }, body: "{}" });
    }
  }, KEY);
  await go(`${URL}/ui/threads`);
  const shownIds = await page.$$eval("tr[data-thread] td a code", (c) => c.map((e) => e.textContent));
  assert.ok(shownIds.length >= 3, `threads listed: ${shownIds}`);
  assert.equal(new Set(shownIds).size, shownIds.length, `every thread reads differently: ${shownIds}`);
  await page.fill("form.search input[name=q]", "graph_id=permit_filing");
  await page.selectOption("form.search select[name=status]", "idle");
  await rendered(() => page.click("form.search button"));
  assert.match(page.url(), /status=idle/);
  assert.ok((await page.locator("tr[data-thread]").count()) >= 1, "the permit thread matches");
  await shot("threads");
  await go(`${URL}/ui/threads/${THREADS.bob}`);
  await page.locator(".error-page").waitFor({ timeout: WAIT });
  assert.match(await page.textContent(".error-page h1"), /404/);
  assert.equal(await page.locator(".error-page").getAttribute("data-status"), "404");
  await go(`${URL}/ui/threads/no-such-thread`);
  assert.match(await page.textContent(".error-page h1"), /404/);

  step("the overview reads the server's metrics");
  await go(`${URL}/ui/overview`);
  const success = Number(await page.textContent('.runs-by-status tr[data-status="success"] td.num'));
  assert.ok(success >= 1, `runs that succeeded: ${success}`);
  await shot("overview");
  await go(threadUrl);
  step("a click on the thread's id copies it whole");
  const wholeId = decodeURIComponent(threadUrl.split("/").pop());
  await page.click(".thread h1 code[data-copy]");
  await page.locator(".thread h1 code[data-copied]").waitFor({ timeout: WAIT });
  assert.equal(await page.getAttribute(".thread h1 code", "data-copied"), wholeId);
  assert.notEqual(wholeId.length, 0);

  // ---- limits: HTML, large state, long history, 1,000 tokens --------------------------------
  step("HTML planted in a message and a state value is shown, never run");
  await go(`${LIMITS}/ui/threads/${THREADS.xss}`);
  assert.equal(await page.evaluate(() => window.__pwned), undefined);
  assert.match(await page.textContent(".msg.human .text"), /<script>window.__pwned = 1<\/script>/);
  assert.equal(await page.locator("#view script, #view img").count(), 0);

  step("a state too large to render is cut, with a download link");
  await go(`${LIMITS}/ui/threads/${THREADS.big}`);
  await page.locator(".large-state").waitFor({ timeout: WAIT });
  const [download] = await Promise.all([page.waitForEvent("download"), page.click(".large-state a")]);
  assert.match(download.suggestedFilename(), /^state-.*\.json$/);
  const saved = join(env.GL_PROFILE, "state.json");
  await download.saveAs(saved);
  assert.ok(statSync(saved).size > 700_000, "the whole state is downloaded");

  step(`a thread of ${CHECKPOINTS} checkpoints opens a page at a time`);
  const opens = [];
  for (let i = 0; i < 5; i++) {
    const t0 = Date.now();
    await go(`${LIMITS}/ui/threads/${THREADS.long}`);
    opens.push({ wallMs: Date.now() - t0, ...(await page.evaluate(() => window.__glTimings.at(-1))) });
  }
  assert.equal(await page.locator("table.timeline tbody tr").count(), 50);
  const newest = await page.locator("table.timeline tbody tr").first().getAttribute("data-checkpoint");
  await rendered(() => page.click('nav.pager a[rel="next"]'));
  assert.equal(await page.locator("table.timeline tbody tr").count(), 50, "the second page");
  const older2 = await page.locator("table.timeline tbody tr").first().getAttribute("data-checkpoint");
  assert.ok(older2 !== newest, "the second page holds older checkpoints");
  const median = (xs) => xs.sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  measured.thread1000 = {
    checkpoints: CHECKPOINTS,
    fragmentFetchMsMedian: median(opens.map((o) => o.fetchMs)),
    renderedMsMedian: median(opens.map((o) => o.totalMs)),
    pageLoadMsMedian: median(opens.map((o) => o.wallMs)),
  };

  step(`a live run of ${TOKENS} tokens renders every token`);
  const runs = [];
  for (let i = 0; i < 3; i++) {
    await go(`${LIMITS}/ui/graphs`);
    const talk = page.locator('section.graph[data-graph="talk"]');
    await talk.locator("details.start-run summary").click();
    const t0 = Date.now();
    await talk.locator("form.start-run button").click();
    await page.waitForURL(/\/ui\/runs\//, { timeout: WAIT });
    await page.locator('[data-live-run][data-done="true"]').waitFor({ timeout: WAIT });
    const live = await page.evaluate(() => window.__glLive);
    assert.equal(live.tokens, TOKENS, "no token dropped");
    assert.ok(live.text.startsWith("t0 t1 ") && live.text.endsWith(`t${TOKENS - 1} `));
    assert.equal((await page.textContent("#tokens")).length, live.text.length);
    await page.locator("#usage table.usage").waitFor({ timeout: WAIT });
    assert.match(await page.textContent("#usage"), /gpt-4o-mini/);
    runs.push({ firstEventMs: live.firstEventMs, lastTokenMs: live.lastTokenMs, startToDoneMs: Date.now() - t0 });
  }
  measured.tokens1000 = {
    tokens: TOKENS,
    lastTokenMsMedian: median(runs.map((r) => r.lastTokenMs)),
    startToDoneMsMedian: median(runs.map((r) => r.startToDoneMs)),
  };

  // ---- the graphs page lights the nodes of live runs -----------------------------------------
  step("a run started on the graphs page lights each node while its task runs, then puts it back");
  await go(`${LIMITS}/ui/graphs`);
  const slow = page.locator('section.graph[data-graph="slow"]');
  // Every node that gets the highlight, in order, whatever the timing.
  await page.evaluate(() => {
    window.__glSeen = [];
    const wrap = document.querySelector('section.graph[data-graph="slow"] .svg-wrap');
    new MutationObserver((records) => {
      for (const r of records) if (r.target.classList.contains("gl-active")) window.__glSeen.push(r.target.dataset.node);
    }).observe(wrap, { attributes: true, attributeFilter: ["class"], subtree: true });
  });
  await slow.locator("details.start-run summary").click();
  await slow.locator("form.start-run input[name=here]").check();
  await slow.locator("form.start-run button").click();
  await page.waitForFunction(() => window.__glGraphs && window.__glGraphs.runs.length === 1 && window.__glGraphs.runs[0].done, null, { timeout: WAIT });
  assert.match(page.url(), /\/ui\/graphs$/, "the page stays on the graphs");
  assert.deepEqual([...new Set(await page.evaluate(() => window.__glSeen))], ["plan", "lookup", "reply"], "each node lit as it ran");
  assert.equal(await slow.locator("svg .gl-active").count(), 0, "no node stays lit after the run");
  assert.equal(await slow.locator("ul.live-runs li").count(), 0);
  const slowRun = await page.evaluate(() => window.__glGraphs.runs[0]);

  step("a run started elsewhere (values stream only) is found and lit, and put back when cancelled");
  const held = await page.evaluate(async () => {
    const post = async (path, body) => (await fetch(path, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) })).json();
    const t = await post("/threads", { metadata: { graph_id: "talk", kind: "held" } });
    const r = await post(`/threads/${t.thread_id}/runs`, { assistant_id: "talk", input: { messages: [{ type: "human", content: "hold it" }] } });
    return { thread: t.thread_id, run: r.run_id };
  });
  const talkSection = page.locator('section.graph[data-graph="talk"]');
  await talkSection.locator('svg [data-node="speak"].gl-active').waitFor({ timeout: WAIT });
  await talkSection.locator(`ul.live-runs li[data-run="${held.run}"]`).waitFor({ timeout: WAIT });
  await page.evaluate(async (h) => {
    await fetch(`/threads/${h.thread}/runs/${h.run}/cancel?wait=true&action=interrupt`, { method: "POST" });
  }, held);
  await talkSection.locator(`ul.live-runs li[data-run="${held.run}"]`).waitFor({ state: "detached", timeout: WAIT });
  assert.equal(await talkSection.locator("svg .gl-active").count(), 0, "the cancelled run's node is put back");

  // ---- the live run page: real node timings, separate messages, tool calls ----------------
  step("the live page of a finished run shows each node's own time, each message apart, the tool call and its result");
  await go(`${LIMITS}/ui/runs/${slowRun.thread}/${slowRun.run}`);
  await page.locator('[data-live-run][data-done="true"]').waitFor({ timeout: WAIT });
  const took = Object.fromEntries(await page.$$eval("#timings tr", (rows) => rows.map((r) => [r.dataset.node, Number(r.dataset.ms)])));
  // The stream is read after the run: times from arrival would all be about 0.
  assert.ok(took.plan >= 190 && took.lookup >= 190, `the sleeping nodes took their 200 ms: ${JSON.stringify(took)}`);
  assert.ok(took.reply < took.plan, `reply does not sleep: ${JSON.stringify(took)}`);
  const blocks = await page.$$eval("#tokens .msg-block", (b) => b.map((e) => [e.dataset.message, e.textContent]));
  assert.deepEqual(blocks, [["m-plan", "Let me look that up."], ["m-reply", "There are 3 permits."]], "two messages, each apart");
  assert.match(await page.textContent('#tools li.call[data-call="call-1"]'), /lookup[\s\S]*"q": "permits"/);
  assert.match(await page.textContent('#tools li.result[data-call="call-1"]'), /lookup[\s\S]*3 permits/);
  await page.evaluate(() => window.scrollTo(0, 0));

  // ---- threads list: metadata, status, pages ----------------------------------------------------
  step("the threads list: search by metadata, a page at a time");
  const ids = async () => page.$$eval("tr[data-thread]", (r) => r.map((e) => e.dataset.thread));
  await go(`${LIMITS}/ui/threads`);
  await page.fill("form.search input[name=q]", "kind=page");
  await rendered(() => page.click("form.search button"));
  assert.match(await page.textContent(".thread-count"), new RegExp(`^${THREADS.paged} threads`));
  const first = await ids();
  assert.equal(first.length, 20, "a page of 20");
  for (const m of await page.$$eval("tr[data-thread] td.meta", (t) => t.map((e) => e.textContent))) assert.match(m, /"kind": "page"/);
  await rendered(() => page.click('nav.pager a[rel="next"]'));
  const second = await ids();
  assert.equal(second.length, THREADS.paged - 20, "the rest on the second page");
  assert.ok(second.every((id) => !first.includes(id)), "the pages do not overlap");
  await rendered(() => page.click('nav.pager a[rel="prev"]'));
  assert.deepEqual(await ids(), first);
  await page.fill("form.search input[name=q]", '{"kind": "page", "n": 7}');
  await rendered(() => page.click("form.search button"));
  assert.equal((await ids()).length, 1, "a JSON filter matches one thread");
  assert.match(await page.textContent("tr[data-thread] td.meta"), /"n": 7/);

  step("the threads list: search by status");
  const asked = Object.values(THREADS.ask).sort();
  const byStatus = async (status) => {
    await go(`${LIMITS}/ui/threads`);
    await page.fill("form.search input[name=q]", "graph_id=ask");
    await page.selectOption("form.search select[name=status]", status);
    await rendered(() => page.click("form.search button"));
    for (const b of await page.$$eval("tr[data-thread] .badge", (x) => x.map((e) => e.textContent))) assert.equal(b, status);
    return (await ids()).sort();
  };
  assert.deepEqual(await byStatus("interrupted"), asked, "the four waiting threads");
  assert.deepEqual(await byStatus("idle"), [], "none of them idle");

  // ---- every way of answering an interrupt ------------------------------------------------------
  const kept = async (thread) =>
    page.evaluate(async (t) => {
      const s = await (await fetch(`/threads/${t}/state`)).json();
      return JSON.parse(s.values.blob[0]);
    }, thread);
  const answer = async (way, fill) => {
    step(`an interrupt answered in the form: ${way}`);
    await go(`${LIMITS}/ui/threads/${THREADS.ask[way]}`);
    await page.locator("form.resume").waitFor({ timeout: WAIT });
    await fill();
    await rendered(() => page.click("form.resume button[type=submit]"));
    assert.match(await page.textContent("#banner"), /ended: success/);
    assert.equal(await page.locator("form.resume").count(), 0, "nothing pending any more");
    return kept(THREADS.ask[way]);
  };
  const decide = (d) => page.locator(`form.resume input[type=radio][value="${d}"]`).check();
  assert.deepEqual(
    await answer("edit", async () => {
      await decide("edit");
      await page.fill('form.resume textarea[name="args-0"]', JSON.stringify({ to: "carol@example.com" }));
    }),
    { decisions: [{ type: "edit", edited_action: { name: "send_email", args: { to: "carol@example.com" } } }] }
  );
  assert.deepEqual(
    await answer("reject", async () => {
      await decide("reject");
      await page.fill('form.resume input[name="message-0"]', "not before Monday");
    }),
    { decisions: [{ type: "reject", message: "not before Monday" }] }
  );
  assert.deepEqual(
    await answer("respond", async () => {
      await decide("respond");
      await page.fill('form.resume input[name="message-0"]', "send it by fax");
    }),
    { decisions: [{ type: "respond", message: "send it by fax" }] }
  );
  assert.deepEqual(
    await answer("plain", async () => {
      assert.equal(await page.getAttribute("form.resume", "data-kind"), "json");
      await page.fill("form.resume textarea[name=value]", '{"colour": "green", "shades": [1, 2]}');
    }),
    { colour: "green", shades: [1, 2] }
  );
  assert.deepEqual(await byStatus("idle"), asked, "all four answered");

  // ---- a run from a fork ----------------------------------------------------------------------
  step("forking a checkpoint and running from the fork");
  await go(`${LIMITS}/ui/threads/${THREADS.fork}`);
  const firstStep = page.locator('table.timeline tbody tr[data-source="loop"]').last();
  const firstStepId = await firstStep.getAttribute("data-checkpoint");
  await rendered(() => firstStep.locator("a").click());
  await page.locator("details.fork summary").click();
  await page.fill("form.fork textarea[name=values]", JSON.stringify({ note: "forked" }));
  await page.locator("form.fork input[name=run]").check();
  await rendered(() => page.click("form.fork button[type=submit]"));
  assert.match(await page.textContent("#banner"), /ended: success/);
  const forkState = await page.evaluate(async (t) => (await fetch(`/threads/${t}/state`)).json(), THREADS.fork);
  assert.equal(forkState.values.note, "forked", "the run went on from the fork");
  assert.deepEqual(
    forkState.values.messages.map((m) => [m.type, m.content]),
    [["human", "hello"], ["ai", "you said: hello"]],
    "the fork's branch holds the answer of its own run"
  );
  const forkHistory = await page.evaluate(async (t) => (await fetch(`/threads/${t}/history?limit=20`)).json(), THREADS.fork);
  const forkPoint = forkHistory.find((h) => h.metadata.source === "update");
  assert.ok(forkPoint && forkPoint.parent_checkpoint_id === firstStepId, "the fork branches from the chosen checkpoint");
  assert.ok(forkHistory[0].checkpoint_id !== forkPoint.checkpoint_id, "a run wrote after the fork");
  assert.equal(await page.locator("table.runs tbody tr").count(), 2, "the thread's second run");

  step("a running run is cancelled from its thread's page");
  await go(`${LIMITS}/ui/graphs`);
  const talk = page.locator('section.graph[data-graph="talk"]');
  await talk.locator("details.start-run summary").click();
  await talk.locator("form.start-run textarea[name=input]").fill(JSON.stringify({ messages: [{ type: "human", content: "hold on" }] }));
  await talk.locator("form.start-run button").click();
  await page.waitForURL(/\/ui\/runs\//, { timeout: WAIT });
  const [, , , heldThread, heldRun] = new globalThis.URL(page.url()).pathname.split("/");
  await go(`${LIMITS}/ui/threads/${heldThread}`);
  const heldRow = page.locator(`tr[data-run="${heldRun}"]`);
  assert.match(await heldRow.getAttribute("data-status"), /pending|running/);
  await rendered(() => heldRow.locator("button.cancel").click());
  assert.match(await page.textContent("#banner"), /cancelled/);
  assert.equal(await heldRow.getAttribute("data-status"), "interrupted", "the run stopped");
  assert.equal(await heldRow.locator("button.cancel").count(), 0);

  assert.deepEqual(offsite, [], "no request leaves 127.0.0.1");
  assert.deepEqual(errors, [], "no script error on any page");
  console.log(`measurements: ${JSON.stringify(measured)}`);
  console.log("console: all checks passed");
} catch (e) {
  console.log(`failed at ${page.url()}: ${e.stack || e}`);
  try {
    await shot("failure");
    console.log(`screenshot: ${join(SHOTS, "failure.png")}`);
    console.log((await page.content()).slice(0, 4000));
  } catch (_) {}
  process.exitCode = 1;
} finally {
  await context.close();
}
