#!/usr/bin/env python3
"""The client leg of the MCP conformance suite, with mcpx as the client under test.

The suite runs `<this program> <scenario url>` with MCP_CONFORMANCE_SCENARIO (and
MCP_CONFORMANCE_PROTOCOL_VERSION, MCP_CONFORMANCE_CONTEXT) set, and watches what reaches the
scenario's server. This program puts mcpx between itself and that server:

    this program --(MCP over HTTP)--> mcpx daemon /mcp --(HTTP upstream)--> scenario server

It starts an mcpx daemon of its own (temporary state dir, ephemeral port) whose one upstream
is the scenario URL, exposed under its own names ("exposePrefix": "never"), then does what
the scenario asks as an ordinary MCP client of mcpx: the 2026-07-28 stateless wire for
2026-07-28 scenarios, the 2025-11-25 handshake (session, SSE, answering questions) for the
others. Whatever the scenario observes was therefore sent by mcpx. Then it stops the daemon
(SIGTERM, wait).

Standard library only. Diagnostics go to stderr (the suite prints them when this program
exits non-zero); the exit status is non-zero when mcpx's answers were not what a client
could work with, which the suite reports but does not score.

    MCPX_BIN              the mcpx binary (default: <repo>/target/debug/mcpx)
    MCPX_LOG              daemon log filter (default: warn); printed on failure
    MCPX_ADAPTER_DEADLINE seconds before the adapter gives up and stops the daemon
                          (default: 25, under the suite's 30 s client timeout)

For the `auth/*` scenarios the adapter is also the person at the browser: when mcpx says
a login is needed it opens the login's URL (from a -32042 error's URL elicitation, else
from `mcpx auth login s --no-open`) with a plain GET that follows the scenario
authorization server's redirect back to mcpx's loopback callback, then calls again. The
scenario's client (pre-registered id and secret, client credentials) comes from
MCP_CONFORMANCE_CONTEXT into the server's `oauth` entry.
"""

import base64
import http.client
import itertools
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request

MODERN = "2026-07-28"
LEGACY = "2025-11-25"
CLIENT_INFO = {"name": "mcpx-conformance-adapter", "version": "1.0.0"}
# What the adapter can answer when mcpx (for its upstream) asks.
CAPABILITIES = {"elicitation": {}, "sampling": {}, "roots": {}}
GATEWAY_TOOLS = ("mcpx_search", "mcpx_call", "mcpx_exec")


def log(*parts):
    print("adapter:", *parts, file=sys.stderr, flush=True)


class Failure(Exception):
    """mcpx answered something a client cannot work with."""


class RpcFailure(Failure):
    """mcpx answered a JSON-RPC error; `error` is its error object."""

    def __init__(self, message, error):
        super().__init__(message)
        self.error = error


class Interrupted(Exception):
    """The deadline passed or the suite stopped us: stop the daemon and leave."""


def interrupt(signum, _frame):
    raise Interrupted("deadline passed" if signum == signal.SIGALRM else f"signal {signum}")


# --- the daemon -----------------------------------------------------------------------


class Daemon:
    def __init__(self, upstream_url):
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        self.binary = os.environ.get("MCPX_BIN") or os.path.join(root, "target", "debug", "mcpx")
        self.work = tempfile.mkdtemp(prefix="mcpx-conformance-client.")
        self.upstream_url = upstream_url
        self.proc = None
        self.log_path = os.path.join(self.work, "daemon.log")
        self.url = None

    def start(self, server_oauth=None, oauth=None):
        server = {"url": self.upstream_url}
        if server_oauth:
            server["oauth"] = server_oauth
        config = {
            "mcpServers": {"s": server},
            "expose": ["s"],
            "exposePrefix": "never",
        }
        if oauth:
            config["oauth"] = oauth
        config_path = os.path.join(self.work, "mcpx.json")
        with open(config_path, "w") as f:
            json.dump(config, f)
        state = os.path.join(self.work, "state")
        self.state = state
        env = dict(os.environ, MCPX_STATE_DIR=state, MCPX_LOG=os.environ.get("MCPX_LOG", "warn"))
        self.log_file = open(self.log_path, "w")
        self.proc = subprocess.Popen(
            [self.binary, "daemon", "--config", config_path, "--port", "0"],
            env=env, stdin=subprocess.DEVNULL, stdout=self.log_file, stderr=self.log_file,
        )
        info_path = os.path.join(state, "daemon.json")
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise Failure(f"mcpx daemon exited with {self.proc.returncode} before it was ready")
            try:
                with open(info_path) as f:
                    self.url = json.load(f)["url"]
                break
            except (OSError, ValueError, KeyError):
                time.sleep(0.05)
        if not self.url:
            raise Failure(f"mcpx daemon wrote no {info_path} within 15 s")
        log(f"mcpx daemon pid {self.proc.pid} at {self.url}, upstream {self.upstream_url}")

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                log("mcpx daemon ignored SIGTERM for 10 s; killing it")
                self.proc.kill()
                self.proc.wait()
        if self.proc is not None:
            self.log_file.close()

    def dump_log(self):
        try:
            with open(self.log_path) as f:
                text = f.read()
        except OSError:
            return
        if text.strip():
            print("--- mcpx daemon log ---", file=sys.stderr)
            print(text[-8000:], file=sys.stderr)

    def cleanup(self):
        shutil.rmtree(self.work, ignore_errors=True)


