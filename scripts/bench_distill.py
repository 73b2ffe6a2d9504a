"""Benchmark the student's CPU training step: TRL's own loss against the trainer's (`ark.distill.train.labelled_loss`),
side by side in one run, on the demo student's own data and settings.

    python scripts/bench_distill.py                   # 2 optimizer steps' examples (8), 3 rounds
    python scripts/bench_distill.py --examples 4 --rounds 2 --no-memory
    python scripts/bench_distill.py --precision --examples 4 --rounds 2   # float32 against bfloat16 autocast

The free teacher's trajectories on the demo's train split are collected into a temporary folder
(`experiment=collect_student`, seconds), made into the SFT examples of `make distill-demo`, and the
trainer is the one `make distill-demo` trains with (`ark.distill.train.make_trainer`, the settings of
``experiment=distill_student``: LoRA r 16 on every linear layer, bfloat16 autocast). Each round times a
forward and backward pass over the first ``--examples`` examples, one at a time as training takes them,
with TRL's loss (``SFTTrainer.compute_loss``: on a CPU its fused head scores every position) and with the
trainer's (the labelled positions only), alternating, under the bfloat16 autocast training runs in. Printed: seconds
per round for each, their ratio, the largest difference of the two losses; before them, unless --no-memory,
the peak resident memory of a process that does one round with one loss only (a child process per loss).
With --precision, the trainer's loss in float32 against the same under bfloat16 autocast instead (a CPU
without AVX512-BF16 or AMX emulates bfloat16: `ark.distill.train.native_bf16`).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

LOSSES = ("trl", "labelled")


def setup(n_examples: int, work: Path):
    """The trainer of ``make distill-demo`` and the first n SFT examples of the demo's train collection."""
    from omegaconf import OmegaConf

    from ark.config.compose import compose
    from ark.config.jobs import collect
    from ark.distill.pipeline import first_queries
    from ark.distill.sft_data import build_examples, load_trajectories, trainable_chat
    from ark.distill.student import StudentConfig, load_model, load_tokenizer
    from ark.distill.train import DistillConfig, make_trainer

    d = OmegaConf.to_container(compose(["experiment=distill_student", "graph=demo"]).distill, resolve=True)
    cfg = DistillConfig(**{**d["train"], "output_dir": work / "student", "max_steps": 1, "epochs": 1})
    student = StudentConfig(**d["student"])
    collect(compose(["experiment=collect_student", "graph=demo", "progress=false", f"out_dir={work / 'train'}"]))
    tok = load_tokenizer(student)
    chats = [c for c in map(trainable_chat, first_queries(load_trajectories(work / "train"), n_examples)) if c]
    examples = build_examples(chats, tok, student.render_kwargs(), cfg.max_length)[:n_examples]
    return make_trainer(load_model(student), tok, examples, None, cfg), examples


