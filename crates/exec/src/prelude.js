// The globals an mcpx_exec script sees, built around two host functions mcpx gives it:
// `request(kind, json)` returns a promise of the host's JSON answer, `log(text)` keeps a
// line of console output. Nothing else of the host is reachable from a script.
(function (host) {
  "use strict";

  // The host rejects with a message; a script catches an Error.
  async function ask(kind, payload) {
    let answer;
    try {
      answer = await host.request(kind, JSON.stringify(payload));
    } catch (e) {
      throw e instanceof Error ? e : new Error(String(e));
    }
    return JSON.parse(answer);
  }

  // A tool result as a script wants it: the structured content, else the text (parsed
  // when it is JSON), else the content as it came. An error result throws.
  function unwrap(server, tool, result) {
    const content = Array.isArray(result.content) ? result.content : [];
    if (result.isError) {
      const text = content.filter((c) => c && c.type === "text").map((c) => c.text).join("\n");
      const error = new Error(`${server}.${tool} failed: ${text || "the tool reported an error"}`);
      error.server = server;
      error.tool = tool;
      error.content = content;
      throw error;
    }
    if (result.structuredContent !== undefined) return result.structuredContent;
    if (content.length === 1 && content[0].type === "text") {
      try {
        return JSON.parse(content[0].text);
      } catch {
        return content[0].text;
      }
    }
    return content;
  }

  async function invoke(server, tool, args, byIdentifier) {
    if (typeof server !== "string" || typeof tool !== "string") {
      throw new TypeError("call(server, tool, args): server and tool must be strings");
    }
    if (args !== undefined && (args === null || typeof args !== "object" || Array.isArray(args))) {
      throw new TypeError(`${server}.${tool}: the arguments must be an object`);
    }
    const answer = await ask("call", { server, tool, arguments: args ?? {}, byIdentifier });
    return unwrap(answer.server, answer.tool, answer.result);
  }

  function call(server, tool, args) {
    return invoke(server, tool, args, false);
  }

  // `tools.<server>.<tool>(args)`: any property names a server, then a tool, by the
  // identifiers mcpx_search shows (or their own names, with brackets).
  const tools = new Proxy(Object.freeze({}), {
    get(_, server) {
      if (typeof server !== "string" || server === "then") return undefined;
      return new Proxy(Object.freeze({}), {
        get(_, tool) {
          if (typeof tool !== "string" || tool === "then") return undefined;
          return (args) => invoke(server, tool, args, true);
        },
      });
    },
  });

  async function search(query) {
    return ask("search", { query: query === undefined ? "" : String(query) });
  }

  function bytesOf(data) {
    if (data instanceof ArrayBuffer) return Array.from(new Uint8Array(data));
    if (ArrayBuffer.isView(data)) return Array.from(new Uint8Array(data.buffer, data.byteOffset, data.byteLength));
    return undefined;
  }

  async function artifact(name, data, mimeType) {
    if (typeof name !== "string" || name === "") throw new TypeError("artifact(name, data, mimeType?): name must be a non-empty string");
    if (mimeType !== undefined && typeof mimeType !== "string") throw new TypeError("artifact: mimeType must be a string");
    const bytes = bytesOf(data);
    let payload;
    if (bytes !== undefined) payload = { name, bytes, mimeType: mimeType ?? "application/octet-stream" };
    else if (typeof data === "string") payload = { name, text: data, mimeType: mimeType ?? "text/plain" };
    else if (data !== undefined) payload = { name, text: JSON.stringify(data), mimeType: mimeType ?? "application/json" };
    else throw new TypeError("artifact: data must be a string, bytes or a JSON value");
    return (await ask("artifact", payload)).uri;
  }

  function show(value) {
    if (typeof value === "string") return value;
    if (value instanceof Error) return `${value.name}: ${value.message}`;
    try {
      const text = JSON.stringify(value);
      return text === undefined ? String(value) : text;
    } catch {
      return String(value);
    }
  }

  const console = {};
  for (const level of ["log", "info", "warn", "error", "debug"]) {
    const prefix = level === "log" || level === "info" ? "" : `[${level}] `;
    console[level] = (...values) => host.log(prefix + values.map(show).join(" "));
  }

  const globals = { tools, call, search, artifact, console: Object.freeze(console) };
  for (const [name, value] of Object.entries(globals)) {
    Object.defineProperty(globalThis, name, { value, writable: false, enumerable: false, configurable: false });
  }
})