# --- HTTP and header encoding --------------------------------------------------------------


def needs_base64(value):
    """A mirrored header value that cannot travel as itself: non-ASCII or control
    characters, leading/trailing whitespace, or something that looks like the encoding."""
    if any(ord(c) < 0x20 or ord(c) > 0x7E for c in value):
        return True
    if value != value.strip(" \t"):
        return True
    return value.startswith("=?base64?") and value.endswith("?=")


def header_value(value):
    if needs_base64(value):
        return "=?base64?" + base64.b64encode(value.encode("utf-8")).decode("ascii") + "?="
    return value


def mirrored_value(value):
    """A tool argument as its Mcp-Param-* header value; None when it is not sent."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, str):
        return header_value(value)
    return None


def param_annotations(tool):
    """{argument: header name} for a tool's top-level x-mcp-header annotations."""
    schema = tool.get("inputSchema") or {}
    props = schema.get("properties") or {}
    out = {}
    for key, prop in props.items():
        if isinstance(prop, dict) and isinstance(prop.get("x-mcp-header"), str):
            out[key] = prop["x-mcp-header"]
    return out


def sse_events(resp):
    """The events of a text/event-stream response, as (id, data) pairs."""
    data, event_id = [], None
    while True:
        raw = resp.readline()
        if not raw:
            if data:
                yield event_id, "\n".join(data)
            return
        line = raw.decode("utf-8").rstrip("\r\n")
        if line == "":
            if data:
                yield event_id, "\n".join(data)
            data, event_id = [], None
        elif line.startswith(":"):
            continue
        else:
            field, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if field == "data":
                data.append(value)
            elif field == "id":
                event_id = value


class Http:
    def __init__(self, url):
        self.url = url
        parts = urllib.parse.urlsplit(url)
        self.host = parts.hostname
        self.port = parts.port
        self.path = parts.path or "/"

    def post(self, body, headers, timeout=60):
        conn = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        all_headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
        all_headers.update(headers)
        conn.request("POST", self.path, body=json.dumps(body).encode("utf-8"), headers=all_headers)
        return conn, conn.getresponse()

    def delete(self, headers):
        conn = http.client.HTTPConnection(self.host, self.port, timeout=10)
        conn.request("DELETE", self.path, headers=headers)
        resp = conn.getresponse()
        resp.read()
        conn.close()
        return resp.status


# --- answering questions (elicitation, sampling, roots) --------------------------------------


def value_for(prop):
    """A value for one schema property: its default, else something of its type."""
    if not isinstance(prop, dict):
        return "adapter"
    if "default" in prop:
        return prop["default"]
    if isinstance(prop.get("enum"), list) and prop["enum"]:
        return prop["enum"][0]
    for choice in prop.get("oneOf") or prop.get("anyOf") or []:
        if isinstance(choice, dict) and "const" in choice:
            return choice["const"]
    kind = prop.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "string")
    return {
        "boolean": True,
        "integer": 1,
        "number": 1,
        "object": {},
        "array": [],
        "null": None,
    }.get(kind, "adapter")


def answer(method, params):
    """What a cooperative user/host answers to a question mcpx relays."""
    params = params or {}
    if method == "elicitation/create" and params.get("mode") == "url":
        # A login (or any page) mcpx asks the user to visit: visit it, then accept.
        open_in_browser(params["url"])
        return {"action": "accept"}
    if method == "elicitation/create":
        schema = params.get("requestedSchema") or {}
        props = schema.get("properties") or {}
        content = {key: value_for(prop) for key, prop in props.items()}
        return {"action": "accept", "content": content}
    if method == "sampling/createMessage":
        return {
            "role": "assistant",
            "content": {"type": "text", "text": "Sampled by the mcpx conformance adapter"},
            "model": "mcpx-conformance-adapter",
            "stopReason": "endTurn",
        }
    if method == "roots/list":
        return {"roots": []}
    if method == "ping":
        return {}
    raise Failure(f"mcpx asked something the adapter cannot answer: {method}")


