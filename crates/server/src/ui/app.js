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

function render(state) {
  const daemon = document.getElementById("daemon");
  daemon.textContent = "pid " + state.pid + " · v" + state.version + " · up " + duration(state.uptimeMs) +
    (state.config ? " · " + state.config : "");
  const live = new Set(state.instances.map((i) => i.server));
  fill("servers", state.servers.map((s) => {
    const row = document.createElement("tr");
    row.dataset.server = s.name;
    let status = live.has(s.name) ? "running" : "idle";
    if (s.failing) status = s.failing.crashLoop ? "crash-looping" : "failing";
    cell(row, s.name);
    cell(row, s.scope);
    cell(row, status + (s.failing ? " (" + s.failing.failures + "×, retry in " + duration(s.failing.retryInMs) + ")" : ""),
      "state-" + status);
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
  document.getElementById("updated").textContent = "updated " + new Date().toLocaleTimeString();
}

async function poll() {
  try {
    const response = await fetch("/ui/state", { cache: "no-store" });
    if (!response.ok) throw new Error("HTTP " + response.status);
    render(await response.json());
  } catch (e) {
    document.getElementById("daemon").textContent = "unreachable: " + e.message;
  }
  setTimeout(poll, POLL_MS);
}

poll();
