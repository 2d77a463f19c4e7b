#!/usr/bin/env python3
"""mock_llm.py -- a scripted mock LLM server for STARK's tests.

Speaks OpenAI chat completions (POST .../chat/completions) and Anthropic
messages (POST .../messages) on 127.0.0.1 only, on a port the OS picks
(printed as "port N" on stdout and written to --port-file).  Python 3
standard library only.  It checks requests the way the real services do
(JSON body, model, messages, max_tokens for Anthropic, the key in the right
header when --key is given, anthropic-version) and answers from a script:

  script := [spec, ...]                     one queue for every path
          | {"queue": [spec, ...],          used first, in order
             "paths": {P: [spec, ...]},     per path; P is the request path
                                            or "chat/completions"/"messages"
             "default": spec}               when the queues are empty
  script may also hold "models": {MODEL: DIALECT}: how each model behaves.
  spec   := {"status": 200, "text": "...", "usage": [in, out],
             "reasoning": "...",            the model's reasoning (reasoning dialects)
             "reasoning_tokens": n,         its token count (default: words * 2)
             "cut": true,                   the answer never came: the token limit
                                            was spent reasoning (finish_reason length /
                                            stop_reason max_tokens, no text)
             "dialect": DIALECT,            overrides the model's
             "delay": seconds,              before answering; [lo, hi]: uniform,
                                            from the --seed generator
             "echo_problem": true,          answer with the request's first ```python
                                            block, its Model renamed ModelNew (the
                                            problem itself, an honest candidate)
             "headers": {name: value},
             "retry_after": "2" | 2,        a Retry-After header as given
             "retry_after_date": seconds,   a Retry-After HTTP-date, now + seconds
             "error": "message",            the error body's message (status >= 400)
             "body": "raw text",            sent verbatim instead of a reply
             "repeat": n,                   the spec stands for n responses
             "fault": "hang" | "drip" | "truncate" | "huge" | "reset" | "close"
                      | "no_anchors",
             "seconds": s,                  hang/drip length (default: max-seconds)
             "interval": s,                 drip: seconds between bytes (0.1)
             "bytes": n,                    huge: body size (64 MiB)
             "chunked": true}               huge: no Content-Length

Dialects (what real servers document; the default is "plain"):
  plain              OpenAI chat completions / Anthropic messages as before
  openai-reasoning   OpenAI's o-series and GPT-5: max_tokens is refused (400,
                     param max_tokens, "Use 'max_completion_tokens' instead"),
                     so is any temperature but 1 and an unknown reasoning_effort;
                     usage has completion_tokens_details.reasoning_tokens
  reasoning-content  DeepSeek, vLLM (older): message.reasoning_content beside content
  reasoning-field    vLLM (newer), OpenRouter: message.reasoning beside content
  think-inline       a server without a reasoning parser: content starts with
                     <think>...</think>
  reasoning-apart    usage whose completion_tokens leave the reasoning out
                     (total_tokens and reasoning_tokens hold it)
  anthropic-thinking Anthropic with thinking {type: enabled, budget_tokens >= 1024
                     and < max_tokens} or {type: adaptive}; any temperature but 1
                     is refused with thinking on; thinking, redacted_thinking and
                     text blocks come back
  anthropic-adaptive as anthropic-thinking, but {type: enabled} is refused (models
                     that take adaptive thinking only); output_config.effort is
                     checked

Faults: hang sleeps without answering; drip sends headers then one byte per
interval; truncate sends half of a valid reply with a matching
Content-Length; huge sends a valid reply padded to n bytes; reset closes the
connection with RST after reading the request; close closes it silently;
no_anchors is a well-formed reply whose text has no <<<IMPROVE>>> anchors.

GET /_stats returns {"requests": N, "paths": {path: n}, "hashes": {sha256:
n}, "max_concurrent": n, "log": [{"path", "sha256", "bytes", "t", "auth",
"answer", ["body"]}]} with t in seconds since start, so tests can assert
counts, timing between attempts, and that no request was sent twice.

The server exits by itself after --max-seconds, or when --parent-pid is no
longer its parent (the test that started it died).
"""
import argparse
import email.utils
import hashlib
import json
import os
import random
import re
import socket
import struct
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MAX_REQUEST = 64 << 20