def arguments_for(tool):
    """Arguments for a tool's required parameters, one plausible value each."""
    schema = tool.get("inputSchema") or {}
    props = schema.get("properties") or {}
    return {key: value_for(props.get(key)) for key in schema.get("required") or []}


# --- the two kinds of client --------------------------------------------------------------


class Client:
    capabilities = CAPABILITIES

    def __init__(self, url):
        self.http = Http(url)
        self.ids = itertools.count(1)
        self.tools = {}

    def rpc(self, method, params=None, extra_headers=None):
        """One request; returns the result, raises Failure on a JSON-RPC error."""
        request_id = next(self.ids)
        body = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            body["params"] = params
        headers = self.headers(method, params or {})
        headers.update(extra_headers or {})
        conn, resp = self.http.post(body, headers)
        try:
            reply = self.read_reply(resp, request_id, method)
        finally:
            conn.close()
        if "error" in reply:
            raise RpcFailure(f"{method} failed (HTTP {resp.status}): {json.dumps(reply['error'])}", reply["error"])
        return reply.get("result")

    def read_reply(self, resp, request_id, method):
        kind = (resp.getheader("Content-Type") or "").split(";")[0].strip()
        if kind == "text/event-stream":
            for _event_id, data in sse_events(resp):
                if not data.strip():
                    continue
                frame = json.loads(data)
                if "method" in frame and "id" in frame:
                    self.on_server_request(frame)
                elif "method" in frame:
                    log(f"{method}: notification {frame['method']}")
                elif frame.get("id") == request_id:
                    return frame
            raise Failure(f"{method}: the event stream ended without the answer (HTTP {resp.status})")
        text = resp.read().decode("utf-8", "replace")
        if kind != "application/json" or not text.strip():
            raise Failure(f"{method}: HTTP {resp.status} {kind or '(no content type)'}: {text[:500]!r}")
        frame = json.loads(text)
        if frame.get("id") != request_id:
            raise Failure(f"{method}: answer for id {frame.get('id')!r}, sent {request_id}")
        return frame

    def on_server_request(self, frame):
        raise Failure(f"mcpx sent a request on a response stream: {json.dumps(frame)}")

    def list_tools(self):
        tools, cursor = [], None
        while True:
            result = self.rpc("tools/list", self.params({"cursor": cursor} if cursor else {}))
            tools.extend(result.get("tools") or [])
            cursor = result.get("nextCursor")
            if not cursor:
                break
        self.tools = {tool["name"]: tool for tool in tools}
        log("tools listed by mcpx:", ", ".join(self.tools) or "(none)")
        return tools

    def upstream_tools(self):
        return [tool for name, tool in self.tools.items() if name not in GATEWAY_TOOLS]

    def tool(self, name):
        if name not in self.tools:
            raise Failure(f"mcpx does not list the upstream's tool {name!r} (listed: {', '.join(self.tools)})")
        return self.tools[name]

    def list_all(self, method, key):
        items, cursor = [], None
        while True:
            result = self.rpc(method, self.params({"cursor": cursor} if cursor else {}))
            items.extend(result.get(key) or [])
            cursor = result.get("nextCursor")
            if not cursor:
                return items

    def params(self, params):
        return params


