#!/usr/bin/env node
// A transparent tap for a stdio MCP server: runs PROGRAM ARG... with this process's
// environment and stderr, relays stdin to it and its stdout back unchanged, and appends
// every byte it relays to SENT (client to server) and RECEIVED (server to client).
// Tests put it in front of `mcpx serve` to see what a third-party client really sent.
//
//   node tests/node/stdio_tap.js SENT RECEIVED PROGRAM [ARG...]
//
// All positional, so a client that parses its own options around a stdio command line
// (the Inspector CLI) passes it through untouched. SIGTERM, SIGINT and SIGHUP are
// forwarded to the program; the tap exits with the program's status.

import { spawn } from "node:child_process";
import { createWriteStream } from "node:fs";

const [sentPath, receivedPath, program, ...args] = process.argv.slice(2);
if (!program) {
  process.stderr.write("usage: stdio_tap.js SENT RECEIVED PROGRAM [ARG...]\n");
  process.exit(2);
}

const sent = createWriteStream(sentPath, { flags: "a" });
const received = createWriteStream(receivedPath, { flags: "a" });
const child = spawn(program, args, { stdio: ["pipe", "pipe", "inherit"] });

child.on("error", (error) => {
  process.stderr.write(`stdio_tap.js: cannot run ${program}: ${error.message}\n`);
  process.exit(127);
});

process.stdin.on("data", (chunk) => {
  sent.write(chunk);
  child.stdin.write(chunk);
});
process.stdin.on("end", () => child.stdin.end());
// The program may exit before the client stops writing: drop what it can no longer read.
child.stdin.on("error", () => {});

child.stdout.on("data", (chunk) => {
  received.write(chunk);
  process.stdout.write(chunk);
});

for (const signal of ["SIGTERM", "SIGINT", "SIGHUP"]) {
  process.on(signal, () => child.kill(signal));
}

// "close" comes after the program exited and its stdout ended: flush the logs, then leave.
child.on("close", (code, signal) => {
  let open = 2;
  const done = () => {
    if (--open === 0) process.exit(code ?? (signal ? 128 : 1));
  };
  sent.end(done);
  received.end(done);
});
