// Drives headless Chromium over the DevTools protocol for the /ui e2e test.
//
//   node ui_page.js <chromium> <user-data-dir> <url>
//
// Starts Chromium (in a process group of its own, killed on exit), opens <url>, then
// takes one command per stdin line and answers one line on stdout:
//   wait <text>   -> "seen <text>" once the page's text contains <text> (30 s at most)
//   until <expr>  -> "true" once the expression is truthy in the page (30 s at most)
//   eval <expr>   -> "value <JSON>" of the expression in the page
//   shot <path>   -> "shot" once a PNG screenshot of the whole page is written to <path>
//   quit          -> exits
import { spawn } from "node:child_process";
import { writeFileSync } from "node:fs";
import { createInterface } from "node:readline";

const [chromium, profile, url] = process.argv.slice(2);
const browser = spawn(chromium, [
  "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
  "--disable-background-networking", "--disable-component-update", "--disable-sync",
  "--window-size=1100,700", "--remote-debugging-port=0", `--user-data-dir=${profile}`, "about:blank",
], { detached: true, stdio: ["ignore", "ignore", "pipe"] });
const stop = (code) => {
  try { process.kill(-browser.pid, "SIGKILL"); } catch {}
  process.exit(code);
};
const fail = (message) => { process.stderr.write(`ui_page: ${message}\n`); stop(1); };

const endpoint = await new Promise((resolve) => {
  let seen = "";
  browser.stderr.on("data", (chunk) => {
    seen += chunk;
    const m = seen.match(/DevTools listening on (ws:\/\/\S+)/);
    if (m) resolve(m[1]);
  });
  browser.on("exit", (code) => fail(`chromium exited (${code}): ${seen}`));
});
const port = new URL(endpoint).port;
const targets = await (await fetch(`http://127.0.0.1:${port}/json/list`)).json();
const page = targets.find((t) => t.type === "page");
if (!page) fail("no page target");

const socket = new WebSocket(page.webSocketDebuggerUrl);
await new Promise((resolve, reject) => { socket.onopen = resolve; socket.onerror = reject; });
let next = 1;
const waiting = new Map();
socket.onmessage = (event) => {
  const message = JSON.parse(event.data);
  if (message.id && waiting.has(message.id)) {
    waiting.get(message.id)(message);
    waiting.delete(message.id);
  }
};
const send = (method, params = {}) => new Promise((resolve) => {
  const id = next++;
  waiting.set(id, resolve);
  socket.send(JSON.stringify({ id, method, params }));
});
const evaluate = async (expression) => {
  const reply = await send("Runtime.evaluate", { expression, returnByValue: true });
  return reply.result?.result?.value;
};

await send("Page.enable");
await send("Page.navigate", { url });

const lines = createInterface({ input: process.stdin });
for await (const line of lines) {
  const [command, ...rest] = line.split(" ");
  const argument = rest.join(" ");
  if (command === "wait") {
    const deadline = Date.now() + 30000;
    let text = "";
    while (Date.now() < deadline) {
      text = (await evaluate("document.body ? document.body.innerText : ''")) ?? "";
      if (text.includes(argument)) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    if (!text.includes(argument)) fail(`the page never showed ${JSON.stringify(argument)}; it shows:\n${text}`);
    console.log(`seen ${argument}`);
  } else if (command === "until") {
    const deadline = Date.now() + 30000;
    let value = false;
    while (Date.now() < deadline && !(value = await evaluate(argument))) {
      await new Promise((r) => setTimeout(r, 100));
    }
    if (!value) fail(`never true: ${argument}; the page shows:\n${await evaluate("document.body.innerText")}`);
    console.log("true");
  } else if (command === "eval") {
    console.log(`value ${JSON.stringify((await evaluate(argument)) ?? null)}`);
  } else if (command === "shot") {
    // The whole page, not only the window's height.
    const metrics = (await send("Page.getLayoutMetrics")).result;
    const { width, height } = metrics.cssContentSize;
    const clip = { x: 0, y: 0, width, height, scale: 1 };
    const reply = await send("Page.captureScreenshot", { format: "png", captureBeyondViewport: true, clip });
    writeFileSync(argument, Buffer.from(reply.result.data, "base64"));
    console.log("shot");
  } else if (command === "quit") {
    break;
  }
}
stop(0);