class Modern(Client):
    """The 2026-07-28 stateless wire: every request carries its version, client info and
    capabilities in `_meta`, and the headers that mirror the body."""

    def params(self, params):
        params = dict(params)
        meta = dict(params.get("_meta") or {})
        meta.update({
            "io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientInfo": CLIENT_INFO,
            "io.modelcontextprotocol/clientCapabilities": self.capabilities,
        })
        params["_meta"] = meta
        return params

    def headers(self, method, params):
        headers = {"MCP-Protocol-Version": MODERN, "Mcp-Method": method}
        if method in ("tools/call", "prompts/get") and isinstance(params.get("name"), str):
            headers["Mcp-Name"] = header_value(params["name"])
        elif method == "resources/read" and isinstance(params.get("uri"), str):
            headers["Mcp-Name"] = header_value(params["uri"])
        if method == "tools/call":
            tool = self.tools.get(params.get("name"), {})
            args = params.get("arguments") or {}
            for key, name in param_annotations(tool).items():
                value = mirrored_value(args.get(key))
                if value is not None:
                    headers[f"Mcp-Param-{name}"] = value
        return headers

    def discover(self):
        return self.rpc("server/discover", self.params({}))

    def call(self, name, arguments=None, between_rounds=None, max_rounds=5):
        """tools/call, answering `input_required` rounds: each retry is a new request (new
        id) with the same params plus `inputResponses`, and the `requestState` exactly as
        given (none when none was given)."""
        base = {"name": name}
        if arguments is not None:
            base["arguments"] = arguments
        params = dict(base)
        for round_no in range(1, max_rounds + 1):
            result = self.rpc("tools/call", self.params(params))
            if (result or {}).get("resultType", "complete") != "input_required":
                log(f"tools/call {name}: complete after {round_no} round(s)")
                return result
            requests = result.get("inputRequests") or {}
            log(f"tools/call {name}: input_required round {round_no}: {', '.join(requests) or '(no requests)'}"
                + (" + requestState" if "requestState" in result else ""))
            if between_rounds is not None:
                between_rounds()
                between_rounds = None
            params = dict(base)
            params["inputResponses"] = {key: answer(req.get("method"), req.get("params")) for key, req in requests.items()}
            if "requestState" in result:
                params["requestState"] = result["requestState"]
        raise Failure(f"tools/call {name}: still input_required after {max_rounds} rounds")


class Legacy(Client):
    """The 2025-11-25 handshake: initialize, a session, answers on the same session."""

    def __init__(self, url):
        super().__init__(url)
        self.session = None
        self.version = LEGACY

    def headers(self, method, params):
        headers = {}
        if self.session:
            headers["Mcp-Session-Id"] = self.session
            headers["MCP-Protocol-Version"] = self.version
        return headers

    def initialize(self):
        request_id = next(self.ids)
        body = {"jsonrpc": "2.0", "id": request_id, "method": "initialize", "params": {
            "protocolVersion": LEGACY, "capabilities": self.capabilities, "clientInfo": CLIENT_INFO}}
        conn, resp = self.http.post(body, {})
        try:
            reply = self.read_reply(resp, request_id, "initialize")
        finally:
            conn.close()
        if "error" in reply:
            raise Failure(f"initialize failed: {json.dumps(reply['error'])}")
        self.session = resp.getheader("Mcp-Session-Id")
        self.version = reply["result"].get("protocolVersion", LEGACY)
        log(f"initialized: version {self.version}, session {self.session}")
        self.notify("notifications/initialized")
        return reply["result"]

    def notify(self, method, params=None):
        body = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            body["params"] = params
        conn, resp = self.http.post(body, self.headers(method, {}))
        resp.read()
        conn.close()
        if resp.status not in (200, 202, 204):
            raise Failure(f"{method}: HTTP {resp.status}")

    def on_server_request(self, frame):
        method = frame["method"]
        log(f"mcpx asks {method}: {json.dumps(frame.get('params'))[:300]}")
        body = {"jsonrpc": "2.0", "id": frame["id"], "result": answer(method, frame.get("params"))}
        conn, resp = self.http.post(body, self.headers(method, {}))
        resp.read()
        conn.close()
        if resp.status not in (200, 202, 204):
            raise Failure(f"answer to {method}: HTTP {resp.status}")

    def call(self, name, arguments=None):
        params = {"name": name}
        if arguments is not None:
            params["arguments"] = arguments
        return self.rpc("tools/call", params)

    def close(self):
        if self.session:
            status = self.http.delete(self.headers("", {}))
            log(f"DELETE session: HTTP {status}")


# --- scenarios ----------------------------------------------------------------------------


def text_of(result):
    return " ".join(block.get("text", "") for block in (result or {}).get("content") or [] if block.get("type") == "text")


def expect_complete(result, what):
    if (result or {}).get("isError"):
        raise Failure(f"{what}: tool error: {text_of(result)}")
    log(f"{what}: {text_of(result)!r}")


def run_tools_call(client):
    client.list_tools()
    client.tool("add_numbers")
    expect_complete(client.call("add_numbers", {"a": 5, "b": 3}), "add_numbers")


def run_list_only(client):
    # initialize (the handshake itself is the scenario), request-metadata (what mcpx sends
    # upstream), json-schema-ref-no-deref (mcpx must list without fetching a network $ref).
    client.list_tools()