class Script:
    def __init__(self, data):
        self.lock = threading.Lock()
        self.queue = []
        self.paths = {}
        self.default = {}
        self.models = {}
        if isinstance(data, list):
            self.queue = self.expand(data)
        elif isinstance(data, dict):
            self.queue = self.expand(data.get("queue", []))
            self.paths = {k: self.expand(v) for k, v in data.get("paths", {}).items()}
            self.default = data.get("default", {})
            self.models = dict(data.get("models", {}))
        else:
            raise ValueError("script must be a list or an object")

    @staticmethod
    def expand(specs):
        out = []
        for s in specs:
            out.extend([s] * int(s.get("repeat", 1)))
        return out

    def next(self, path, kind):
        with self.lock:
            for key in (path, kind):
                q = self.paths.get(key)
                if q:
                    return q.pop(0)
            if self.queue:
                return self.queue.pop(0)
            return self.default


class Stats:
    def __init__(self, log_bodies):
        self.lock = threading.Lock()
        self.t0 = time.monotonic()
        self.requests = 0
        self.paths = {}
        self.hashes = {}
        self.log = []
        self.active = 0
        self.max_concurrent = 0
        self.log_bodies = log_bodies

    def enter(self, path, body, auth):
        digest = hashlib.sha256(body).hexdigest()
        entry = {"path": path, "sha256": digest, "bytes": len(body),
                 "t": round(time.monotonic() - self.t0, 4), "auth": auth}
        if self.log_bodies:
            entry["body"] = body.decode("utf-8", "replace")
        with self.lock:
            self.requests += 1
            self.paths[path] = self.paths.get(path, 0) + 1
            self.hashes[digest] = self.hashes.get(digest, 0) + 1
            self.log.append(entry)
            self.active += 1
            self.max_concurrent = max(self.max_concurrent, self.active)
        return entry

    def leave(self):
        with self.lock:
            self.active -= 1

    def snapshot(self):
        with self.lock:
            return {"requests": self.requests, "paths": dict(self.paths),
                    "hashes": dict(self.hashes), "max_concurrent": self.max_concurrent,
                    "log": list(self.log)}


REASONING = "Let me think about the memory traffic first. One pass over x suffices."
OPENAI_EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh")
ANTHROPIC_EFFORTS = ("low", "medium", "high", "max")


ROOT_RE = re.compile(r"(?<=class )Model(?=[(,:])|(?<=super\()Model(?=[(,:])")


def echo_problem(req):
    """The request's first ```python block, Model renamed ModelNew, fenced again."""
    for m in reversed((req or {}).get("messages", [])):
        c = m.get("content", "")
        if isinstance(c, list):
            c = "".join(p.get("text", "") for p in c)
        found = re.search(r"```python\n(.*?)```", c, re.S)
        if m.get("role") == "user" and found:
            return "```python\n" + ROOT_RE.sub("ModelNew", found.group(1)) + "```\n"
    return "no problem found"


def reply_body(kind, spec, model, dialect="plain", req=None):
    text = echo_problem(req) if spec.get("echo_problem") else spec.get("text", "ok")
    if spec.get("fault") == "no_anchors":
        text = spec.get("text", "Here is a faster kernel, but I forgot the anchors.\n")
    tin, tout = spec.get("usage", [11, 7])
    reasoning = spec.get("reasoning", REASONING)
    rtok = int(spec.get("reasoning_tokens", 2 * len(reasoning.split())))
    cut = bool(spec.get("cut"))
    if kind == "messages":
        content = [{"type": "text", "text": text}]
        thinking = (req or {}).get("thinking") or {}
        if dialect.startswith("anthropic-") and thinking.get("type") in ("enabled", "adaptive"):
            content = [{"type": "thinking", "thinking": reasoning, "signature": "c2lnbmF0dXJl"},
                       {"type": "redacted_thinking", "data": "ZW5jcnlwdGVk"}] + content
            tout += rtok
            if cut:
                content = content[:2]
        return {"id": "msg_mock", "type": "message", "role": "assistant", "model": model,
                "content": content, "stop_reason": "max_tokens" if cut else "end_turn",
                "usage": {"input_tokens": tin, "output_tokens": tout}}
    msg = {"role": "assistant", "content": None if cut else text}
    usage = {"prompt_tokens": tin, "completion_tokens": tout, "total_tokens": tin + tout}
    if dialect == "think-inline":
        msg["content"] = "<think>\n" + reasoning + ("" if cut else "\n</think>\n\n" + text)
    elif dialect in ("reasoning-content", "reasoning-field", "openai-reasoning",
                     "reasoning-apart"):
        if dialect == "reasoning-content":
            msg["reasoning_content"] = reasoning
        elif dialect == "reasoning-field":
            msg["reasoning"] = reasoning
        if dialect == "reasoning-apart":
            usage["total_tokens"] = tin + tout + rtok
        else:
            usage["completion_tokens"] = tout + rtok
            usage["total_tokens"] = tin + tout + rtok
        usage["completion_tokens_details"] = {"reasoning_tokens": rtok}
    return {"id": "chatcmpl-mock", "object": "chat.completion", "created": int(time.time()),
            "model": model,
            "choices": [{"index": 0, "finish_reason": "length" if cut else "stop",
                         "message": msg}],
            "usage": usage}


