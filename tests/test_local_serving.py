"""`ark.llm.local_server.serving`: when a `local` backbone's port already answers, the server there is used
only if it serves the backbone's model; a port held by another model's server, or by a process that does
not answer as one, stops the run with one line naming the port, before any server starts."""

from __future__ import annotations

import socket

import pytest

from ark.llm import local_server
from ark.llm.client import BackboneConfig
from ark.llm.local_server import LocalServerError, serving
from tests.helpers.scripted_server import ScriptedServer, text_reply


@pytest.fixture
def no_start(monkeypatch):
    """A LocalServer that records that it was asked to start instead of starting llama.cpp."""
    started = []
    monkeypatch.setattr(local_server.LocalServer, "start", lambda self: started.append(self) or self)
    monkeypatch.setattr(local_server.LocalServer, "stop", lambda self, grace_s=10.0: None)
    return started


def test_a_server_of_the_backbones_model_is_used_as_it_is(no_start):
    with ScriptedServer([text_reply("ok")]) as s:   # answers GET /models with the model "scripted"
        with serving(BackboneConfig(provider="local", base_url=s.base_url, model="scripted")) as server:
            assert server is None
    assert no_start == []


def test_a_server_of_another_model_is_refused_in_one_line(no_start):
    with ScriptedServer([text_reply("ok")]) as s:
        backbone = BackboneConfig(provider="local", base_url=s.base_url, model="SmolLM2-135M-Instruct.Q4_1+mine")
        with pytest.raises(LocalServerError) as e:
            with serving(backbone):
                pass
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith(f"{s.base_url} is held by a server of scripted, not of "
                                              "SmolLM2-135M-Instruct.Q4_1+mine: stop it, or give this backbone")
    assert "ARK_LOCAL_URL=http://127.0.0.1:" in msg and no_start == []


def test_a_port_held_by_something_that_does_not_answer_is_named_before_anything_starts(no_start):
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()                                  # accepts connections, never answers HTTP
        port = held.getsockname()[1]
        backbone = BackboneConfig(provider="local", base_url=f"http://127.0.0.1:{port}/v1", model="m")
        with pytest.raises(LocalServerError, match=rf"^port {port} of http://127\.0\.0\.1:{port}/v1 is in use "
                                                   "by a process that does not answer as a model server"):
            with serving(backbone):
                pass
    assert no_start == []


def test_a_free_port_gets_a_server_of_its_own(no_start):
    port = local_server.free_port()
    with serving(BackboneConfig(provider="local", base_url=f"http://127.0.0.1:{port}/v1", model="m")) as server:
        assert server is no_start[0] and server.config.port == port and server.config.model_alias == "m"


def test_a_port_whose_server_has_just_stopped_gets_a_server_again(no_start):
    """A server that stopped a moment ago leaves the connections it closed in TIME_WAIT on its port (the
    readiness probe's, the run's). A new server binds there all the same (uvicorn sets SO_REUSEADDR), so
    the port is free: two runs of a local backbone one after the other, as a sweep's, must both start."""
    with socket.socket() as old:
        old.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        old.bind(("127.0.0.1", 0))
        old.listen()
        port = old.getsockname()[1]
        with socket.create_connection(("127.0.0.1", port)) as client:
            conn, _ = old.accept()
            conn.close()                         # the server closes first: its side waits in TIME_WAIT
            client.recv(1)
    with serving(BackboneConfig(provider="local", base_url=f"http://127.0.0.1:{port}/v1", model="m")) as server:
        assert server is no_start[0] and server.config.port == port