def run_request_state(client):
    client.list_tools()
    for name in ("test_mrtr_echo_state", "test_mrtr_unrelated", "test_mrtr_no_state", "test_mrtr_no_result_type"):
        client.tool(name)
    # The unrelated tool is called between the rounds of the first flow: it must carry
    # neither that flow's inputResponses nor its requestState.
    unrelated = lambda: expect_complete(client.call("test_mrtr_unrelated", {}), "test_mrtr_unrelated")
    expect_complete(client.call("test_mrtr_echo_state", {}, between_rounds=unrelated), "test_mrtr_echo_state")
    expect_complete(client.call("test_mrtr_no_state", {}), "test_mrtr_no_state")
    expect_complete(client.call("test_mrtr_no_result_type", {}), "test_mrtr_no_result_type")


def run_standard_headers(client):
    client.list_tools()
    for tool in client.upstream_tools():
        expect_complete(client.call(tool["name"], arguments_for(tool)), tool["name"])
    resources = client.list_all("resources/list", "resources")
    log("resources listed by mcpx:", ", ".join(r["uri"] for r in resources) or "(none)")
    for resource in resources:
        client.rpc("resources/read", client.params({"uri": resource["uri"]}))
    prompts = client.list_all("prompts/list", "prompts")
    log("prompts listed by mcpx:", ", ".join(p["name"] for p in prompts) or "(none)")
    for prompt in prompts:
        client.rpc("prompts/get", client.params({"name": prompt["name"]}))


def run_custom_headers(client):
    client.list_tools()
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    calls = context.get("toolCalls") or []
    if not calls:
        raise Failure("MCP_CONFORMANCE_CONTEXT names no toolCalls")
    for call in calls:
        client.tool(call["name"])
        expect_complete(client.call(call["name"], call.get("arguments")), call["name"])


def run_invalid_tool_headers(client):
    # A client calls what it was given: every tool mcpx lists. Tools whose x-mcp-header
    # annotations are invalid must have been left out of the listing by mcpx.
    client.list_tools()
    for tool in client.upstream_tools():
        expect_complete(client.call(tool["name"], arguments_for(tool)), tool["name"])


def run_schema_preservation(client):
    client.list_tools()
    focal = client.tool("json_schema_2020_12_tool")
    client.tool("json_schema_echo")
    expect_complete(client.call("json_schema_echo", {"schema": focal.get("inputSchema")}), "json_schema_echo")


def run_elicitation_defaults(client):
    client.list_tools()
    client.tool("test_client_elicitation_defaults")
    expect_complete(client.call("test_client_elicitation_defaults", {}), "test_client_elicitation_defaults")


def run_sse_retry(client):
    client.list_tools()
    client.tool("test_reconnection")
    expect_complete(client.call("test_reconnection", {}), "test_reconnection")


# --- authorization: the adapter is also the person at the browser ---------------------------

# A client ID metadata document URL, as the auth/basic-cimd scenario expects it.
CLIENT_METADATA_URL = "https://conformance-test.local/client-metadata.json"
# How many times a call may send the adapter to log in before it gives up.
MAX_LOGINS = 4


def open_in_browser(url):
    """What a person's browser does with an authorization URL: GET it, following the
    authorization server's redirect to mcpx's loopback callback."""
    log(f"browser: opening {url[:160]}")
    try:
        with urllib.request.urlopen(url, timeout=20) as resp:
            log(f"browser: landed on {resp.geturl()[:80]}: HTTP {resp.status}")
    except urllib.error.HTTPError as e:
        log(f"browser: landed on {e.geturl()[:80]}: HTTP {e.code}: {e.read()[:200]!r}")


