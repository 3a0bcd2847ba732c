// Screenshot of a Temporal Web UI page through the Chrome DevTools Protocol, for
// scripts/screenshots.sh. No npm packages: Node's WebSocket (node --experimental-websocket on
// Node 20, built in from 22) talks to a Chromium started with --remote-debugging-port.
//
// Before the page is shot, the Web UI's workflow-list columns of the namespace are set (the
// UI keeps them in localStorage, "namespace-workflow-table-columns"), so a store's merges
// list shows walkeeper's search attributes as columns, as a user would configure it.
//
//   node --experimental-websocket scripts/screenshot.mjs PORT URL FILE [NAMESPACE COLUMN...]
import { writeFileSync } from "node:fs";

const [port, url, file, namespace, ...columns] = process.argv.slice(2);
if (!port || !url || !file) {
  console.error("usage: screenshot.mjs PORT URL FILE [NAMESPACE COLUMN...]");
  process.exit(2);
}

const targets = await (await fetch(`http://127.0.0.1:${port}/json/list`)).json();
const page = targets.find((t) => t.type === "page");
if (!page) throw new Error("no page target in Chromium");
const ws = new WebSocket(page.webSocketDebuggerUrl);
await new Promise((ok, fail) => { ws.onopen = ok; ws.onerror = fail; });

let nextID = 0;
const pending = new Map();
const waiters = [];
ws.onmessage = (m) => {
  const msg = JSON.parse(m.data);
  if (msg.id !== undefined && pending.has(msg.id)) {
    const { ok, fail } = pending.get(msg.id);
    pending.delete(msg.id);
    msg.error ? fail(new Error(JSON.stringify(msg.error))) : ok(msg.result);
  } else if (msg.method) {
    for (const w of waiters.splice(0)) w(msg);
  }
};
const send = (method, params = {}) =>
  new Promise((ok, fail) => {
    const id = ++nextID;
    pending.set(id, { ok, fail });
    ws.send(JSON.stringify({ id, method, params }));
  });
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const eventOf = (name, timeoutMs) =>
  new Promise((ok) => {
    const t = setTimeout(ok, timeoutMs);
    const w = (msg) => (msg.method === name ? (clearTimeout(t), ok()) : waiters.push(w));
    waiters.push(w);
  });

async function load(u) {
  const loaded = eventOf("Page.loadEventFired", 20000);
  await send("Page.navigate", { url: u });
  await loaded;
}

await send("Page.enable");
await send("Emulation.setDeviceMetricsOverride", { width: 1600, height: 1000, deviceScaleFactor: 1, mobile: false });
await load(url);
if (namespace && columns.length) {
  const cols = [
    { label: "Status", pinned: true },
    { label: "Workflow ID", pinned: true },
    { label: "Start", pinned: false },
    { label: "Execution Duration", pinned: false },
    ...columns.map((label) => ({ label, pinned: false })),
  ];
  const value = JSON.stringify({ [namespace]: cols });
  await send("Runtime.evaluate", {
    expression: `localStorage.setItem("namespace-workflow-table-columns", ${JSON.stringify(value)})`,
  });
  await load(url);
}
// The UI is a JS app: give it time to fetch and render after the load event (on a loaded
// 2-core machine the schedule page needed more than 6 s; SHOT_WAIT_MS overrides).
await sleep(Number(process.env.SHOT_WAIT_MS || 15000));
const { data } = await send("Page.captureScreenshot", { format: "png" });
writeFileSync(file, Buffer.from(data, "base64"));
ws.close();