def dialect_problem(kind, dialect, req):
    """What a server of this dialect refuses in req: (param, message) or None."""
    if dialect == "openai-reasoning" and kind == "chat/completions":
        if "max_tokens" in req:
            return ("max_tokens", "Unsupported parameter: 'max_tokens' is not supported with "
                    "this model. Use 'max_completion_tokens' instead.")
        t = req.get("temperature")
        if t is not None and t != 1:
            return ("temperature", "Unsupported value: 'temperature' does not support %s with "
                    "this model. Only the default (1) value is supported." % t)
        e = req.get("reasoning_effort")
        if e is not None and e not in OPENAI_EFFORTS:
            return ("reasoning_effort", "Invalid value: '%s'. Supported values are: %s."
                    % (e, ", ".join("'%s'" % x for x in OPENAI_EFFORTS)))
        return None
    if not dialect.startswith("anthropic-") or kind != "messages":
        return None
    thinking = req.get("thinking")
    if thinking is None:
        return None
    ttype = thinking.get("type") if isinstance(thinking, dict) else None
    if ttype == "enabled" and dialect == "anthropic-adaptive":
        return (None, "thinking.type.enabled is not supported for this model. Use "
                "thinking.type.adaptive and output_config.effort to control thinking behavior.")
    if ttype == "enabled":
        b = thinking.get("budget_tokens")
        if not isinstance(b, int) or b < 1024:
            return (None, "thinking.enabled.budget_tokens: Input should be greater than or "
                    "equal to 1024")
        if b >= req.get("max_tokens", 0):
            return (None, "`max_tokens` must be greater than `thinking.budget_tokens`. Please "
                    "consult our documentation at https://docs.claude.com/en/docs/"
                    "build-with-claude/extended-thinking#max-tokens-and-context-window-size")
    elif ttype != "adaptive":
        return (None, "thinking.type: Input tag '%s' found using 'type' does not match any of "
                "the expected tags: 'disabled', 'enabled', 'adaptive'" % ttype)
    t = req.get("temperature")
    if t is not None and t != 1:
        return (None, "`temperature` may only be set to 1 when thinking is enabled or in "
                "adaptive mode. Please consult our documentation at https://docs.claude.com/"
                "en/docs/build-with-claude/extended-thinking#feature-compatibility")
    effort = (req.get("output_config") or {}).get("effort")
    if effort is not None and effort not in ANTHROPIC_EFFORTS:
        return (None, "output_config.effort: Input should be 'low', 'medium', 'high' or 'max'")
    return None


