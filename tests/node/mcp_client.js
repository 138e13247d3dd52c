#!/usr/bin/env node
// Drive the real TypeScript SDK v2 client (@modelcontextprotocol/client, pinned by
// scripts/deps.sh) against one MCP server, as tests/python/mcp_client.py does for the
// Python SDK. It connects in the requested mode, lists the tools (every page), calls one
// tool and prints ONE JSON line on stdout:
//
//   {"protocolVersion": "...", "era": "legacy" | "modern", "serverInfo": {...} | null,
//    "tools": ["name", ...], "result": {"content": [...], "structuredContent": ..., "isError": bool}}
//
//   node tests/node/mcp_client.js --url http://127.0.0.1:PORT/mcp --mode legacy|auto|2026-07-28 \
//       --tool NAME --args '{"k": "v"}'
//   node tests/node/mcp_client.js --mode ... --tool NAME --args '{}' -- PROGRAM ARG...
//
// After `--` comes a stdio server's command line; it is launched with this process's whole
// environment. `--mode 2026-07-28` pins that revision (`versionNegotiation: {mode: {pin}}`),
// `auto` probes with server/discover, `legacy` (the SDK's default) runs `initialize`.
// `--trace` logs every HTTP request and response head the SDK exchanges to stderr.
// `--oauth-client ID:SECRET --oauth-issuer URL` authenticates with the SDK's own
// `ClientCredentialsProvider` (it discovers the authorization server from the server's
// protected resource metadata); `--bearer TOKEN` sends a token the caller already has.
// Exit status 0 on success, 1 on any failure (the error on stderr), 2 on bad usage.
// The packages come from .deps/node (or $MCPX_NODE_DEPS), not from a node_modules here.

import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

function usage(message) {
  process.stderr.write(`mcp_client.js: ${message}\n`);
  process.exit(2);
}

function parseArgs(argv) {
  const opts = {
    mode: "auto", args: "{}", timeout: 30, trace: false, command: null, url: null, tool: null,
    oauthClient: null, oauthIssuer: null, bearer: null,
  };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    const value = () => {
      if (i + 1 >= argv.length) usage(`${arg} needs a value`);
      return argv[++i];
    };
    switch (arg) {
      case "--url": opts.url = value(); break;
      case "--mode": opts.mode = value(); break;
      case "--tool": opts.tool = value(); break;
      case "--args": opts.args = value(); break;
      case "--timeout": opts.timeout = Number(value()); break;
      case "--trace": opts.trace = true; break;
      case "--oauth-client": opts.oauthClient = value(); break;
      case "--oauth-issuer": opts.oauthIssuer = value(); break;
      case "--bearer": opts.bearer = value(); break;
      case "--": opts.command = argv.slice(i + 1); i = argv.length; break;
      default: usage(`unknown argument ${arg}`);
    }
  }
  if ((opts.url === null) === (opts.command === null)) usage("give exactly one of --url URL or -- COMMAND...");
  if (opts.command !== null && opts.command.length === 0) usage("the command after -- is empty");
  if (!opts.tool) usage("--tool is required");
  if (!(opts.timeout > 0)) usage("--timeout must be a positive number of seconds");
  return opts;
}

function loadSdk() {
  const here = dirname(fileURLToPath(import.meta.url));
  const deps = process.env.MCPX_NODE_DEPS || join(here, "..", "..", ".deps", "node");
  const require = createRequire(join(deps, "package.json"));
  try {
    return {
      sdk: require("@modelcontextprotocol/client"),
      stdio: require("@modelcontextprotocol/client/stdio"),
      version: JSON.parse(
        readFileSync(join(deps, "node_modules", "@modelcontextprotocol", "client", "package.json"), "utf8"),
      ).version,
    };
  } catch (e) {
    throw new Error(`cannot load @modelcontextprotocol/client from ${deps} (run scripts/deps.sh): ${e.message}`);
  }
}

function negotiation(mode) {
  if (mode === "legacy" || mode === "auto") return { mode };
  if (/^\d{4}-\d{2}-\d{2}$/.test(mode)) return { mode: { pin: mode } };
  usage(`--mode must be legacy, auto or a revision (YYYY-MM-DD), not ${mode}`);
}

