"""The HTTP server: SGLang's endpoints, their status codes and JSON shapes, on --host/--port."""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time
import traceback
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from . import config, engine, multinode, rendezvous, speed, startup, texts
from .load import GpuLoad
from .version import __version__

OPEN_PREFIXES = ("/health", "/ready", "/metrics")


class State:
    def __init__(
        self, args: argparse.Namespace, argv: list[str], model: startup.Model, load: GpuLoad, max_tokens: int
    ) -> None:
        self.args, self.argv, self.model, self.load = args, argv, model, load
        self.status = "Starting"
        self.max_total_tokens = max_tokens
        self.started = time.time()
        self.lock = threading.Lock()
        self.running = 0
        self.queued = 0
        # Admission as SGLang's scheduler does it: a request is scheduled only while fewer than
        # max_running_requests run (sglang 0.5.23 managers/scheduler.py:4121, get_num_allocatable_reqs <= 0
        # marks the batch full; the req_to_token pool has max_running_requests rows), the rest wait in the
        # waiting queue (the '#queue-req' of the batch lines, sglang:num_queue_reqs).
        self.max_running = admission_bound(args)
        self.admission = threading.BoundedSemaphore(self.max_running)
        # a lab fault for gpuhost tune's tests: this variant decodes fast and answers garbage (speed.FAST_WRONG)
        self.fast_wrong = "fast-wrong" in config.variant_faults(argv)
        self.prompt_tokens_total = 0
        self.generation_tokens_total = 0
        self.requests_total = 0
        self.ttft: list[float] = []
        self.e2e: list[float] = []

    @property
    def served_name(self) -> str:
        return str(self.args.served_model_name or self.args.model_path)

    def server_info(self) -> dict[str, Any]:
        info = {k: v for k, v in vars(self.args).items()}
        info.update(
            {
                # the argv alone, watermark secrets redacted and nothing else (sglang 0.5.23 server_args.py:717,
                # sampling/watermarking/core.py:110-134): the API key stays in it
                "launch_command": " ".join(self.argv),
                "version": __version__,
                "startup_time": round(self.started, 3),
                "frontend": "python",
                "max_total_num_tokens": self.max_total_tokens,
                "kv_events": None,
                "internal_states": [
                    {
                        "avg_spec_accept_length": None,
                        # the scheduler's own bound (sglang 0.5.23 scheduler_components/internal_state.py:73)
                        "effective_max_running_requests_per_dp": self.max_running,
                        "last_gen_throughput": 0.0,
                        "memory_usage": {"weight": 56.38, "kvcache": 24.37},
                    }
                ],
            }
        )
        return info


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "uvicorn"
    sys_version = ""
    state: State

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        if getattr(self.state.args, "log_requests", False) or self.path.startswith(("/generate", "/v1/")):
            phrase = {
                200: "OK",
                401: "Unauthorized",
                404: "Not Found",
                503: "Service Unavailable",
                400: "Bad Request",
            }.get(int(code), "")
            sys.stderr.write(
                f"[{time.strftime('%Y-%m-%d %H:%M:%S')}] INFO:     {self.client_address[0]}:"
                f'{self.client_address[1]} - "{self.command} {self.path} HTTP/1.1" {code} {phrase}\n'
            )

    # ---- plumbing --------------------------------------------------------------------------

    def _json(self, code: int, body: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _text(self, code: int, body: str, ctype: str = "text/plain; charset=utf-8") -> None:
        data = body.encode()
        self.send_response(code)
        self.send_header("content-type", ctype)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _body(self) -> dict[str, Any]:
        n = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(n) if n else b"{}"
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = None
        return body if isinstance(body, dict) else {}

    def _authorized(self) -> bool:
        key = self.state.args.api_key
        if not key or self.path.startswith(OPEN_PREFIXES):
            return True
        if self.headers.get("authorization", "") == f"Bearer {key}":
            return True
        self._json(401, {"error": "Unauthorized"})
        return False

    def _sse_start(self) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/event-stream; charset=utf-8")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()

    def _sse(self, payload: str) -> None:
        data = f"data: {payload}\n\n".encode()
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _sse_end(self) -> None:
        self._sse("[DONE]")
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    # ---- routes ----------------------------------------------------------------------------

    def do_GET(self) -> None:
        path = self.path.split("?")[0]
        if not self._authorized():
            return
        s = self.state
        if path in ("/health", "/health_generate"):
            if s.status != "Up":
                self._text(503, "")
                return
            self._text(200, "")
        elif path == "/ready" and startup.VERSION >= (0, 5, 21):
            self._text(200 if s.status == "Up" else 503, "")
        elif path == "/v1/models":
            self._json(
                200,
                {
                    "object": "list",
                    "data": [
                        {
                            "id": s.served_name,
                            "object": "model",
                            "created": int(s.started),
                            "owned_by": "sglang",
                            "root": s.served_name,
                            "parent": None,
                            "max_model_len": s.model.context_len,
                        }
                    ],
                },
            )
        elif path.startswith("/v1/models/"):
            name = path[len("/v1/models/") :]
            if name != s.served_name:
                self._json(
                    404,
                    {
                        "error": {
                            "message": f"The model '{name}' does not exist",
                            "type": "invalid_request_error",  # sglang 0.5.23 http_server.py:2025-2045
                            "param": "model",
                            "code": "model_not_found",
                        }
                    },
                )
            else:
                self._json(
                    200,
                    {
                        "id": name,
                        "object": "model",
                        "created": int(s.started),
                        "owned_by": "sglang",
                        "root": name,
                        "max_model_len": s.model.context_len,
                    },
                )
        elif path in ("/model_info", "/get_model_info"):
            self._json(
                200,
                {
                    "model_path": s.args.model_path,
                    "tokenizer_path": s.args.tokenizer_path or s.args.model_path,
                    "served_model_name": s.served_name,
                    "is_generation": True,
                    "preferred_sampling_params": None,
                    "weight_version": "default",
                    "load_format": "auto",
                    "reasoning_parser": s.args.reasoning_parser,
                    "tool_call_parser": s.args.tool_call_parser,
                    "model_type": s.model.config.get("model_type"),
                    "architectures": s.model.config.get("architectures"),
                },
            )
        elif path == "/server_info" and startup.VERSION >= (0, 5, 12) or path == "/get_server_info":
            self._json(200, s.server_info())
        elif path == "/metrics" and s.args.enable_metrics:
            self._text(200, metrics(s), "text/plain; version=0.0.4; charset=utf-8")
        else:
            self._json(404, {"detail": "Not Found"})

    def do_POST(self) -> None:
        path = self.path.split("?")[0]
        if not self._authorized():
            return
        body = self._body()
        if path == "/v1/chat/completions":
            self._chat(body)
        elif path == "/v1/completions":
            self._chat(body, legacy=True)
        elif path == "/generate":
            self._generate(body)
        elif path == "/flush_cache":
            self._text(
                200,
                "Cache flushed.\nPlease check backend logs for more details. (When there are running "
                "or waiting requests, the operation will not be performed.)\n",
            )
        else:
            self._json(404, {"detail": "Not Found"})

    # ---- generation ------------------------------------------------------------------------

    def _decode(self, completion: engine.Completion, temperature: float = 0.0) -> engine.Completion | None:
        """The completion as the model computes it; None if the server just died on it.

        ``nan-on-first-decode``: NaN logits from the first decode on. At temperature 0 SGLang 0.5.23 takes argmax
        and goes on serving wrong tokens with null log-probabilities (:func:`engine.nan_greedy`); a sampled
        request reaches torch.multinomial, which raises, and the scheduler dies (:func:`crash_nan`)."""
        s = self.state
        if s.status == "Up" and "nan-on-first-decode" in config.faults():
            if temperature > 0:
                crash_nan(s.load)
                return None
            return engine.nan_greedy(completion)
        return completion

    def _run(self, completion: engine.Completion, emit: Any) -> None:
        s = self.state
        delay = config.itl()
        start = time.monotonic()  # TTFT and E2E count from arrival, queueing included (as SGLang's do)
        if not s.admission.acquire(blocking=False):  # every slot taken: it waits in the queue
            with s.lock:
                s.queued += 1
            s.admission.acquire()
            with s.lock:
                s.queued -= 1
        with s.lock:
            s.running += 1
        s.load.begin()
        try:
            config.pause(0.02)
            first = True
            for kind, tok in [("reasoning", t) for t in completion.reasoning] + [
                ("content", t) for t in completion.content
            ]:
                if first:
                    s.ttft.append(time.monotonic() - start)
                    first = False
                emit(kind, tok)
                if delay:  # SIMULATED: the settings' effect on decode speed (speed.py documents the model)
                    time.sleep(delay * speed.factor(s.args, s.running, s.fast_wrong))
        finally:
            with s.lock:
                s.running -= 1
                s.requests_total += 1
                s.prompt_tokens_total += completion.prompt_tokens
                s.generation_tokens_total += completion.completion_tokens
            s.e2e.append(time.monotonic() - start)
            s.load.end()
            s.admission.release()

    def _completion_for(self, body: dict[str, Any], prompt: str) -> engine.Completion:
        kwargs = body.get("chat_template_kwargs") or {}
        thinking = kwargs.get("enable_thinking", kwargs.get("thinking", True)) is not False
        max_tokens = body.get("max_completion_tokens") or body.get("max_tokens")
        return engine.complete(
            prompt,
            max_tokens,
            thinking=thinking,
            garbage="garbage" in config.faults() or self.state.fast_wrong,
            ignore_eos=bool(body.get("ignore_eos")),
            temperature=float(body.get("temperature") or 0.0),
        )

    def _chat(self, body: dict[str, Any], legacy: bool = False) -> None:
        s = self.state
        if legacy:
            prompt = str(body.get("prompt", ""))
        else:
            messages = body.get("messages")
            if not isinstance(messages, list) or not messages:
                self._json(
                    400,
                    {
                        "object": "error",
                        "message": "messages must be a non-empty list",
                        "type": "BadRequestError",
                        "param": None,
                        "code": 400,
                    },
                )
                return
            users = [m for m in messages if isinstance(m, dict) and m.get("role") == "user"]
            prompt = _text_of(users[-1].get("content")) if users else ""
        decoded = self._decode(self._completion_for(body, prompt), float(body.get("temperature") or 0.0))
        if decoded is None:
            return
        comp = decoded
        separate = bool(s.args.reasoning_parser) and not legacy
        rid = uuid.uuid4().hex
        created = int(time.time())
        want_lp = bool(body.get("logprobs")) and not legacy
        top = int(body.get("top_logprobs") or 0)
        obj = "text_completion" if legacy else "chat.completion"
        if body.get("stream"):
            self._sse_start()
            if not legacy:
                self._sse(json.dumps(_chunk(rid, created, s.served_name, {"role": "assistant", "content": ""})))
            pos = [0]

            def emit(kind: str, tok: str) -> None:
                if legacy:
                    self._sse(
                        json.dumps(
                            {
                                "id": rid,
                                "object": "text_completion",
                                "created": created,
                                "model": s.served_name,
                                "choices": [{"index": 0, "text": tok, "logprobs": None, "finish_reason": None}],
                            }
                        )
                    )
                    return
                if kind == "reasoning" and not separate:
                    tok = ("<think>" if pos[0] == 0 else "") + tok
                if kind == "content" and not separate and pos[0] == len(comp.reasoning) and comp.reasoning:
                    tok = "</think>" + tok
                delta = {"reasoning_content": tok} if kind == "reasoning" and separate else {"content": tok}
                chunk = _chunk(rid, created, s.served_name, delta)
                if want_lp:
                    chunk["choices"][0]["logprobs"] = {"content": [engine.logprob_entry(tok, top, pos[0], comp.nan)]}
                pos[0] += 1
                self._sse(json.dumps(chunk))

            self._run(comp, emit)
            final = _chunk(rid, created, s.served_name, {}, comp.finish_reason)
            if legacy:
                final = {
                    "id": rid,
                    "object": "text_completion",
                    "created": created,
                    "model": s.served_name,
                    "choices": [{"index": 0, "text": "", "logprobs": None, "finish_reason": comp.finish_reason}],
                }
            self._sse(json.dumps(final))
            if (body.get("stream_options") or {}).get("include_usage"):
                self._sse(
                    json.dumps(
                        {
                            "id": rid,
                            "object": "chat.completion.chunk",
                            "created": created,
                            "model": s.served_name,
                            "choices": [],
                            "usage": _usage(comp),
                        }
                    )
                )
            self._sse_end()
            return
        self._run(comp, lambda kind, tok: None)
        reasoning = "".join(comp.reasoning).strip()
        content = "".join(comp.content).strip()
        if legacy:
            choice: dict[str, Any] = {
                "index": 0,
                "text": (reasoning + content) if not separate else content,
                "logprobs": None,
                "finish_reason": comp.finish_reason,
                "matched_stop": None,
            }
        else:
            if separate:
                message: dict[str, Any] = {
                    "role": "assistant",
                    "content": content or None,
                    "reasoning_content": reasoning or None,
                }  # tool_calls: dropped when None (sglang 0.5.23 entrypoints/openai/protocol.py:1299-1304)
            else:
                text = (f"<think>{reasoning}</think>" if reasoning else "") + content
                message = {"role": "assistant", "content": text or None, "reasoning_content": None}
            choice = {
                "index": 0,
                "message": message,
                "logprobs": None,
                "finish_reason": comp.finish_reason,
                "matched_stop": 151336 if comp.finish_reason == "stop" else None,
            }
            if want_lp:
                choice["logprobs"] = {
                    "content": [
                        engine.logprob_entry(t, top, i, comp.nan) for i, t in enumerate(comp.reasoning + comp.content)
                    ]
                }
        self._json(
            200,
            {
                "id": rid,
                "object": obj,
                "created": created,
                "model": s.served_name,
                "choices": [choice],
                "usage": _usage(comp),
            },
        )

    def _generate(self, body: dict[str, Any]) -> None:
        params = body.get("sampling_params") or {}
        prompt = body.get("text") or ""
        if isinstance(prompt, list):
            prompt = prompt[0] if prompt else ""
        if body.get("input_ids") and not prompt:
            prompt = " ".join("x" for _ in body["input_ids"])
        comp = engine.complete(
            str(prompt),
            params.get("max_new_tokens", 128),
            thinking=False,
            garbage="garbage" in config.faults() or self.state.fast_wrong,
            ignore_eos=bool(params.get("ignore_eos")),
        )
        if body.get("input_ids"):
            comp.prompt_tokens = len(body["input_ids"])
        decoded = self._decode(comp, float(params.get("temperature") or 0.0))
        if decoded is None:
            return
        comp = decoded
        rid = uuid.uuid4().hex
        text: list[str] = []

        def meta() -> dict[str, Any]:
            return {
                "id": rid,
                "finish_reason": {"type": comp.finish_reason} if len(text) == comp.completion_tokens else None,
                "prompt_tokens": comp.prompt_tokens,
                "completion_tokens": len(text),
                "cached_tokens": 0,
                "e2e_latency": 0.0,
            }

        if body.get("stream"):
            self._sse_start()

            def emit(kind: str, tok: str) -> None:
                text.append(tok)
                self._sse(
                    json.dumps({"text": "".join(text), "output_ids": list(range(len(text))), "meta_info": meta()})
                )

            self._run(comp, emit)
            self._sse_end()
            return
        self._run(comp, lambda kind, tok: text.append(tok))
        self._json(200, {"text": "".join(text), "output_ids": list(range(len(text))), "meta_info": meta()})


def admission_bound(args: argparse.Namespace) -> int:
    """--max-running-requests, or the stand-in's stand-in for the bound real SGLang derives from its KV pool
    when the flag is unset (sglang 0.5.23 model_executor/model_runner.py:986, the pool configurator's result)."""
    value = getattr(args, "max_running_requests", None)
    return int(value) if value else 64


def _text_of(content: Any) -> str:
    if isinstance(content, list):
        return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return str(content or "")


def _chunk(rid: str, created: int, model: str, delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {
        "id": rid,
        "object": "chat.completion.chunk",
        "created": created,
        "model": model,
        "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish, "matched_stop": None}],
    }


def _usage(comp: engine.Completion) -> dict[str, Any]:
    return {
        "prompt_tokens": comp.prompt_tokens,
        "completion_tokens": comp.completion_tokens,
        "total_tokens": comp.prompt_tokens + comp.completion_tokens,
        "prompt_tokens_details": None,
        "reasoning_tokens": len(comp.reasoning),
    }


def _histogram(name: str, help_text: str, values: list[float], labels: str) -> list[str]:
    buckets = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
    out = [f"# HELP {name} {help_text}", f"# TYPE {name} histogram"]
    for b in buckets:
        out.append(f'{name}_bucket{{{labels},le="{b}"}} {float(sum(1 for v in values if v <= b))}')
    out += [
        f'{name}_bucket{{{labels},le="+Inf"}} {float(len(values))}',
        f"{name}_count{{{labels}}} {float(len(values))}",
        f"{name}_sum{{{labels}}} {sum(values)}",
    ]
    return out


def metrics(s: State) -> str:
    labels = f'model_name="{s.served_name}",engine_type="unified",tp_rank="0",pp_rank="0"'
    used = min(s.max_total_tokens, s.running * 512)
    gauges = (
        ("sglang:num_running_reqs", "The number of running requests.", s.running),
        ("sglang:num_queue_reqs", "The number of requests in the waiting queue.", s.queued),
        ("sglang:token_usage", "The token usage.", round(used / max(1, s.max_total_tokens), 4)),
        ("sglang:gen_throughput", "The generation throughput (token/s).", float(s.running * 95)),
        ("sglang:max_total_num_tokens", "Maximum total number of tokens in the KV cache pool.", s.max_total_tokens),
        ("sglang:kv_used_tokens", "The number of used KV cache tokens.", used),
        ("sglang:cache_hit_rate", "The prefix cache hit rate.", 0.0),
        ("sglang:spec_accept_length", "The average acceptance length of speculative decoding.", 0.0),
    )
    out: list[str] = []
    for name, help_text, value in gauges:
        out += [f"# HELP {name} {help_text}", f"# TYPE {name} gauge", f"{name}{{{labels}}} {float(value)}"]
    for name, help_text, value in (
        ("sglang:prompt_tokens_total", "Number of prefill tokens processed.", s.prompt_tokens_total),
        ("sglang:generation_tokens_total", "Number of generation tokens processed.", s.generation_tokens_total),
        ("sglang:num_requests_total", "Number of requests processed.", s.requests_total),
    ):
        out += [f"# HELP {name} {help_text}", f"# TYPE {name} counter", f"{name}{{{labels}}} {float(value)}"]
    out += _histogram(
        "sglang:time_to_first_token_seconds", "Histogram of time to first token in seconds.", list(s.ttft), labels
    )
    out += _histogram(
        "sglang:inter_token_latency_seconds",
        "Histogram of inter-token latency in seconds.",
        [0.004] * s.generation_tokens_total if s.generation_tokens_total < 10000 else [0.004],
        labels,
    )
    out += _histogram(
        "sglang:e2e_request_latency_seconds", "Histogram of End-to-end request latency in seconds", list(s.e2e), labels
    )
    return "\n".join(out) + "\n"


#: SGLang logs a decode batch every --decode-log-interval (40) decode steps
DECODE_LOG_INTERVAL = 40


def decode_log(s: State) -> None:
    """The scheduler's periodic decode line while requests run (sglang 0.5.23
    ``managers/scheduler_components/metrics_reporter.py:963,1037-1041``, usage parts from
    ``pool_stats_observer.py:145-148``): ``cuda graph`` is whether the running batch fits the captured sizes
    (``decode_cuda_graph_runner.py`` ``can_run_graph``: bs <= max_bs), ``#queue-req`` the requests waiting for a slot.
    Every 40 decode steps as SGLang, but at most twice a second (the lab's decode steps are milliseconds)."""
    args = s.args
    graphs = not startup.graph_disabled(args)
    max_bs = getattr(args, "cuda_graph_max_bs_decode", None) or getattr(args, "cuda_graph_max_bs", None) or 256
    while True:
        time.sleep(max(0.5, DECODE_LOG_INTERVAL * config.itl()))
        with s.lock:
            running, queued = s.running, s.queued
        if not running:
            continue
        used = min(s.max_total_tokens, running * 512)
        startup.log(
            f"Decode batch, #running-req: {running}, #token: {used}, "
            f"token usage: {used / max(1, s.max_total_tokens):.2f}, cuda graph: {graphs and running <= max_bs}, "
            f"gen throughput (token/s): {running / max(config.itl(), 1e-3):.2f}, #queue-req: {queued}",
            "TP0",
        )


def crash_nan(load: GpuLoad) -> None:
    """NaN logits reaching torch.multinomial (a sampled request): the scheduler dies, the server with it
    (and the GPUs go idle)."""
    load.close()
    startup.log(
        texts.fill(
            "scheduler_exception",
            "Traceback (most recent call last):\n"
            '  File "/usr/local/lib/python3/site-packages/sglang/srt/managers/scheduler.py", line 3120, in '
            "run_scheduler_process\n    scheduler.event_loop_overlap()\n"
            '  File "/usr/local/lib/python3/site-packages/sglang/srt/layers/sampler.py", line 187, in forward\n'
            "    batch_next_token_ids = torch.multinomial(probs, num_samples=1)\n"
            "RuntimeError: probability tensor contains either `inf`, `nan` or element < 0",
        ),
        "TP0",
    )
    startup.log(texts.fill("sigquit"))
    sys.stderr.flush()
    os._exit(1)


def bind(args: argparse.Namespace) -> ThreadingHTTPServer:
    ThreadingHTTPServer.allow_reuse_address = True
    ThreadingHTTPServer.daemon_threads = True
    ThreadingHTTPServer.request_queue_size = 2048  # uvicorn's listen backlog; the default 5 drops a burst
    try:
        return ThreadingHTTPServer((args.host, args.port), Handler)
    except OSError as exc:
        sys.stderr.write(
            f"[{time.strftime('%Y-%m-%d %H:%M:%S')}] ERROR:    [Errno {exc.errno}] error while attempting "
            f"to bind on address ({args.host!r}, {args.port}): "
            f"{(exc.strerror or str(exc)).lower()}\n"
        )
        raise SystemExit(1) from None


def serve(args: argparse.Namespace, argv: list[str]) -> int:
    config.set_ulimit()
    gpus = startup.visible_gpus()
    mem_fraction = args.mem_fraction_static if args.mem_fraction_static is not None else 0.85
    load = GpuLoad(gpus, mem_fraction)

    def abort(signum: int, frame: Any) -> None:  # a signal during start-up ends it at once
        load.close()
        os._exit(128 + signum)

    signal.signal(signal.SIGTERM, abort)
    startup.log(f"server_args={_server_args_text(args)}")
    try:
        try:
            model = startup.load_model(args.model_path, args.trust_remote_code)
        except startup.StartupError:
            raise
        except Exception:  # noqa: BLE001 - any import or config error ends start-up with its traceback
            traceback.print_exc()
            return 1
        for line in startup.resolve(args, model, gpus):
            startup.log(line)
        startup.check(args, model, gpus)
        if "crash" in config.variant_faults(argv):  # a lab fault for gpuhost tune's tests: this variant dies
            raise startup.StartupError("RuntimeError", "CUDA error: an illegal memory access was encountered")
        load.start()
        config.pause(0.3)
        ranks = multinode.local_ranks(args)
        for r in ranks:
            startup.log("Init torch distributed begin.", f"TP{r}")
        try:
            group = multinode.meet(args, _stderr)  # a multi-node start: every rank at rank 0's rendezvous first
        except rendezvous.RendezvousError as exc:
            raise startup.StartupError(exc.exc_type, exc.message, where=f"TP{ranks[0]}") from None
        config.pause(0.2)
        startup.log("Init torch distributed ends. mem usage=0.56 GB", f"TP{ranks[0]}")
        load.hold_memory(0.05)
        per_gpu = startup.weights(args, model, gpus)
        load.hold_memory(min(mem_fraction, per_gpu / (gpus[0].memory_mib / 1024)))
        avail = gpus[0].memory_mib / 1024 - 0.5 - per_gpu
        tokens, kv_gb = startup.kv_cache(args, avail)
        load.hold_memory(mem_fraction)
        startup.capture(args, avail - kv_gb)
    except startup.StartupError as exc:
        startup.fail(exc)
        load.close()
        return 1
    if isinstance(group, rendezvous.Link):  # node rank >= 1: no tokenizer, no API, a dummy /health
        multinode.dummy_health_server(args.host, args.port)
        multinode.follow(group, startup.log, load.close)
        return 0
    startup.log(
        f"max_total_num_tokens={tokens}, chunked_prefill_size={args.chunked_prefill_size or 8192}, "
        f"max_prefill_tokens={args.max_prefill_tokens}, max_running_requests={admission_bound(args)}"
        f", context_len={model.context_len}, available_gpu_mem={avail - kv_gb - 0.87:.2f} GB",
        "TP0",
    )
    startup.wait_port_available(args.port, "port", args.host)  # a restart: the old server may still hold it
    httpd = bind(args)
    state = State(args, argv, model, load, tokens)
    Handler.state = state
    pid = os.getpid()
    startup.log(f"INFO:     Started server process [{pid}]")
    startup.log("INFO:     Waiting for application startup.")
    startup.log("INFO:     Application startup complete.")
    startup.log(f"INFO:     Uvicorn running on http://{args.host}:{args.port} (Press CTRL+C to quit)")
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
    thread.start()

    def stop(signum: int, frame: Any) -> None:
        state.status = "Exiting"
        startup.log(texts.fill("gracefully_exiting", state.running, []))
        while state.running and not os.environ.get("SGL_FORCE_SHUTDOWN"):
            time.sleep(0.05)
        if isinstance(group, rendezvous.Store):
            group.shutdown()  # the other nodes' ranks end with rank 0
        load.close()
        os._exit(0)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    if not args.skip_server_warmup:
        config.pause(0.6)
        startup.log(
            "Prefill batch, #new-seq: 1, #new-token: 6, #cached-token: 0, token usage: 0.00, "
            "#running-req: 0, #queue-req: 0, ",
            "TP0",
        )
        config.pause(0.3)
        startup.log(f'INFO:     127.0.0.1:{40000 + pid % 20000} - "POST /generate HTTP/1.1" 200 OK')
    state.status = "Up"
    threading.Thread(target=decode_log, args=(state,), daemon=True).start()
    startup.log(texts.fill("fired_up"))
    while True:
        time.sleep(3600)


def _stderr(line: str) -> None:
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


def _server_args_text(args: argparse.Namespace) -> str:
    if startup.VERSION >= (0, 5, 12):
        return repr(dict(vars(args)))
    return "ServerArgs(" + ", ".join(f"{k}={v!r}" for k, v in vars(args).items()) + ")"
