"""Benchmark llama.cpp's RAM prompt cache as the local server runs it: the library's budget against the one that
counts whole entries (`ark.llm.llama_server.counted`), side by side.

    python scripts/bench_prompt_cache.py                  # 20 conversations, a 512 MiB budget (about 5 minutes)
    python scripts/bench_prompt_cache.py --queries 40 --cache-mib 1024

The conversations are the compact teacher's (``backbone=rules-compact``, ``budget=t4_n1_compact``) on the first
``--queries`` demo ``test`` queries, run first into a temporary folder (seconds: no model). Two child processes,
one per cache, each load the demo's student as ``backbone=smollm2-distilled`` serves it (SmolLM2-135M Q4_1 and
the shipped adapter, n_ctx 8192, one thread, logits of the last token only) and replay every conversation: at
each assistant turn, the prompt the server renders for it (``ark-hermes-compact``) is completed (32 tokens,
temperature 0) with the cache set on the model as the server sets it. They run at once, one core each. Printed
per cache: seconds, prompt tokens llama.cpp evaluated of those sent (what the cache saved), entries held at the
end and what they hold, peak and final resident memory; then the ratios.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "scripts"))

CACHES = ("library", "counted")


def child(cache_kind: str, conversations: Path, cache_mib: int) -> dict:
    """Replay the conversations through one model with one kind of cache; what it cost."""
    import llama_cpp

    from ark.config.compose import compose
    from ark.llm import hermes
    from ark.llm.llama_server import counted, entry_bytes
    from ark.llm.local_server import LocalServerConfig, default_gguf
    from bench_graph import peak_rss_gib, rss_gib

    local = compose(["graph=demo", "backbone=smollm2-distilled"]).backbone.local
    served = LocalServerConfig()   # the server's context and threads (LocalServer.command)
    model = llama_cpp.Llama(model_path=str(local.model_path or default_gguf()), lora_path=local.lora_path,
                            n_ctx=served.n_ctx, n_threads=served.n_threads, n_threads_batch=served.n_threads,
                            logits_all=False, verbose=False)
    kind = llama_cpp.LlamaRAMCache if cache_kind == "library" else counted(llama_cpp.LlamaRAMCache)
    cache = kind(capacity_bytes=cache_mib << 20)
    model.set_cache(cache)
    evaluated = [0]
    original_eval = model.eval

    def counting_eval(tokens):
        evaluated[0] += len(tokens)
        return original_eval(tokens)

    model.eval = counting_eval
    sent = 0
    start = time.perf_counter()
    for conv in json.loads(conversations.read_text()):
        msgs = conv["messages"]
        for i, m in enumerate(msgs):
            if m.get("role") != "assistant":
                continue
            prompt = hermes.render(msgs[:i], conv["tools"], template=hermes.CHATML_TOOLS_COMPACT_TEMPLATE)
            tokens = model.tokenize(prompt.encode("utf-8"), add_bos=False, special=True)
            sent += len(tokens)
            model.create_completion(prompt=tokens, max_tokens=32, temperature=0.0, stop=[hermes.END_OF_TURN])
    seconds = time.perf_counter() - start
    held = list(cache.cache_state.values())
    return {"seconds": seconds, "sent": sent, "evaluated": evaluated[0], "entries": len(held),
            "held_mb": sum(entry_bytes(s) for s in held) / 2**20,
            "counted_mb": cache.cache_size / 2**20, "peak_gb": peak_rss_gib(), "end_gb": rss_gib()}


def conversations(queries: int, folder: Path) -> Path:
    """The compact teacher's conversations on the first ``queries`` demo test queries, as a JSON file."""
    from ark.run.rundir import RunDir

    run = folder / "teacher"
    subprocess.run([sys.executable, str(REPO / "experiments" / "run.py"), "graph=demo", "split=test",
                    f"limit={queries}", "backbone=rules-compact", "budget=t4_n1_compact", f"out_dir={run}",
                    "n_boot=0", "progress=false"], check=True, cwd=REPO, stdout=subprocess.DEVNULL)
    trajs = RunDir(run).agent_trajectories()
    out = folder / "conversations.json"
    out.write_text(json.dumps([{"messages": t["messages"], "tools": t["tools"]} for t in trajs.values()]))
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--queries", type=int, default=20, help="conversations: the first n demo test queries")
    p.add_argument("--cache-mib", type=int, default=None,
                   help="the cache budget (default: LocalServerConfig.prompt_cache_mib, 512)")
    p.add_argument("--child", choices=CACHES, help=argparse.SUPPRESS)
    p.add_argument("--conversations", type=Path, help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.cache_mib is None:
        from ark.llm.local_server import LocalServerConfig

        a.cache_mib = LocalServerConfig().prompt_cache_mib
    if a.queries < 1 or a.cache_mib < 1:
        raise SystemExit(f"--queries and --cache-mib must be at least 1, got {a.queries} and {a.cache_mib}")
    if a.child:
        print(json.dumps(child(a.child, a.conversations, a.cache_mib)))
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        convs = conversations(a.queries, Path(tmp))
        env = dict(os.environ, OMP_WAIT_POLICY="PASSIVE")
        procs = {k: subprocess.Popen([sys.executable, __file__, "--child", k, "--conversations", str(convs),
                                      "--cache-mib", str(a.cache_mib)], env=env, stdout=subprocess.PIPE, text=True)
                 for k in CACHES}
        results = {}
        for k, proc in procs.items():
            out, _ = proc.communicate()
            if proc.returncode != 0:
                raise SystemExit(f"the {k} child failed (exit {proc.returncode})")
            results[k] = json.loads(out.strip().splitlines()[-1])
    print(f"{a.queries} conversations of the compact teacher (demo test), a {a.cache_mib} MiB cache budget, "
          f"both caches at once, one core each")
    print("cache     seconds  prompt tokens evaluated / sent  entries  held MB  counted MB  peak GB  end GB")
    for k, r in results.items():
        print(f"{k:8s}  {r['seconds']:7.0f}  {r['evaluated']:14,d} / {r['sent']:<14,d}  {r['entries']:7d}  "
              f"{r['held_mb']:7.0f}  {r['counted_mb']:10.0f}  {r['peak_gb']:7.2f}  {r['end_gb']:6.2f}")
    lib, cnt = results["library"], results["counted"]
    print(f"library/counted: peak memory {lib['peak_gb'] / cnt['peak_gb']:.2f}, time {lib['seconds'] / cnt['seconds']:.2f}, "
          f"tokens evaluated {lib['evaluated'] / max(cnt['evaluated'], 1):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