def cli_login(daemon):
    """`mcpx auth login s --no-open`: open the URL it prints, wait for it to finish."""
    env = dict(os.environ, MCPX_STATE_DIR=daemon.state)
    env.pop("DISPLAY", None)
    env.pop("WAYLAND_DISPLAY", None)
    proc = subprocess.Popen([daemon.binary, "auth", "login", "s", "--no-open"], env=env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    opened = False
    for line in proc.stdout:
        line = line.strip()
        if line.startswith("http://") or line.startswith("https://"):
            open_in_browser(line)
            opened = True
        elif line:
            log(f"mcpx auth login: {line}")
    err = proc.stderr.read().strip()
    status = proc.wait()
    if status != 0:
        raise Failure(f"mcpx auth login s exited {status}: {err}")
    if not opened:
        raise Failure("mcpx auth login s printed no URL")
    log("mcpx auth login s: logged in")


def login_urls(error):
    """The URLs of a -32042 error's URL elicitations."""
    if error.get("code") != -32042:
        return None
    return [e["url"] for e in (error.get("data") or {}).get("elicitations") or [] if e.get("mode") == "url"]


def run_auth(client, daemon):
    """Lists and calls the scenario's tool; each time mcpx says a login is needed, logs in
    the way it says: opening the URL of a -32042 error (or of an elicitation mcpx relays),
    else `mcpx auth login s`."""
    for attempt in range(1, MAX_LOGINS + 2):
        try:
            client.list_tools()
            client.tool("test-tool")
            expect_complete(client.call("test-tool", {}), "test-tool")
            return
        except RpcFailure as e:
            if attempt > MAX_LOGINS:
                raise
            urls = login_urls(e.error)
            if urls:
                log(f"mcpx answered -32042: opening {len(urls)} URL(s)")
                for url in urls:
                    open_in_browser(url)
            elif "mcpx auth login" in (e.error.get("message") or ""):
                log("mcpx says to log in: running mcpx auth login")
                cli_login(daemon)
            else:
                raise


def auth_config(scenario):
    """The server's `oauth` entry and the top-level `oauth` section for a scenario, from
    MCP_CONFORMANCE_CONTEXT (pre-registered or client-credentials clients)."""
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    server = {}
    if scenario.startswith("auth/client-credentials"):
        server = {"grant": "client_credentials", "clientId": context.get("client_id")}
        if context.get("client_secret"):
            server["clientSecret"] = context["client_secret"]
        if context.get("private_key_pem"):
            server["privateKey"] = context["private_key_pem"]
    elif context.get("client_id"):
        server = {"clientId": context["client_id"]}
        if context.get("client_secret"):
            server["clientSecret"] = context["client_secret"]
    return server or None, {"clientMetadataUrl": CLIENT_METADATA_URL, "loginTimeout": "20s"}


SCENARIOS = {
    "tools_call": run_tools_call,
    "request-metadata": run_list_only,
    "sep-2322-client-request-state": run_request_state,
    "http-standard-headers": run_standard_headers,
    "http-custom-headers": run_custom_headers,
    "http-invalid-tool-headers": run_invalid_tool_headers,
    "json-schema-ref-no-deref": run_list_only,
    "json-schema-2020-12-preservation": run_schema_preservation,
    "initialize": run_list_only,
    "elicitation-sep1034-client-defaults": run_elicitation_defaults,
    "sse-retry": run_sse_retry,
}


def main():
    if len(sys.argv) != 2:
        print(f"usage: {sys.argv[0]} <scenario url>", file=sys.stderr)
        return 2
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    version = os.environ.get("MCP_CONFORMANCE_PROTOCOL_VERSION", LEGACY)
    run = SCENARIOS.get(scenario)
    if run is None and not scenario.startswith("auth/"):
        log(f"no script for scenario {scenario!r}: listing tools only")
        run = run_list_only
    daemon = Daemon(sys.argv[1])
    auth = scenario.startswith("auth/")
    status = 0
    signal.signal(signal.SIGALRM, interrupt)
    signal.signal(signal.SIGTERM, interrupt)
    signal.alarm(int(os.environ.get("MCPX_ADAPTER_DEADLINE", "25")))
    try:
        if auth:
            daemon.start(*auth_config(scenario))
            run = lambda client: run_auth(client, daemon)  # noqa: E731
        else:
            daemon.start()
        # A client that can send its user to a URL: mcpx may answer -32042 (2025-11-25) or
        # ask (a URL elicitation) with a login's.
        url_capable = dict(CAPABILITIES, elicitation={"form": {}, "url": {}})
        if version == MODERN:
            client = Modern(daemon.url)
            if auth:
                client.capabilities = url_capable
            run(client)
        else:
            client = Legacy(daemon.url)
            if auth:
                client.capabilities = url_capable
            client.initialize()
            try:
                run(client)
            finally:
                client.close()
        log(f"{scenario} ({version}): done")
    except (Failure, Interrupted, OSError, ValueError, KeyError) as e:
        log(f"{scenario} ({version}): {type(e).__name__}: {e}")
        status = 1
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        daemon.stop()
        if status:
            daemon.dump_log()
        daemon.cleanup()
    return status


if __name__ == "__main__":
    sys.exit(main())
