// The mcpx status page: polls /ui/state and rebuilds the tables. Every string from the
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

// The journal and the logins, from the /v1 API (same origin, same admission); the page
// still shows the status when either is unavailable.
async function optional(path, fallback) {
  try {
    const response = await fetch(path, { cache: "no-store" });
    return response.ok ? await response.json() : fallback;
  } catch {
    return fallback;
  }
}

function render(state, stats, log, auth) {
  const daemon = document.getElementById("daemon");
  daemon.textContent = "pid " + state.pid + " · v" + state.version + " · up " + duration(state.uptimeMs) +
    (state.config ? " · " + state.config : "");
  const live = new Set(state.instances.map((i) => i.server));
  const counts = new Map(stats.groups.map((g) => [g.key, g]));
  const logins = new Map(auth.servers.map((a) => [a.server, a.state]));
  fill("servers", state.servers.map((s) => {
    const row = document.createElement("tr");
    row.dataset.server = s.name;
    let status = live.has(s.name) ? "running" : "idle";
    if (logins.get(s.name) === "needsLogin") status = "needs-login";
    if (s.failing) status = s.failing.crashLoop ? "crash-looping" : "failing";
    const count = counts.get(s.name);
    cell(row, s.name);
    cell(row, s.scope);
    cell(row, status + (s.failing ? " (" + s.failing.failures + "×, retry in " + duration(s.failing.retryInMs) + ")" : ""),
      "state-" + status);
    cell(row, count ? String(count.calls) : "0");
    cell(row, count ? count.errors + " (" + Math.round(count.errorRate * 100) + "%)" : "");
    cell(row, count && count.p95Ms != null ? count.p95Ms.toFixed(1) + " ms" : "");
    cell(row, s.failing ? s.failing.lastError : "", "error");
    return row;
  }));
  fill("instances", state.instances.map((i) => {
    const row = document.createElement("tr");
    row.dataset.server = i.server;
    cell(row, i.server);
    cell(row, i.key);
    cell(row, i.pid == null ? "" : String(i.pid));
    cell(row, duration(i.ageMs));
    cell(row, duration(i.idleMs));
    cell(row, String(i.inUse));
    return row;
  }));
  fill("calls", log.records.slice().reverse().map((c) => {
    const row = document.createElement("tr");
    cell(row, new Date(c.timeMs).toLocaleTimeString());
    cell(row, c.server ?? "");
    cell(row, c.method + (c.name ? " " + c.name : ""));
    cell(row, c.session ?? c.client ?? "");
    cell(row, c.outcome, c.outcome === "ok" ? "" : "error");
    cell(row, c.durationMs == null ? "" : c.durationMs.toFixed(1));
    return row;
  }));
  document.getElementById("updated").textContent = "updated " + new Date().toLocaleTimeString();
}

async function poll() {
  try {
    const response = await fetch("/ui/state", { cache: "no-store" });
    if (!response.ok) throw new Error("HTTP " + response.status);
    const state = await response.json();
    const [stats, log, auth] = await Promise.all([
      optional("/v1/stats?by=server", { groups: [] }),
      optional("/v1/log?limit=20", { records: [] }),
      optional("/v1/auth", { servers: [] }),
    ]);
    render(state, stats, log, auth);
  } catch (e) {
    document.getElementById("daemon").textContent = "unreachable: " + e.message;
  }
  setTimeout(poll, POLL_MS);
}

poll();