function tracingFetch() {
  return async (input, init) => {
    const method = init?.method ?? "GET";
    const headers = Object.fromEntries(new Headers(init?.headers ?? {}).entries());
    const body = typeof init?.body === "string" ? init.body : "";
    process.stderr.write(`trace> ${method} ${input} ${JSON.stringify(headers)} ${body}\n`);
    const response = await fetch(input, init);
    process.stderr.write(
      `trace< ${response.status} ${method} content-type=${response.headers.get("content-type")} ` +
        `mcp-session-id=${response.headers.get("mcp-session-id")}\n`,
    );
    return response;
  };
}

async function run(opts, toolArgs) {
  const { sdk, stdio, version } = loadSdk();
  const client = new sdk.Client(
    { name: "mcpx-e2e-ts-sdk", version },
    { versionNegotiation: negotiation(opts.mode) },
  );
  const httpOptions = opts.trace ? { fetch: tracingFetch() } : {};
  if (opts.bearer) httpOptions.requestInit = { headers: { Authorization: `Bearer ${opts.bearer}` } };
  if (opts.oauthClient) {
    const [clientId, clientSecret] = opts.oauthClient.split(":");
    httpOptions.authProvider = new sdk.ClientCredentialsProvider({
      clientId, clientSecret, expectedIssuer: opts.oauthIssuer,
    });
  }
  const transport = opts.url
    ? new sdk.StreamableHTTPClientTransport(new URL(opts.url), httpOptions)
    : new stdio.StdioClientTransport({
        command: opts.command[0],
        args: opts.command.slice(1),
        // The SDK passes only a safe subset by default; the gateway reads MCPX_* from it.
        env: { ...process.env },
        stderr: "inherit",
      });
  const timeout = opts.timeout * 1000;
  await client.connect(transport, { timeout });
  try {
    const tools = [];
    let cursor;
    for (let page = 0; ; page++) {
      if (page === 100) throw new Error("tools/list still paginating after 100 pages");
      const listed = await client.listTools(cursor ? { cursor } : {}, { timeout, cacheMode: "bypass" });
      tools.push(...listed.tools.map((t) => t.name));
      cursor = listed.nextCursor;
      if (!cursor) break;
    }
    const result = await client.callTool({ name: opts.tool, arguments: toolArgs }, { timeout });
    return {
      protocolVersion: client.getNegotiatedProtocolVersion() ?? null,
      era: client.getProtocolEra() ?? null,
      serverInfo: client.getServerVersion() ?? null,
      tools,
      result: {
        content: result.content ?? [],
        structuredContent: result.structuredContent ?? null,
        isError: Boolean(result.isError),
      },
    };
  } finally {
    await client.close();
  }
}

function describe(error) {
  if (error instanceof AggregateError) return error.errors.map(describe).join("; ");
  const text = error?.message ?? String(error);
  const code = error?.code !== undefined ? ` (code ${error.code})` : "";
  const data = error?.data !== undefined ? ` data=${JSON.stringify(error.data)}` : "";
  return `${error?.name ?? "Error"}: ${text}${code}${data}`;
}

const opts = parseArgs(process.argv.slice(2));
let toolArgs;
try {
  toolArgs = JSON.parse(opts.args);
} catch (e) {
  usage(`--args is not JSON: ${e.message}`);
}
if (toolArgs === null || typeof toolArgs !== "object" || Array.isArray(toolArgs)) usage("--args must be a JSON object");

// Backstop: a hung connect or close must not hang the test run.
const watchdog = setTimeout(() => {
  process.stderr.write(`mcp_client.js: error: hard timeout after ${opts.timeout + 5} s\n`);
  process.exit(1);
}, (opts.timeout + 5) * 1000);
watchdog.unref();

try {
  const out = await run(opts, toolArgs);
  process.stdout.write(JSON.stringify(out) + "\n");
  process.exitCode = 0;
} catch (error) {
  if (process.env.MCP_CLIENT_DEBUG) console.error(error);
  process.stderr.write(`mcp_client.js: error: ${describe(error)}\n`);
  process.exitCode = 1;
}
