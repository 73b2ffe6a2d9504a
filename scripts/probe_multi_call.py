"""Does a distilled student know when its teacher makes a second call in one step? For every step of the teacher's
trajectories on a demo split whose first call searches or explores (`ark.distill.decisions`), the student's
probability of going on with a second call after that first call rather than ending the turn, read from
llama.cpp's logits with the adapter as the student is served (Q4_1 base, its GGUF LoRA), split by what the
teacher did there.

    python scripts/probe_multi_call.py                                  # the shipped student, 60 val trajectories
    python scripts/probe_multi_call.py --limit 240 --student s48=results/distill/demo-smollm2-48/adapter.gguf
    python scripts/probe_multi_call.py --student base=                  # SmolLM2 without an adapter

Per student, per step (its number and first tool) and per teacher choice (goes on / stops): the decisions,
the mean share of the two tokens' probability on going on, how often going on is the more likely of the two,
and how often it is the student's greedy token over the whole vocabulary (what temperature 0 decodes). A
student that learned the rule goes on where the teacher does and stops where it stops; one that learned the
teacher's most frequent step stops everywhere. About 3 s per decision on 2 cores (60 val trajectories: 110
decisions).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from compare_students import parse_student as parse_adapter  # noqa: E402  (scripts/ is on the path above)


def parse_student(spec: str) -> tuple[str, Path | None]:
    """``NAME=ADAPTER.gguf`` (compare_students.py's --student), or ``NAME=`` for SmolLM2 without an adapter."""
    name, sep, path = spec.partition("=")
    return (name, None) if name and sep and not path else parse_adapter(spec)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--student", action="append", default=None, metavar="NAME=ADAPTER",
                    help="a student to probe (repeatable; NAME= for no adapter; default: the shipped student, "
                         "the adapter backbone=smollm2-distilled serves)")
    ap.add_argument("--split", choices=("train", "val"), default="val",
                    help="the teacher collection whose decisions are probed (val: none of it was trained on)")
    ap.add_argument("--limit", type=int, default=60, help="the first n collected trajectories (default 60)")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args(argv)
    if args.limit < 1 or args.threads < 1:
        raise SystemExit(f"--limit and --threads take a whole number from 1, got {args.limit} and {args.threads}")
    if args.student:
        students = [parse_student(s) for s in args.student]
    else:
        from compare_students import shipped_student

        students = [shipped_student()]

    from omegaconf import OmegaConf

    from ark.config.compose import compose
    from ark.distill.decisions import decisions
    from ark.distill.pipeline import first_queries
    from ark.distill.sft_data import load_trajectories, trainable_chat
    from ark.distill.student import StudentConfig, load_tokenizer, smollm2_gguf_path

    d = OmegaConf.to_container(compose(["experiment=distill_student", "graph=demo"]).distill, resolve=True)
    dirs = [ROOT / p for p in d["val_dirs" if args.split == "val" else "train_dirs"]]
    missing = [str(p) for p in dirs if not p.is_dir()]
    if missing:
        raise SystemExit(f"no teacher collection at {missing[0]}: run `python experiments/collect.py "
                         f"experiment=collect_student graph=demo split={args.split}` first")
    student = StudentConfig(**d["student"])
    tok = load_tokenizer(student)
    chats = [c for c in map(trainable_chat, first_queries(load_trajectories(*dirs), args.limit)) if c]
    points = [p for c in chats for p in decisions(c, tok, student.render_kwargs())]
    print(f"{len(points)} decisions in {len(chats)} teacher trajectories ({args.split}); the teacher goes on in "
          f"{sum(p.teacher_goes_on for p in points)}")
    print(f"{'student':<20} {'step':>4} {'first call':<18} {'teacher':<8} {'n':>4} {'P(go on)':>9} {'go > stop':>10} "
          f"{'greedy goes on':>15}")
    for name, adapter in students:
        for row in probe(points, adapter, smollm2_gguf_path(), args.threads):
            print(f"{name:<20} {row['step']:>4} {row['first_call']:<18} {row['teacher']:<8} {row['n']:>4} "
                  f"{row['p_go_on']:>9.3f} {row['prefers']:>10} {row['greedy']:>15}", flush=True)
    return 0


def probe(points, adapter: Path | None, base: Path, threads: int) -> list[dict]:
    """Per step (1: the first), its first tool and the teacher's choice: n, the mean of P(go on) / (P(go on) +
    P(stop)), how often that share is over a half, and how often going on is the argmax of the whole vocabulary."""
    import llama_cpp
    import numpy as np
    from llama_cpp import Llama

    llm = Llama(model_path=str(base), lora_path=str(adapter) if adapter else None, n_ctx=4096, n_threads=threads,
                n_threads_batch=threads, verbose=False)
    seen: dict[tuple[int, str, bool], list[tuple[float, bool]]] = {}
    for p in points:
        llm.reset()
        llm.eval(p.prefix)
        # the last evaluated token's logits (the library keeps rows in llm.scores only with logits_all)
        logits = np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(llm.ctx, -1), shape=(llm.n_vocab(),))
        logits = logits.astype(np.float64)
        go, stop = logits[p.go_on], logits[p.stop]
        share = 1.0 / (1.0 + np.exp(stop - go))
        greedy = int(np.argmax(logits)) == p.go_on
        seen.setdefault((p.turn + 1, p.first_call, p.teacher_goes_on), []).append((float(share), greedy))
    rows = []
    for (step, tool, goes_on), got in sorted(seen.items(), key=lambda kv: (kv[0][0], kv[0][1], not kv[0][2])):
        rows.append({"step": step, "first_call": tool, "teacher": "goes on" if goes_on else "stops", "n": len(got),
                     "p_go_on": sum(s for s, _ in got) / len(got),
                     "prefers": sum(s > 0.5 for s, _ in got), "greedy": sum(g for _, g in got)})
    return rows


if __name__ == "__main__":
    raise SystemExit(main())
