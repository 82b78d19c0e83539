"""A small OpenAI-compatible HTTP server that stands in for the engine in tests.

It is NOT vLLM or Dynamo (neither can run on these machines): it answers in
their response shapes, including the broken cases the launch gates must catch.

    python tests/fake_engine.py --port 8123 --shape vllm|dynamo [options]

--start-delay S      vLLM shape: the port binds only after S seconds (slow start)
--endpoints-delay S  Dynamo shape: /health is 200 at once but `endpoints` stays empty for S
                     seconds (dynamo.frontend's /health before engine registration)
--no-usage           completions come back 200 without a `usage` object
--fail-every N       every Nth completion answers HTTP 500
--degenerate         the reply is one token repeated
--crash-after S      print a fatal line and exit 1 after S seconds (a dying engine)
--crash-log FILE     at start, print FILE (a real failing engine log) and exit with --crash-code
--crash-code N       the exit code of --crash-log (default 1; 139 is a segfault's)
--all2all-backend B  recorded and reported in /v1/models (the bench --ab arms)
--latency S          seconds each completion takes
--log-line TEXT      print TEXT to the log at start (repeatable)

GET /stats returns what it saw: completions, distinct prompts, ignore_eos flags.
Logs go to stdout like an engine's, one line per event.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MODEL = "fake/moe-test"


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--shape", choices=("vllm", "dynamo", "sglang", "tensorrt-llm"), default="vllm")
    p.add_argument("--start-delay", type=float, default=0.0)
    p.add_argument("--endpoints-delay", type=float, default=0.0)
    p.add_argument("--no-usage", action="store_true")
    p.add_argument("--fail-every", type=int, default=0)
    p.add_argument("--degenerate", action="store_true")
    p.add_argument("--crash-after", type=float, default=0.0)
    p.add_argument("--crash-log")
    p.add_argument("--crash-code", type=int, default=1)
    p.add_argument("--all2all-backend", default="deepep_v2")
    p.add_argument("--latency", type=float, default=0.0)
    p.add_argument(
        "--log-line",
        action="append",
        default=[],
        help="print this line to the log after start (an engine log message)",
    )
    return p.parse_args(argv)


class State:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.t0 = time.monotonic()
        self.lock = threading.Lock()
        self.completions = 0
        self.prompts: set[str] = set()
        self.ignore_eos: list[bool] = []

    def registered(self) -> bool:
        return time.monotonic() - self.t0 >= self.args.endpoints_delay


def log(msg: str) -> None:
    print(f"INFO {time.strftime('%H:%M:%S')} {msg}", flush=True)


def make_handler(state: State) -> type[BaseHTTPRequestHandler]:
    args = state.args

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, fmt: str, *a: object) -> None:  # engine-style log line instead
            log(f"{self.command} {self.path}")

        def _send(self, code: int, body: object) -> None:
            raw = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        def do_GET(self) -> None:
            if self.path == "/health":
                if args.shape == "dynamo":
                    eps = ["dyn://dynamo.backend.generate"] if state.registered() else []
                    self._send(200, {"status": "healthy", "endpoints": eps, "instances": []})
                else:
                    self._send(200, {})
            elif self.path == "/health_generate" and args.shape in ("sglang", "tensorrt-llm"):
                # SGLang and trtllm-serve generate one token here
                self._send(200 if state.registered() else 503, {})
            elif self.path == "/v1/models":
                data = []
                if args.shape == "vllm" or state.registered():
                    data = [
                        {
                            "id": MODEL,
                            "object": "model",
                            "owned_by": "fake",
                            "all2all_backend": args.all2all_backend,
                        }
                    ]
                self._send(200, {"object": "list", "data": data})
            elif self.path == "/stats":
                with state.lock:
                    self._send(
                        200,
                        {
                            "completions": state.completions,
                            "distinct_prompts": len(state.prompts),
                            "ignore_eos": state.ignore_eos,
                            "all2all_backend": args.all2all_backend,
                        },
                    )
            else:
                self._send(404, {"error": "not found"})

        def do_POST(self) -> None:
            n = int(self.headers.get("content-length") or 0)
            try:
                req = json.loads(self.rfile.read(n) or b"{}")
            except ValueError:
                self._send(400, {"error": "bad json"})
                return
            if self.path != "/v1/chat/completions":
                self._send(404, {"error": "not found"})
                return
            with state.lock:
                state.completions += 1
                k = state.completions
                msgs = req.get("messages") or [{}]
                state.prompts.add(str(msgs[-1].get("content")))
                state.ignore_eos.append(bool(req.get("ignore_eos")))
            if args.latency:
                time.sleep(args.latency)
            if args.fail_every and k % args.fail_every == 0:
                self._send(500, {"error": "internal server error"})
                return
            max_tokens = int(req.get("max_tokens") or 16)
            n_tok = max_tokens if req.get("ignore_eos") else min(max_tokens, 12)
            words = (
                ["the"] * n_tok
                if args.degenerate
                else [f"token{i % 7}" if i % 3 else "experts" for i in range(n_tok)]
            )
            body: dict[str, object] = {
                "id": f"chatcmpl-{k}",
                "object": "chat.completion",
                "model": MODEL,
                "choices": [
                    {
                        "index": 0,
                        "finish_reason": "length" if n_tok == max_tokens else "stop",
                        "message": {"role": "assistant", "content": " ".join(words)},
                    }
                ],
            }
            if not args.no_usage:
                body["usage"] = {
                    "prompt_tokens": 20,
                    "completion_tokens": n_tok,
                    "total_tokens": 20 + n_tok,
                }
            self._send(200, body)

    return Handler


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    log(
        f"fake engine (stands in for {args.shape}) starting, pid {os.getpid()}, "
        f"all2all backend {args.all2all_backend}"
    )
    state = State(args)
    for line in args.log_line:
        print(line, flush=True)
    if args.crash_log:
        with open(args.crash_log, encoding="utf-8", errors="replace") as f:
            sys.stdout.write(f.read())
        sys.stdout.flush()
        os._exit(args.crash_code)
    if args.crash_after:

        def crash() -> None:
            time.sleep(args.crash_after)
            print("RuntimeError: fake engine crashed during init", flush=True)
            os._exit(1)

        threading.Thread(target=crash, daemon=True).start()
    if args.start_delay:
        time.sleep(args.start_delay)
    server = ThreadingHTTPServer(("127.0.0.1", args.port), make_handler(state))
    log(f"listening on 127.0.0.1:{args.port}")
    try:
        server.serve_forever(poll_interval=0.1)
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
