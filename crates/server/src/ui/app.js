// The mcpx status page: polls /ui/state once a second and rebuilds the tables. Every string from the
// daemon (server names, upstream error text) goes in with textContent, never as markup.
"use strict";

const POLL_MS = 1000;

function cell(row, text, className) {
  const td = document.createElement("td");
  td.textContent = text;
  if (className) td.className = className;
  row.appendChild(td);
}

function duration(ms) {
  const s = Math.floor(ms / 1000);
  if (s < 60) return s + " s";
  if (s < 3600) return Math.floor(s / 60) + " min " + (s % 60) + " s";
  return Math.floor(s / 3600) + " h " + Math.floor((s % 3600) / 60) + " min";
}

function fill(id, rows) {
  const body = document.querySelector("#" + id + " tbody");
  body.replaceChildren(...rows);
}

// The logins, from the /v1 API (same origin, same admission); the page still shows the
// status when they are unavailable.
async function optional(path, fallback) {
  try {
    const response = await fetch(path, { cache: "no-store" });
    return response.ok ? await response.json() : fallback;
  } catch {
    return fallback;
  }
}

function row(cells, data) {
  const tr = document.createElement("tr");
  for (const [key, value] of Object.entries(data || {})) tr.dataset[key] = value;
  for (const c of cells) Array.isArray(c) ? cell(tr, c[0], c[1]) : cell(tr, c);
  return tr;
}

// What an upstream asks, in a line: each request's method and message.
function asks(inputRequests) {
  return Object.values(inputRequests || {}).map((r) => {
    const message = r && r.params && typeof r.params.message === "string" ? ": " + r.params.message : "";
    return (r && r.method ? r.method : "?") + message;
  }).join("; ");
}

function bytes(n) {
  if (n < 1024) return n + " B";
  if (n < 1024 * 1024) return (n / 1024).toFixed(1) + " KiB";
  return (n / 1024 / 1024).toFixed(1) + " MiB";
}

function render(state, auth) {
  const daemon = document.getElementById("daemon");
  daemon.textContent = "pid " + state.pid + " · v" + state.version + " · up " + duration(state.uptimeMs) +
    (state.config ? " · " + state.config : "") + (state.sees === "own" ? " · showing your own" : "");
  const journal = state.journal || { rates: [], recent: [] };
  const live = new Set(state.instances.map((i) => i.server));
  const counts = new Map(journal.rates.map((g) => [g.key, g]));
  const logins = new Map(auth.servers.map((a) => [a.server, a.state]));
  fill("servers", state.servers.map((s) => {
    let status = live.has(s.name) ? "running" : "idle";
    if (logins.get(s.name) === "needsLogin") status = "needs-login";
    if (s.failing) status = s.failing.crashLoop ? "crash-looping" : "failing";
    const count = counts.get(s.name);
    return row([
      s.name,
      s.scope,
      [status + (s.failing ? " (" + s.failing.failures + "×, retry in " + duration(s.failing.retryInMs) + ")" : ""),
        "state-" + status],
      count ? String(count.calls) : "0",
      count ? count.errors + " (" + Math.round(count.errorRate * 100) + "%)" : "",
      count && count.p95Ms != null ? count.p95Ms.toFixed(1) + " ms" : "",
      [s.failing ? s.failing.lastError : "", "error"],
    ], { server: s.name });
  }));
  const perInstance = new Map((state.journal?.instances ?? []).map((g) => [g.key, g.calls]));
  fill("instances", state.instances.map((i) => row([
    i.server, i.key, i.pid == null ? "" : String(i.pid), duration(i.ageMs), duration(i.idleMs), String(i.inUse),
    String(perInstance.get(i.server + "[" + i.key + "]") ?? 0),
  ], { server: i.server })));
  const sessions = state.sessions.map((s) => ({
    transport: "http session (" + s.revision + ")", session: s.session, client: s.client, ageMs: s.ageMs,
    idle: duration(s.idleMs), inFlight: String(s.inFlight), asked: String(s.asked), artifacts: s.artifacts,
  })).concat(state.streams.map((s) => ({
    transport: "stdio stream" + (s.pid == null ? "" : " (pid " + s.pid + ")") + (s.cwd ? " in " + s.cwd : ""),
    session: s.session ?? "", client: "local", ageMs: s.ageMs, idle: "", inFlight: "", asked: "",
    artifacts: s.artifacts,
  })));
  fill("sessions", sessions.map((s) => row([
    s.transport, s.session, s.client, duration(s.ageMs), s.idle, s.inFlight, s.asked, String(s.artifacts.length),
  ], { session: s.session })));
  fill("questions", state.questions.map((q) => row([
    q.id, q.server, q.tool, q.session ?? q.client, asks(q.inputRequests),
    q.expiresInMs == null ? "" : duration(q.expiresInMs),
  ], { question: q.id })));
  fill("artifacts", sessions.flatMap((s) => s.artifacts.map((a) => row([
    s.session, a.name, a.mimeType, bytes(a.size), duration(a.ageMs),
  ], { session: s.session }))));
  fill("calls", journal.recent.map((c) => row([
    new Date(c.timeMs).toLocaleTimeString(),
    c.server ?? "",
    c.method + (c.name ? " " + c.name : ""),
    c.session ?? c.client ?? "",
    [c.outcome, c.outcome === "ok" ? "" : "error"],
    c.durationMs == null ? "" : c.durationMs.toFixed(1),
  ])));
  const unlisted = state.sessionsOpen - state.sessions.length;
  document.getElementById("updated").textContent = "updated " + new Date().toLocaleTimeString() +
    (unlisted > 0 ? " · " + unlisted + " more HTTP sessions open, not listed" : "") +
    (state.journal ? "" : " · the journal is off: no calls or error rates");
}

async function poll() {
  try {
    const response = await fetch("/ui/state", { cache: "no-store" });
    if (!response.ok) throw new Error("HTTP " + response.status);
    const state = await response.json();
    render(state, await optional("/v1/auth", { servers: [] }));
  } catch (e) {
    document.getElementById("daemon").textContent = "unreachable: " + e.message;
  }
  setTimeout(poll, POLL_MS);
}

poll();
