// A React page using @langchain/react's useStream, loaded in headless Chromium (Debian's,
// driven by playwright-core) against a server: `node react_check.mjs <api url>`. Sends a
// message, sees the answer stream in, approves the interrupt, sees the run finish.
// The page is served from another origin than the API, as a deployed frontend is: the
// server's CORS answer is part of what is checked.
import { build } from "esbuild";
import { chromium } from "playwright-core";
import http from "node:http";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

const api = process.argv[2];
if (!api) throw new Error("usage: node react_check.mjs <api url>");
const here = path.dirname(fileURLToPath(import.meta.url));
const checks = [];
function check(name, cond, detail) {
  if (!cond) throw new Error(`check failed: ${name}: ${JSON.stringify(detail)?.slice(0, 3000)}`);
  checks.push(name);
}

const bundle = await build({
  entryPoints: [path.join(here, "react/app.jsx")],
  bundle: true,
  write: false,
  format: "esm",
  platform: "browser",
  jsx: "automatic",
  define: { "process.env.NODE_ENV": '"production"' },
  logLevel: "silent",
});
const js = bundle.outputFiles[0].text;
const html = '<!doctype html><html><body><div id="root"></div><script type="module" src="/app.js"></script></body></html>';
const server = http.createServer((req, res) => {
  if (req.url.startsWith("/app.js")) {
    res.writeHead(200, { "content-type": "text/javascript" });
    res.end(js);
  } else {
    res.writeHead(200, { "content-type": "text/html" });
    res.end(html);
  }
});
await new Promise((r) => server.listen(0, "127.0.0.1", r));
const page_url = `http://127.0.0.1:${server.address().port}/?api=${encodeURIComponent(api)}`;

const profile = fs.mkdtempSync(path.join(os.tmpdir(), "graphloom-chromium-"));
// A fresh, empty profile (Playwright passes it as --user-data-dir).
const browser = await chromium.launchPersistentContext(profile, {
  executablePath: process.env.GRAPHLOOM_CHROMIUM || "/usr/bin/chromium",
  headless: true,
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
try {
  const page = await browser.newPage();
  const errors = [];
  page.on("pageerror", (e) => errors.push(String(e)));
  page.on("console", (m) => {
    if (m.type() === "error") errors.push(m.text());
  });
  await page.goto(page_url);
  await page.waitForSelector("#send", { timeout: 20000 });
  // Record every text the answer shows, to see it arrive in pieces.
  await page.evaluate(() => {
    window.__seen = [];
    new MutationObserver(() => {
      for (const li of document.querySelectorAll("#messages li")) window.__seen.push(li.textContent);
    }).observe(document.getElementById("messages"), { subtree: true, childList: true, characterData: true });
  });
  await page.click("#send");
  await page.waitForFunction(() => document.getElementById("messages")?.textContent.includes("It is sunny in Paris."), null, { timeout: 20000 });
  check("the answer shows", true);
  await page.waitForSelector("#interrupt", { timeout: 20000 });
  const action = await page.textContent("#action");
  check("the interrupt shows its HITL request", action === "send_report", action);
  const seen = await page.evaluate(() => window.__seen);
  check("the answer streams in", seen.some((t) => t.startsWith("It") && t !== "It is sunny in Paris." && "It is sunny in Paris.".startsWith(t)), [...new Set(seen)]);
  await page.click("#approve");
  await page.waitForFunction(() => document.getElementById("messages")?.textContent.includes("review: approve"), null, { timeout: 20000 });
  await page.waitForFunction(() => document.getElementById("loading")?.textContent === "false" && !document.getElementById("interrupt"), null, { timeout: 20000 });
  check("approving finishes the run", true);
  const err = await page.textContent("#error");
  check("no error shows", err === "" && errors.length === 0, [err, errors]);
} finally {
  await browser.close();
  server.close();
  fs.rmSync(profile, { recursive: true, force: true });
}
console.log(JSON.stringify({ ok: true, checks }));
process.exit(0);
