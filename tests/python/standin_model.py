"""A stand-in language model for the real-host tests: a tiny HTTP server speaking the four
model APIs the agent hosts use, whose "model" always asks for one tool call, then reports
the tool's result.

    python3 tests/python/standin_model.py --log FILE --suffix mcpx_call --arguments JSON

It prints `PORT <n>` on stdout once listening on 127.0.0.1 (an ephemeral port), and runs
until killed. Standard library only.

Each request the host sends is answered so:
- no tool whose name ends with `--suffix` is offered (a host's side request: a title,
  a summary, a classifier): a short text answer, `ok`;
- the conversation already holds a tool result: a final text answer, `DONE: <result>`;
- otherwise: a call of that tool with `--arguments`.

Every request is appended to `--log` as one JSON line: `{"api", "path", "tool",
"tool_result", "answer"}` (`tool`: the tool offered, if any; `tool_result`: the text of the
tool result the request carried, if any; `answer`: `call`, `final` or `ok`), so a test can
see which tool the host offered and the tool result that reached the model.

APIs (by path): Anthropic Messages (`POST /v1/messages`, SSE when `stream`), OpenAI Chat
Completions (`POST .../chat/completions`, SSE chunks when `stream`), OpenAI Responses
(`POST .../responses`, SSE), Gemini (`POST .../models/<m>:generateContent`,
`:streamGenerateContent?alt=sse`, `:countTokens`).
"""

import argparse
import http.server
import json
import sys
import threading
import time
import uuid

LOCK = threading.Lock()


