"""Tensor parallelism across nodes as SGLang 0.5.23 runs it (``--nnodes N --node-rank R --dist-init-addr HOST:PORT``).

Each node runs ``tp_size * pp_size / nnodes`` consecutive ranks (``_calculate_rank_ranges``); the ranks meet at rank
0's rendezvous (:mod:`.rendezvous`) before anything is loaded; only node 0 runs the tokenizer and the HTTP API. A node
of rank >= 1 starts ``launch_dummy_health_check_server`` once its schedulers are ready: ``/health``,
``/health_generate`` and ``/ping`` answer 200 whatever the group's state, any other path is FastAPI's 404 (405 for
another method on those three), and it serves no request. uvicorn runs it at log level ``warning``: it logs nothing.
When its schedulers end, the node logs ``Scheduler or DataParallelController PID terminated with CODE``
(``entrypoints/engine.py``).
"""

from __future__ import annotations

import argparse
import json
import os
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from . import rendezvous

#: torch's default process-group timeout, used when --dist-timeout is not given
DEFAULT_TIMEOUT_S = 1800.0


def nnodes(args: argparse.Namespace) -> int:
    return int(getattr(args, "nnodes", 1) or 1)


def node_rank(args: argparse.Namespace) -> int:
    return int(getattr(args, "node_rank", 0) or 0)


def local_ranks(args: argparse.Namespace) -> list[int]:
    """The TP ranks this node runs."""
    world = int(args.tp_size) * int(getattr(args, "pp_size", 1) or 1)
    per = max(1, world // nnodes(args))
    first = node_rank(args) * per
    return list(range(first, first + per))


def dist_addr(args: argparse.Namespace) -> tuple[str, int]:
    """``--dist-init-addr HOST:PORT`` (``[V6]:PORT``)."""
    host, _, port = str(args.dist_init_addr).rpartition(":")
    return host.strip("[]"), int(port)


def meet(args: argparse.Namespace, log: Callable[[str], None]) -> rendezvous.Store | rendezvous.Link | None:
    """The rendezvous of a multi-node start (None on one node): rank 0 hosts it and waits for every rank, a follower
    joins it. Raises :class:`rendezvous.RendezvousError` as torch would."""
    if nnodes(args) <= 1:
        return None
    # without --dist-init-addr SGLang uses --host and a free port: nodes on other hosts cannot find it
    host, port = dist_addr(args) if args.dist_init_addr else (args.host or "127.0.0.1", 0)
    timeout = float(args.dist_timeout) if getattr(args, "dist_timeout", None) else DEFAULT_TIMEOUT_S
    world = int(args.tp_size) * int(getattr(args, "pp_size", 1) or 1)
    ranks = len(local_ranks(args))
    if node_rank(args) == 0:
        store = rendezvous.Store(host, port, world, ranks, timeout)
        try:
            store.wait()
        except rendezvous.RendezvousError:
            store.shutdown()
            raise
        return store
    return rendezvous.join(host, port, ranks, timeout, log)


class DummyHealth(BaseHTTPRequestHandler):
    """``launch_dummy_health_check_server``: FastAPI with three GET routes that return an empty 200."""

    protocol_version = "HTTP/1.1"
    server_version = "uvicorn"
    sys_version = ""
    ROUTES = ("/ping", "/health", "/health_generate")

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _reply(self, code: int, body: dict[str, str] | None) -> None:
        data = json.dumps(body, separators=(",", ":")).encode() if body is not None else b""  # Starlette's
        self.send_response(code)
        if body is not None:
            self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _drain(self) -> None:
        n = int(self.headers.get("content-length") or 0)
        if n:
            self.rfile.read(n)

    def do_GET(self) -> None:
        if self.path.split("?")[0] in self.ROUTES:
            self._reply(200, None)
        else:
            self._reply(404, {"detail": "Not Found"})

    def do_POST(self) -> None:
        self._drain()
        if self.path.split("?")[0] in self.ROUTES:
            self._reply(405, {"detail": "Method Not Allowed"})
        else:
            self._reply(404, {"detail": "Not Found"})


def dummy_health_server(host: str, port: int) -> ThreadingHTTPServer:
    ThreadingHTTPServer.allow_reuse_address = True
    ThreadingHTTPServer.daemon_threads = True
    httpd = ThreadingHTTPServer((host, port), DummyHealth)
    threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True).start()
    return httpd


def follow(link: rendezvous.Link, log: Callable[[str], None], close: Callable[[], None]) -> None:
    """A follower after start-up: it does not stop on SIGTERM (its schedulers wait for rank 0's shutdown request);
    it ends when rank 0 shuts down (or its connection is lost)."""
    import signal

    signal.signal(signal.SIGTERM, lambda signum, frame: None)

    def ended(clean: bool) -> None:
        log(f"Scheduler or DataParallelController {os.getpid()} terminated with {0 if clean else 1}")
        close()
        os._exit(0)

    link.watch(ended).join()