def error_body(kind, status, message, param=None):
    etype = {400: "invalid_request_error", 401: "authentication_error",
             403: "permission_error", 404: "not_found_error", 429: "rate_limit_error",
             500: "api_error", 503: "overloaded_error"}.get(status, "api_error")
    if kind == "messages":
        return {"type": "error", "error": {"type": etype, "message": message}}
    code = None
    if param:
        code = "unsupported_parameter" if message.startswith("Unsupported parameter") else \
            "unsupported_value"
    return {"error": {"message": message, "type": etype, "param": param, "code": code}}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "mock-llm/1"

    def log_message(self, fmt, *args):
        if self.server.verbose:
            sys.stderr.write("mock_llm: " + (fmt % args) + "\n")

    def send_json(self, status, obj, headers=None, close=False):
        data = json.dumps(obj).encode()
        self.send_raw(status, data, headers, close)

    def send_raw(self, status, data, headers=None, close=False, ctype="application/json"):
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, str(v))
        if close:
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def do_GET(self):
        if self.path == "/_stats":
            self.send_json(200, self.server.stats.snapshot())
        else:
            self.send_json(404, {"error": {"message": "no such path", "type": "not_found"}})

    def check_auth(self, kind):
        key = self.server.key
        if kind == "messages":
            got = self.headers.get("x-api-key")
        else:
            got = self.headers.get("Authorization")
            if got is not None:
                got = got[7:] if got.startswith("Bearer ") else ""
        if key is None:
            return "none"
        if got is None:
            return "missing"
        return "ok" if got == key else "bad"

    def validate(self, kind, body):
        try:
            req = json.loads(body)
        except ValueError as e:
            return None, "body is not json: %s" % e
        if not isinstance(req, dict) or not isinstance(req.get("model"), str):
            return None, "model is required"
        msgs = req.get("messages")
        if not isinstance(msgs, list) or not msgs:
            return None, "messages must be a non-empty list"
        roles = ("user", "assistant") if kind == "messages" else ("system", "user", "assistant")
        for m in msgs:
            if not isinstance(m, dict) or m.get("role") not in roles:
                return None, "bad message role"
        if kind == "messages" and not isinstance(req.get("max_tokens"), int):
            return None, "max_tokens is required"
        if kind == "messages" and self.headers.get("anthropic-version") is None:
            return None, "anthropic-version header is required"
        return req, None

    def do_POST(self):
        path = self.path
        if path.endswith("/chat/completions"):
            kind = "chat/completions"
        elif path.endswith("/messages"):
            kind = "messages"
        else:
            kind = None
        try:
            length = int(self.headers.get("Content-Length", "0"))
        except ValueError:
            length = -1
        if length < 0 or length > MAX_REQUEST:
            self.send_json(413, {"error": {"message": "bad length", "type": "invalid"}},
                           close=True)
            return
        body = self.rfile.read(length)
        auth = self.check_auth(kind) if kind else "none"
        entry = self.server.stats.enter(path, body, auth)
        try:
            self.answer(kind, path, body, auth, entry)
        except (BrokenPipeError, ConnectionResetError, socket.timeout):
            self.close_connection = True
        finally:
            self.server.stats.leave()

    def answer(self, kind, path, body, auth, entry):
        if kind is None:
            entry["answer"] = 404
            self.send_json(404, {"error": {"message": "unknown path " + path,
                                           "type": "not_found_error"}})
            return
        if auth in ("missing", "bad"):
            entry["answer"] = 401
            self.send_json(401, error_body(kind, 401, "invalid api key (%s)" % auth))
            return
        req, problem = self.validate(kind, body)
        if problem:
            entry["answer"] = 400
            self.send_json(400, error_body(kind, 400, problem))
            return
        dialect = self.server.script.models.get(req["model"], "plain")
        refused = dialect_problem(kind, dialect, req)
        if refused:
            entry["answer"] = 400
            self.send_json(400, error_body(kind, 400, refused[1], refused[0]))
            return
        spec = self.server.script.next(path, kind)
        dialect = spec.get("dialect", dialect)
        entry["answer"] = spec.get("fault") or spec.get("status", 200)
        if isinstance(spec.get("delay"), list):
            with self.server.rng_lock:
                d = self.server.rng.uniform(*spec["delay"])
            time.sleep(d)
        elif spec.get("delay"):
            time.sleep(float(spec["delay"]))
        fault = spec.get("fault")
        if fault in ("hang", "drip", "truncate", "huge", "reset", "close"):
            getattr(self, "fault_" + fault)(kind, spec, req)
            return
        headers = dict(spec.get("headers", {}))
        if "retry_after" in spec:
            headers["Retry-After"] = spec["retry_after"]
        if "retry_after_date" in spec:
            when = time.time() + float(spec["retry_after_date"])
            headers["Retry-After"] = email.utils.formatdate(when, usegmt=True)
        status = int(spec.get("status", 200))
        if "body" in spec:
            self.send_raw(status, spec["body"].encode(), headers,
                          ctype=spec.get("content_type", "application/json"))
        elif status >= 400:
            msg = spec.get("error", "mock error %d" % status)
            self.send_json(status, error_body(kind, status, msg), headers)
        else:
            self.send_json(status, reply_body(kind, spec, req["model"], dialect, req), headers)

    def fault_seconds(self, spec):
        return float(spec.get("seconds", self.server.max_seconds))

    def fault_hang(self, kind, spec, req):
        time.sleep(self.fault_seconds(spec))
        self.close_connection = True

    def fault_drip(self, kind, spec, req):
        data = json.dumps(reply_body(kind, spec, req["model"])).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data) + 65536))
        self.end_headers()
        self.wfile.flush()
        interval = float(spec.get("interval", 0.1))
        end = time.monotonic() + self.fault_seconds(spec)
        while time.monotonic() < end:
            self.wfile.write(b" ")
            self.wfile.flush()
            time.sleep(interval)
        self.close_connection = True

    def fault_truncate(self, kind, spec, req):
        data = json.dumps(reply_body(kind, spec, req["model"])).encode()
        self.send_raw(200, data[: len(data) // 2])

    def fault_huge(self, kind, spec, req):
        size = int(spec.get("bytes", 64 << 20))
        head = json.dumps(reply_body(kind, dict(spec, text="@"), req["model"])).encode()
        head, tail = head.split(b"@", 1)
        pad = max(0, size - len(head) - len(tail))
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        if spec.get("chunked"):
            self.send_header("Transfer-Encoding", "chunked")
        else:
            self.send_header("Content-Length", str(len(head) + pad + len(tail)))
        self.send_header("Connection", "close")
        self.close_connection = True
        self.end_headers()
        chunk = b"x" * 65536

        def put(b):
            if spec.get("chunked"):
                self.wfile.write(b"%x\r\n%s\r\n" % (len(b), b))
            else:
                self.wfile.write(b)

        put(head)
        while pad > 0:
            n = min(pad, len(chunk))
            put(chunk[:n])
            pad -= n
        put(tail)
        if spec.get("chunked"):
            self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def fault_reset(self, kind, spec, req):
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                   struct.pack("ii", 1, 0))
        self.close_connection = True
        self.connection.close()

    def fault_close(self, kind, spec, req):
        self.close_connection = True
        self.connection.shutdown(socket.SHUT_RDWR)


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True


def watchdog(deadline, parent):
    while True:
        if time.monotonic() >= deadline:
            os._exit(0)
        if parent and os.getppid() != parent:
            os._exit(0)
        time.sleep(0.1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--script", help="JSON script file (default: always answer ok)")
    ap.add_argument("--port-file", help="write the port here (atomically)")
    ap.add_argument("--max-seconds", type=float, default=60.0, help="exit after this long")
    ap.add_argument("--parent-pid", type=int, default=0, help="exit when this parent dies")
    ap.add_argument("--key", help="require this API key")
    ap.add_argument("--log-bodies", action="store_true", help="keep request bodies in /_stats")
    ap.add_argument("--verbose", action="store_true")
    ap.add_argument("--seed", type=int, default=1, help="seed of random delays")
    args = ap.parse_args()

    data = []
    if args.script:
        with open(args.script, encoding="utf-8") as f:
            data = json.load(f)
    srv = Server(("127.0.0.1", 0), Handler)
    srv.rng = random.Random(args.seed)
    srv.rng_lock = threading.Lock()
    srv.script = Script(data)
    srv.stats = Stats(args.log_bodies)
    srv.key = args.key
    srv.max_seconds = args.max_seconds
    srv.verbose = args.verbose
    port = srv.server_address[1]
    t = threading.Thread(target=watchdog, daemon=True,
                         args=(time.monotonic() + args.max_seconds, args.parent_pid))
    t.start()
    if args.port_file:
        tmp = args.port_file + ".tmp"
        with open(tmp, "w") as f:
            f.write("%d\n" % port)
        os.rename(tmp, args.port_file)
    print("port %d" % port, flush=True)
    try:
        srv.serve_forever(poll_interval=0.1)
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