def passes(trainer, loss: str, bf16: bool | None = None) -> tuple[float, list[float]]:
    """Seconds for a forward and backward pass over every training example with one loss (under bfloat16
    autocast if `bf16`, default the trainer's setting); the losses."""
    import torch
    from trl import SFTTrainer

    compute = SFTTrainer.compute_loss if loss == "trl" else type(trainer).compute_loss
    model = trainer.model.train()
    values = []
    t0 = time.perf_counter()
    for i in range(len(trainer.train_dataset)):
        batch = trainer._prepare_inputs(trainer.data_collator([trainer.train_dataset[i]]))
        with torch.autocast(trainer.args.device.type, dtype=torch.bfloat16,
                            enabled=trainer.args.bf16 if bf16 is None else bf16):
            value = compute(trainer, model, batch)   # training gets the same autocast from accelerate
        value.backward()
        values.append(float(value.detach()))
    model.zero_grad()
    return time.perf_counter() - t0, values


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--examples", type=int, default=8, help="SFT examples per round (4 make one optimizer step)")
    p.add_argument("--rounds", type=int, default=3, help="timing rounds (0: the memory figures only)")
    p.add_argument("--no-memory", action="store_true", help="skip the peak-memory children")
    p.add_argument("--precision", action="store_true",
                   help="time float32 against bfloat16 autocast (the trainer's loss) instead of the two losses")
    p.add_argument("--only", choices=LOSSES, help=argparse.SUPPRESS)   # a memory child: one loss, one round
    a = p.parse_args(argv)
    import torch

    if a.precision:
        return compare_precision(a.examples, a.rounds)

    if a.only:   # a memory child
        from bench_graph import peak_rss_gib

        torch.manual_seed(0)
        with tempfile.TemporaryDirectory() as tmp:
            trainer, _ = setup(a.examples, Path(tmp))
            passes(trainer, a.only)
        print(json.dumps({"peak_rss_gb": peak_rss_gib()}))
        return 0
    if not a.no_memory:   # first, while this process holds no model: two at once do not fit in 24 GB
        for loss in LOSSES:
            out = subprocess.run([sys.executable, __file__, "--examples", str(a.examples), "--only", loss],
                                 check=True, capture_output=True, text=True).stdout.strip().splitlines()[-1]
            print(f"peak resident memory of a process doing one round with the {loss} loss: "
                  f"{json.loads(out)['peak_rss_gb']:.2f} GB", flush=True)
    if a.rounds <= 0:
        return 0
    torch.manual_seed(0)   # LoRA dropout: the same masks for both losses in a round
    with tempfile.TemporaryDirectory() as tmp:
        trainer, examples = setup(a.examples, Path(tmp))
        tokens = [len(e["input_ids"]) for e in examples]
        labelled = sum(sum(1 for x in e["labels"] if x != -100) for e in examples)
        print(f"{len(examples)} examples, {sum(tokens)} tokens (mean {sum(tokens) / len(tokens):.0f}), "
              f"{labelled / sum(tokens):.0%} of them labelled; {torch.get_num_threads()} threads")
        print("round  trl s  labelled s  trl/labelled  max |loss difference|")
        ratios = []
        for r in range(a.rounds):
            order = LOSSES if r % 2 == 0 else LOSSES[::-1]
            took = {}
            for loss in order:
                torch.manual_seed(r)
                took[loss] = passes(trainer, loss)
            diff = max(abs(x - y) for x, y in zip(took["trl"][1], took["labelled"][1]))
            ratios.append(took["trl"][0] / took["labelled"][0])
            print(f"{r:5d}  {took['trl'][0]:5.1f}  {took['labelled'][0]:10.1f}  {ratios[-1]:12.2f}  {diff:.2e}",
                  flush=True)
        print(f"median trl/labelled: {sorted(ratios)[len(ratios) // 2]:.2f}")
    return 0


def compare_precision(n_examples: int, rounds: int) -> int:
    """Seconds per round in float32 and under bfloat16 autocast, alternating, side by side; their ratio."""
    import torch

    from ark.distill.train import native_bf16

    torch.manual_seed(0)
    with tempfile.TemporaryDirectory() as tmp:
        trainer, examples = setup(n_examples, Path(tmp))
        tokens = sum(len(e["input_ids"]) for e in examples)
        print(f"{len(examples)} examples, {tokens} tokens; {torch.get_num_threads()} threads; "
              f"bfloat16 native on this CPU: {native_bf16()}")
        print("round  float32 s  bfloat16 s  bfloat16/float32")
        ratios = []
        for r in range(rounds):
            took = {}
            for bf16 in ((False, True) if r % 2 == 0 else (True, False)):
                torch.manual_seed(r)
                took[bf16] = passes(trainer, "labelled", bf16)[0]
            ratios.append(took[True] / took[False])
            print(f"{r:5d}  {took[False]:9.1f}  {took[True]:10.1f}  {ratios[-1]:16.2f}", flush=True)
        print(f"median bfloat16/float32: {sorted(ratios)[len(ratios) // 2]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
