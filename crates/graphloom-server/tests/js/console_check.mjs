// The console of a server in Debian's Chromium: `node console_check.mjs <api url> <graph id>
// <thread id>`. Checks that the graphs page draws the graph (its node names in the SVG)
// and that the thread page lists the thread's checkpoints and shows its state, with no
// page error. Prints {"ok": true, "checks": [...], "nodes": [...]} at the end.
import { chromium } from "playwright-core";

const [url, graph, thread] = process.argv.slice(2);
if (!thread) throw new Error("usage: node console_check.mjs <api url> <graph id> <thread id>");
const checks = [];
function check(name, cond, detail) {
  if (!cond) throw new Error(`check failed: ${name}: ${JSON.stringify(detail)?.slice(0, 3000)}`);
  checks.push(name);
}
const browser = await chromium.launch({
  executablePath: process.env.GRAPHLOOM_CHROMIUM || "/usr/bin/chromium",
  args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
});
try {
  const page = await browser.newPage();
  const errors = [];
  page.on("pageerror", (e) => errors.push(String(e)));
  await page.goto(`${url}/ui/graphs`);
  await page.waitForSelector(`svg[data-graph="${graph}"]`, { timeout: 20000 });
  const nodes = await page.$$eval(`svg[data-graph="${graph}"] text`, (ts) => ts.map((t) => t.textContent));
  check("the graph is drawn", nodes.includes("START") && nodes.includes("END") && nodes.length > 2, nodes);
  await page.goto(`${url}/ui/threads/${thread}`);
  await page.waitForFunction(() => document.querySelector("main")?.textContent.includes("Checkpoints"), null, { timeout: 20000 });
  const main = await page.textContent("main");
  check("the thread page shows the thread's graph", main.includes(`graph ${graph}`), main.slice(0, 500));
  check("the thread page shows a state", main.includes("State"), main.slice(0, 2000));
  check("no page error", errors.length === 0, errors);
  console.log(JSON.stringify({ ok: true, checks, nodes }));
} finally {
  await browser.close();
}
