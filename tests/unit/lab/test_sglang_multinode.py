"""The SGLang stand-in across nodes, without a lab: rank 0's rendezvous waits for every rank within the timeout, a
follower started first keeps retrying until rank 0 listens, the torch error texts on a timeout, a port check is not
a rank, rank 0's shutdown ends the followers, and a follower's dummy /health answers 200 while it serves nothing."""

from __future__ import annotations

import argparse
import http.client
import socket
import threading
import time

import pytest

from gpuhost.lab.sglang.standin._lab import multinode, rendezvous

HOST = "127.0.0.1"


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def args(**kw: object) -> argparse.Namespace:
    base: dict[str, object] = {"tp_size": 2, "pp_size": 1, "nnodes": 2, "node_rank": 0, "dist_timeout": 60}
    return argparse.Namespace(**{**base, **kw})


def test_each_node_runs_its_consecutive_share_of_the_ranks() -> None:
    assert multinode.local_ranks(args()) == [0]
    assert multinode.local_ranks(args(node_rank=1)) == [1]
    assert multinode.local_ranks(args(tp_size=16, node_rank=1)) == list(range(8, 16))
    assert multinode.local_ranks(args(tp_size=8, nnodes=1)) == list(range(8))
    assert multinode.dist_addr(args(dist_init_addr="[fd00::1]:20000")) == ("fd00::1", 20000)


def test_a_follower_started_first_retries_until_rank_0_hosts_the_rendezvous() -> None:
    port = free_port()
    joined: dict[str, object] = {}

    def follower() -> None:
        joined["link"] = rendezvous.join(HOST, port, 1, 20, lambda line: None)
        joined["at"] = time.monotonic()

    t = threading.Thread(target=follower)
    t.start()
    time.sleep(1.0)  # the follower is refused meanwhile: nothing listens yet
    assert "link" not in joined
    opened = time.monotonic()
    store = rendezvous.Store(HOST, port, world=2, own=1, timeout=20)
    store.wait()
    t.join(5)
    assert isinstance(joined["link"], rendezvous.Link) and float(str(joined["at"])) >= opened
    ended: list[bool] = []
    watcher = joined["link"].watch(ended.append)  # type: ignore[union-attr]
    store.shutdown()
    watcher.join(5)
    assert ended == [True]  # rank 0's shutdown ends the follower


def test_rank_0_alone_times_out_with_torchs_text_and_a_port_check_is_not_a_rank() -> None:
    port = free_port()
    store = rendezvous.Store(HOST, port, world=2, own=1, timeout=1)
    socket.create_connection((HOST, port), timeout=2).close()  # gpuhost checking that rank 0 listens
    with pytest.raises(rendezvous.RendezvousError) as err:
        store.wait()
    store.shutdown()
    assert err.value.exc_type == "torch.distributed.DistStoreError"
    assert err.value.message == "Timed out after 2 seconds waiting for clients. 1/2 clients joined."


def test_a_follower_alone_times_out_with_torchs_text() -> None:
    port = free_port()
    logged: list[str] = []
    start = time.monotonic()
    with pytest.raises(rendezvous.RendezvousError) as err:
        rendezvous.join(HOST, port, 1, 1.5, logged.append)
    assert 1.2 < time.monotonic() - start < 5
    text = f"The client socket has timed out after 1500ms while trying to connect to ({HOST}, {port})."
    assert err.value.exc_type == "torch.distributed.DistNetworkError" and err.value.message == text
    assert len(logged) == 1 and logged[0].startswith("[E") and logged[0].endswith(f"socket.cpp:1023] [c10d] {text}")


def test_a_follower_whose_rank_0_goes_away_before_the_group_forms_fails() -> None:
    port = free_port()
    store = rendezvous.Store(HOST, port, world=3, own=1, timeout=20)  # waits for a third rank that never comes
    threading.Timer(0.5, store.shutdown).start()
    with pytest.raises(rendezvous.RendezvousError, match="Failed to recv, got 0 bytes"):
        rendezvous.join(HOST, port, 1, 20, lambda line: None)


def test_a_followers_dummy_health_answers_200_and_serves_no_request() -> None:
    port = free_port()
    httpd = multinode.dummy_health_server(HOST, port)
    try:

        def ask(method: str, path: str) -> tuple[int, bytes]:
            conn = http.client.HTTPConnection(HOST, port, timeout=5)
            conn.request(method, path, body=b"{}" if method == "POST" else None)
            resp = conn.getresponse()
            out = resp.status, resp.read()
            conn.close()
            return out

        assert ask("GET", "/health") == (200, b"") and ask("GET", "/health_generate")[0] == 200
        assert ask("GET", "/ping")[0] == 200
        assert ask("POST", "/v1/chat/completions") == (404, b'{"detail":"Not Found"}')
        assert ask("POST", "/generate")[0] == 404 and ask("GET", "/v1/models")[0] == 404
        assert ask("POST", "/health")[0] == 405
    finally:
        httpd.shutdown()
        httpd.server_close()
