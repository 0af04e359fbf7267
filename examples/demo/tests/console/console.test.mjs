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