def text_of(content):
    """The text inside a tool result's content, whatever shape the API gives it."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(text_of(part) for part in content)
    if isinstance(content, dict):
        for key in ("text", "output", "content", "response", "result"):
            if key in content:
                return text_of(content[key])
        return json.dumps(content)
    return str(content)


class Model:
    """What the stand-in answers, and where it logs."""

    def __init__(self, log, suffix, arguments, dump=None):
        self.dump = dump
        self.log = log
        self.suffix = suffix
        self.arguments = arguments

    def pick(self, names):
        for name in names:
            if name and name.endswith(self.suffix):
                return name
        return None

    def record(self, entry):
        with LOCK, open(self.log, "a", encoding="utf-8") as f:
            f.write(json.dumps(entry) + "\n")


# --- what each API offers and returns -------------------------------------------------


def anthropic_view(body):
    tools = [t.get("name") for t in body.get("tools") or []]
    result = None
    for message in body.get("messages") or []:
        content = message.get("content")
        if isinstance(content, list):
            for block in content:
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    result = text_of(block.get("content"))
    return tools, result


def chat_view(body):
    tools = [(t.get("function") or {}).get("name") for t in body.get("tools") or []]
    result = None
    for message in body.get("messages") or []:
        if message.get("role") == "tool":
            result = text_of(message.get("content"))
    return tools, result


def responses_view(body):
    # A namespace groups tools under its own name (Codex: one per MCP server); a call of
    # one of them names both, as `<namespace>/<tool>` here.
    tools = []
    for tool in body.get("tools") or []:
        if tool.get("type") == "namespace":
            tools += [tool.get("name") + "/" + inner.get("name") for inner in tool.get("tools") or []]
        else:
            tools.append(tool.get("name"))
    result = None
    items = body.get("input")
    for item in items if isinstance(items, list) else []:
        if isinstance(item, dict) and item.get("type") == "function_call_output":
            result = text_of(item.get("output"))
    return tools, result


def gemini_view(body):
    tools = []
    for tool in body.get("tools") or []:
        for decl in tool.get("functionDeclarations") or tool.get("function_declarations") or []:
            tools.append(decl.get("name"))
    result = None
    for content in body.get("contents") or []:
        for part in content.get("parts") or []:
            response = part.get("functionResponse") or part.get("function_response")
            if response:
                result = text_of(response.get("response"))
    return tools, result


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    model: Model = None

    def log_message(self, fmt, *args):  # quiet: the log file is the record
        pass

    def do_GET(self):
        # Model listings some hosts probe: one model, whatever it is called.
        if self.path.rstrip("/").endswith("/models"):
            return self.json(200, {"object": "list", "data": [{"id": "standin", "object": "model"}],
                                   "models": [{"name": "models/standin"}]})
        self.json(404, {"error": {"message": "not found: " + self.path}})

    def do_HEAD(self):
        self.send_response(200)
        self.send_header("content-length", "0")
        self.end_headers()

    def do_POST(self):
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            return self.json(400, {"error": {"message": "not JSON"}})
        path = self.path.split("?")[0]
        if path.endswith("/messages/count_tokens"):
            return self.json(200, {"input_tokens": 1})
        if path.endswith(":countTokens"):
            return self.json(200, {"totalTokens": 1})
        if path.endswith("/messages"):
            return self.answer("anthropic", body, anthropic_view, self.anthropic)
        if path.endswith("/chat/completions"):
            return self.answer("chat", body, chat_view, self.chat)
        if path.endswith("/responses"):
            return self.answer("responses", body, responses_view, self.openai_responses)
        if ":generateContent" in path or ":streamGenerateContent" in path:
            return self.answer("gemini", body, gemini_view, self.gemini)
        self.record({"api": None, "path": self.path, "tool": None, "tool_result": None, "answer": "404"})
        self.json(404, {"error": {"message": "not found: " + self.path}})

    def record(self, entry):
        self.model.record(entry)

    def answer(self, api, body, view, reply):
        tools, result = view(body)
        tool = self.model.pick(tools)
        if tool is None:
            kind, payload = "ok", "ok"
        elif result is not None:
            kind, payload = "final", "DONE: " + result
        else:
            kind, payload = "call", tool
        self.record({"api": api, "path": self.path, "tool": tool, "tool_result": result,
                     "answer": kind, "tools": tools})
        if self.model.dump:
            with LOCK, open(self.model.dump, "a", encoding="utf-8") as f:
                f.write(json.dumps({"path": self.path, "headers": dict(self.headers), "body": body}) + "\n")
        reply(body, kind, payload)

    # --- writers ---------------------------------------------------------------------

    def json(self, status, value):
        data = json.dumps(value).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def sse(self, events):
        """Writes `events` ((name or None, data) pairs) as one complete SSE response."""
        chunks = []
        for name, data in events:
            text = data if isinstance(data, str) else json.dumps(data)
            chunks.append((f"event: {name}\n" if name else "") + f"data: {text}\n\n")
        data = "".join(chunks).encode()
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def anthropic(self, body, kind, payload):
        model = body.get("model") or "standin"
        usage = {"input_tokens": 1, "output_tokens": 1, "cache_creation_input_tokens": 0,
                 "cache_read_input_tokens": 0}
        if kind == "call":
            block = {"type": "tool_use", "id": "toolu_" + uuid.uuid4().hex[:20], "name": payload,
                     "input": self.model.arguments}
            stop = "tool_use"
        else:
            block = {"type": "text", "text": payload}
            stop = "end_turn"
        message = {"id": "msg_" + uuid.uuid4().hex[:20], "type": "message", "role": "assistant",
                   "model": model, "content": [block], "stop_reason": stop,
                   "stop_sequence": None, "usage": usage}
        if not body.get("stream"):
            return self.json(200, message)
        start = dict(message, content=[], stop_reason=None)
        if kind == "call":
            opened = dict(block, input={})
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        else:
            opened = {"type": "text", "text": ""}
            delta = {"type": "text_delta", "text": payload}
        self.sse([
            ("message_start", {"type": "message_start", "message": start}),
            ("content_block_start", {"type": "content_block_start", "index": 0, "content_block": opened}),
            ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}),
            ("content_block_stop", {"type": "content_block_stop", "index": 0}),
            ("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                               "usage": {"output_tokens": 1}}),
            ("message_stop", {"type": "message_stop"}),
        ])

    def chat(self, body, kind, payload):
        model = body.get("model") or "standin"
        ident = "chatcmpl-" + uuid.uuid4().hex[:20]
        created = int(time.time())
        usage = {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
        if kind == "call":
            call = {"id": "call_" + uuid.uuid4().hex[:20], "type": "function",
                    "function": {"name": payload, "arguments": json.dumps(self.model.arguments)}}
            message = {"role": "assistant", "content": None, "tool_calls": [call]}
            finish = "tool_calls"
        else:
            message = {"role": "assistant", "content": payload}
            finish = "stop"
        if not body.get("stream"):
            return self.json(200, {"id": ident, "object": "chat.completion", "created": created,
                                   "model": model, "usage": usage,
                                   "choices": [{"index": 0, "message": message, "finish_reason": finish}]})

        def chunk(delta, finish_reason=None, **extra):
            return dict({"id": ident, "object": "chat.completion.chunk", "created": created, "model": model,
                         "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}]}, **extra)

        if kind == "call":
            delta = {"role": "assistant", "content": None,
                     "tool_calls": [dict(message["tool_calls"][0], index=0)]}
        else:
            delta = {"role": "assistant", "content": payload}
        events = [(None, chunk(delta)), (None, chunk({}, finish))]
        if (body.get("stream_options") or {}).get("include_usage"):
            events.append((None, {"id": ident, "object": "chat.completion.chunk", "created": created,
                                  "model": model, "choices": [], "usage": usage}))
        events.append((None, "[DONE]"))
        self.sse(events)

    def openai_responses(self, body, kind, payload):
        model = body.get("model") or "standin"
        ident = "resp_" + uuid.uuid4().hex[:20]
        if kind == "call":
            namespace, _, name = payload.rpartition("/")
            item = {"type": "function_call", "id": "fc_" + uuid.uuid4().hex[:20], "status": "completed",
                    "call_id": "call_" + uuid.uuid4().hex[:20], "name": name,
                    "arguments": json.dumps(self.model.arguments)}
            if namespace:
                item["namespace"] = namespace
        else:
            item = {"type": "message", "id": "msg_" + uuid.uuid4().hex[:20], "status": "completed",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": payload, "annotations": []}]}
        usage = {"input_tokens": 1, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 1,
                 "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 2}
        response = {"id": ident, "object": "response", "created_at": int(time.time()), "model": model,
                    "status": "completed", "output": [item], "usage": usage}
        if not body.get("stream"):
            return self.json(200, response)
        events = [
            ("response.created", {"type": "response.created",
                                  "response": dict(response, status="in_progress", output=[])}),
            ("response.output_item.added", {"type": "response.output_item.added", "output_index": 0,
                                            "item": item}),
        ]
        if kind != "call":
            events.append(("response.output_text.delta", {"type": "response.output_text.delta",
                                                          "item_id": item["id"], "output_index": 0,
                                                          "content_index": 0, "delta": payload}))
        events += [
            ("response.output_item.done", {"type": "response.output_item.done", "output_index": 0,
                                           "item": item}),
            ("response.completed", {"type": "response.completed", "response": response}),
        ]
        self.sse(events)

    def gemini(self, body, kind, payload):
        if kind == "call":
            part = {"functionCall": {"name": payload, "args": self.model.arguments}}
        else:
            part = {"text": payload}
        answer = {"candidates": [{"content": {"role": "model", "parts": [part]}, "finishReason": "STOP",
                                  "index": 0}],
                  "usageMetadata": {"promptTokenCount": 1, "candidatesTokenCount": 1, "totalTokenCount": 2},
                  "modelVersion": "standin"}
        if ":streamGenerateContent" in self.path:
            return self.sse([(None, answer)])
        self.json(200, answer)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--log", required=True)
    parser.add_argument("--suffix", default="mcpx_call")
    parser.add_argument("--arguments", required=True)
    parser.add_argument("--dump", help="also append each request whole (headers, body) here")
    args = parser.parse_args()
    Handler.model = Model(args.log, args.suffix, json.loads(args.arguments), args.dump)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    print(f"PORT {server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
