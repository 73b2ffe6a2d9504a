"""LoRA SFT of a student on teacher trajectories (TRL `SFTTrainer` + PEFT), early stopping, model card.

Paper settings (§ Distillation setup) are the `DistillConfig` defaults: one epoch, 16,384-token context,
AdamW at learning rate 1e-5, LoRA r 32 / alpha 64 / dropout 0.1 on all linear layers; the checkpoint
is chosen by early stopping on the validation split's loss (`load_best_model_at_end` on `eval_loss`).
The data are pre-tokenized `{"input_ids", "labels"}` examples from `ark.distill.sft_data`, whose labels
already mask every non-assistant token, so the trainer only pads and truncates. On a CPU the loss is
taken from the logits of the labelled positions only (`labelled_loss`): TRL scores every position there.

    from ark.distill.train import DistillConfig, train_lora
    result = train_lora(model, tokenizer, train_examples, val_examples,
                        DistillConfig(output_dir=Path("results/distill/prime-qwen3-8b")),
                        card={"teacher": "gpt-4.1", "student": "Qwen/Qwen3-8B", "queries": 6000})
    result.adapter_dir, result.best_eval_loss, result.tokens_per_s
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ark.distill.sft_data import dataset_stats, examples_sha256, to_dataset

ADAPTER_SUBDIR = "adapter"
INPUTS_FILE = "inputs.json"  # in checkpoints/: what the checkpoints were trained on (`training_inputs`)
# Settings that say where and for how long a run trains, not what its weights become: a run resumes
# from checkpoints whose other settings and data are its own.
_NOT_INPUTS = ("output_dir", "stop_after_steps", "run_name", "report_to", "logging_steps", "save_total_limit")
CARD_FILE = "README.md"
INFO_FILE = "distill_info.json"
LLAMA_LINEAR_MODULES = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


@dataclass
class DistillConfig:
    """Training settings; defaults are the paper's."""

    output_dir: Path = Path("results/distill/student")  # checkpoints/ and adapter/ go here
    epochs: float = 1.0  # passes over the training trajectories (paper: 1)
    max_steps: int = -1  # > 0 overrides epochs (tests, smoke runs)
    stop_after_steps: int | None = None  # stop after n optimizer steps, the learning rate still on the schedule
                                         # of the whole run (epochs or max_steps): a CPU run cut to its time
    max_length: int = 16384  # context length; longer examples are cut at the end (paper: 16,384)
    multi_call_repeats: int = 1  # a trajectory with a step of several calls (`sft_data.several_calls`) is
                                 # trained on this many times per epoch (1: once, as the paper does)
    learning_rate: float = 1e-5  # AdamW (paper: 1e-5)
    optim: str = "adamw_torch"  # transformers optimizer name
    lr_scheduler_type: str = "linear"
    warmup: float = 0.0  # warmup steps (int) or share of all steps (float in [0, 1))
    weight_decay: float = 0.0
    per_device_batch_size: int = 1  # trajectories are long: one per device step
    gradient_accumulation_steps: int = 8  # effective batch = per_device_batch_size * this * devices
    lora_r: int = 32  # LoRA rank (reference implementation: 32)
    lora_alpha: int = 64  # LoRA alpha (64)
    lora_dropout: float = 0.1  # LoRA dropout (0.1)
    lora_target_modules: str | list[str] = "all-linear"  # PEFT: every linear layer but the LM head
    lora_layers: list[int] | None = None  # only these decoder layers get adapters; None: all (paper)
    eval_steps: int = 100  # validate (and checkpoint) every n optimizer steps
    early_stopping_patience: int | None = 3  # stop after n validations without improvement; None: never
    logging_steps: int = 10
    save_total_limit: int = 2  # checkpoints kept (the best one is always kept)
    bf16: bool | str = False  # bfloat16 autocast; "auto": where the hardware has it (`native_bf16`): a GPU
                              # with bfloat16, a CPU with AVX512-BF16 or AMX (others emulate it, slower than float32)
    gradient_checkpointing: bool = False  # True for 8B at 16k context
    report_to: list[str] = field(default_factory=lambda: ["none"])  # ["wandb"] to log to W&B
    run_name: str | None = None  # W&B run name
    seed: int = 0
    init_adapter: Path | None = None  # go on training from this LoRA adapter (a PEFT folder, adapter/ of a run,
                                      # or a GGUF LoRA file such as a shipped adapter.gguf) instead of a new
                                      # one; its rank and alpha must be lora_r and lora_alpha

    def __post_init__(self) -> None:
        self.output_dir = Path(self.output_dir)
        if self.init_adapter is not None:
            self.init_adapter = Path(self.init_adapter)
            from ark.distill.gguf_adapter import lora_rank_alpha

            try:
                rank, alpha = lora_rank_alpha(self.init_adapter)
            except ValueError as err:
                raise ValueError(f"init_adapter {err}") from None
            if (rank, alpha) != (self.lora_r, self.lora_alpha):
                raise ValueError(f"init_adapter {str(self.init_adapter)!r} has LoRA r {rank}, alpha {alpha:g}; this run "
                                 f"trains r {self.lora_r}, alpha {self.lora_alpha}: set lora_r and lora_alpha to the adapter's")
        if self.epochs <= 0 and self.max_steps <= 0:
            raise ValueError(f"need epochs > 0 or max_steps > 0, got epochs={self.epochs}, max_steps={self.max_steps}")
        if self.stop_after_steps is not None and self.stop_after_steps <= 0:
            raise ValueError(f"stop_after_steps must be > 0 or null, got {self.stop_after_steps}")
        if isinstance(self.multi_call_repeats, bool) or not isinstance(self.multi_call_repeats, int) \
                or self.multi_call_repeats < 1:
            raise ValueError(f"multi_call_repeats must be a whole number from 1, got {self.multi_call_repeats!r}")
        if self.learning_rate <= 0 or self.max_length <= 0:
            raise ValueError(f"learning_rate and max_length must be > 0, got {self.learning_rate}, {self.max_length}")
        if self.bf16 not in (True, False, "auto") or not isinstance(self.bf16, (bool, str)):
            raise ValueError(f"bf16={self.bf16!r} is not valid; choose true, false or auto")
        if isinstance(self.report_to, str):
            self.report_to = [self.report_to]
        self.report_to = list(self.report_to)


@dataclass
class TrainResult:
    adapter_dir: Path
    train_losses: list[float]  # logged training loss, in step order
    eval_losses: list[float]  # validation loss at each evaluation
    best_eval_loss: float | None
    best_checkpoint: str | None  # the checkpoint early stopping kept (None without validation)
    global_steps: int
    train_runtime_s: float
    train_tokens: int  # tokens the optimizer saw (all positions, labelled or not)
    tokens_per_s: float
    peak_memory_gb: float | None  # CUDA peak allocated memory; None on CPU
    data: dict[str, Any]  # dataset_stats of train (and val)
    resumed_from: str | None = None  # the checkpoint this process went on from (runtime and tokens: its part)
    bf16: bool | None = None  # whether it trained under bfloat16 autocast (`use_bf16`); None: not recorded


def native_bf16(cpuinfo: Path = Path("/proc/cpuinfo")) -> bool:
    """Whether this machine computes in bfloat16 natively: a CUDA GPU that supports it, else a CPU whose flags
    (`cpuinfo`) include AVX512-BF16 or AMX-BF16. Elsewhere PyTorch emulates bfloat16 on the CPU, which
    makes a training step slower than in float32 (4.2x on AVX2 cores: docs/benchmarks.md)."""
    import torch

    if torch.cuda.is_available():
        return bool(torch.cuda.is_bf16_supported())
    try:
        flags = set(Path(cpuinfo).read_text(encoding="utf-8", errors="replace").split())
    except OSError:
        return False
    return bool(flags & {"avx512_bf16", "amx_bf16"})


def use_bf16(cfg: DistillConfig, cpuinfo: Path = Path("/proc/cpuinfo")) -> bool:
    """Whether a run trains under bfloat16 autocast: ``cfg.bf16``, with "auto" resolved by `native_bf16`."""
    return native_bf16(cpuinfo) if cfg.bf16 == "auto" else cfg.bf16


def start_from_adapter(model, cfg: DistillConfig):
    """`model` with a LoRA of `cfg` whose weights are those of ``cfg.init_adapter`` (trainable): every tensor
    the new LoRA has must be in the adapter with the same shape, and nothing else. ValueError otherwise."""
    import torch
    from peft import get_peft_model, get_peft_model_state_dict, set_peft_model_state_dict

    path = Path(cfg.init_adapter)
    if path.is_dir():
        from ark.distill.gguf_adapter import read_peft_adapter

        weights = read_peft_adapter(path)[1]
    else:
        from ark.distill.gguf_adapter import read_gguf_lora

        c = model.config
        weights = read_gguf_lora(path, c.num_attention_heads, getattr(c, "num_key_value_heads", None)
                                 or c.num_attention_heads)[1]
    peft_model = get_peft_model(model, lora_config(cfg))
    expected = {k: tuple(v.shape) for k, v in get_peft_model_state_dict(peft_model).items()}
    found = {k: tuple(v.shape) for k, v in weights.items()}
    if expected != found:
        missing, extra = sorted(set(expected) - set(found)), sorted(set(found) - set(expected))
        shaped = sorted(k for k in set(expected) & set(found) if expected[k] != found[k])
        first = (missing or extra or shaped)[0]
        raise ValueError(f"init_adapter {str(path)!r} does not fit this run's LoRA ({len(missing)} tensors missing, "
                         f"{len(extra)} extra, {len(shaped)} of another shape; e.g. {first!r}): train with its "
                         "target modules and layers")
    set_peft_model_state_dict(peft_model, {k: torch.from_numpy(v) for k, v in weights.items()})
    return peft_model


def with_init_adapter(model, cfg: DistillConfig):
    """`model` started from ``cfg.init_adapter`` (`start_from_adapter`) unless it has no such setting or is
    already a PEFT model (started by the caller)."""
    from peft import PeftModel

    return model if cfg.init_adapter is None or isinstance(model, PeftModel) else start_from_adapter(model, cfg)


def lora_config(cfg: DistillConfig):
    """The PEFT LoRA config for causal-LM SFT."""
    from peft import LoraConfig

    targets, layers = cfg.lora_target_modules, {}
    if cfg.lora_layers is not None:
        layers = {"layers_to_transform": list(cfg.lora_layers)}
        if targets == "all-linear":  # PEFT needs names with layers_to_transform (Llama/Qwen naming)
            targets = list(LLAMA_LINEAR_MODULES)
    return LoraConfig(r=cfg.lora_r, lora_alpha=cfg.lora_alpha, lora_dropout=cfg.lora_dropout,
                      target_modules=targets, bias="none", task_type="CAUSAL_LM", **layers)


def sft_config(cfg: DistillConfig, has_eval: bool):
    """TRL SFTConfig from DistillConfig (evaluation/early stopping only with a validation set)."""
    import torch
    from trl import SFTConfig

    steps = dict(eval_strategy="steps", eval_steps=cfg.eval_steps, save_strategy="steps",
                 save_steps=cfg.eval_steps, load_best_model_at_end=True, metric_for_best_model="eval_loss",
                 greater_is_better=False) if has_eval else dict(eval_strategy="no", save_strategy="no")
    return SFTConfig(
        output_dir=str(cfg.output_dir / "checkpoints"),
        num_train_epochs=cfg.epochs, max_steps=cfg.max_steps, max_length=cfg.max_length,
        truncation_mode="keep_start", learning_rate=cfg.learning_rate, optim=cfg.optim,
        lr_scheduler_type=cfg.lr_scheduler_type, warmup_steps=cfg.warmup, weight_decay=cfg.weight_decay,
        per_device_train_batch_size=cfg.per_device_batch_size, per_device_eval_batch_size=cfg.per_device_batch_size,
        gradient_accumulation_steps=cfg.gradient_accumulation_steps, logging_steps=cfg.logging_steps,
        save_total_limit=cfg.save_total_limit, bf16=use_bf16(cfg), use_cpu=not torch.cuda.is_available(),
        activation_checkpointing=cfg.gradient_checkpointing,
        report_to=cfg.report_to, run_name=cfg.run_name, seed=cfg.seed, packing=False,
        dataset_num_proc=None, remove_unused_columns=True, disable_tqdm=True, **steps,
    )


def training_inputs(train_examples: list[dict], val_examples: list[dict] | None, cfg: DistillConfig,
                    student: str = "?") -> dict[str, Any]:
    """What a run's checkpoints depend on: the student, the examples' digests and every setting but the
    output folder, the stopping step and logging. Written as checkpoints/inputs.json when training starts."""
    settings = {k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(cfg).items()
                if k not in _NOT_INPUTS and not (k == "init_adapter" and v is None)}   # as before the setting was
    inputs = {"student": student, "train_sha256": examples_sha256(train_examples),
              "val_sha256": examples_sha256(val_examples or []), "settings": settings}
    if cfg.init_adapter is not None:
        inputs["init_adapter_sha256"] = adapter_sha256(cfg.init_adapter)
    return inputs


def adapter_sha256(path: Path) -> str:
    """The SHA-256 of an adapter: of its file, or of a PEFT folder's weights file."""
    from ark.data.sources import file_digest
    from ark.distill.gguf_adapter import ADAPTER_WEIGHTS

    path = Path(path)
    return file_digest(path / ADAPTER_WEIGHTS if path.is_dir() else path)


def _step(checkpoint: Path) -> int:
    return int(checkpoint.name.rsplit("-", 1)[-1])


def resume_point(cfg: DistillConfig, inputs: dict[str, Any]) -> Path | None:
    """The latest checkpoint in ``cfg.output_dir/checkpoints`` to go on from, or None when there is none.

    A killed or stopped CPU run goes on from where it was (same data order, learning-rate schedule and
    random state) when rerun with the same inputs, or with a later ``stop_after_steps``. Checkpoints of other
    inputs raise ValueError naming what differs, before anything is written."""
    folder = cfg.output_dir / "checkpoints"
    found = sorted((p for p in folder.glob("checkpoint-*") if p.name.rsplit("-", 1)[-1].isdigit()), key=_step)
    if not found:
        return None
    saved_file = folder / INPUTS_FILE
    saved = json.loads(saved_file.read_text(encoding="utf-8")) if saved_file.is_file() else {}
    if saved != inputs:
        was = saved.get("settings", {})
        diff = sorted({k for k in {*inputs, *saved} if k != "settings" and saved.get(k) != inputs.get(k)}
                      | {k for k in {*inputs["settings"], *was} if was.get(k) != inputs["settings"].get(k)})
        raise ValueError(f"{folder} holds checkpoints trained on other inputs ("
                         + (", ".join(diff) if saved else f"no {INPUTS_FILE}") + "); remove that folder to "
                         "start over, or set distill.train.output_dir to another folder")
    return found[-1]


def _tokens_seen(lengths: list[int], examples: int) -> int:
    """Tokens of the first ``examples`` examples the optimizer saw, cycling through the data."""
    n = len(lengths)
    return sum(lengths) * (examples // n) + sum(lengths[: examples % n])


def stop_callback(steps: int):
    """A transformers `TrainerCallback` that ends training after ``steps`` optimizer steps (that step's
    validation and checkpoint are still made), the learning-rate schedule left as the whole run's."""
    from transformers import TrainerCallback

    class StopAfter(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            if state.global_step >= steps:
                control.should_training_stop = True
            return control

    return StopAfter()


def progress_callback(write=print):
    """A transformers `TrainerCallback` writing one line per log: optimizer step of all, training or
    validation loss, time so far and the time left at the pace so far (CPU runs take an hour)."""
    from transformers import TrainerCallback

    class Progress(TrainerCallback):
        start: float = 0.0
        first: int = 0   # the step training began at (a resumed run's checkpoint)

        def on_train_begin(self, args, state, control, **kwargs):
            self.start, self.first = time.perf_counter(), state.global_step
            write(f"training: {state.max_steps} optimizer steps (batch {args.per_device_train_batch_size} x "
                  f"{args.gradient_accumulation_steps} accumulation), validation every {args.eval_steps} steps"
                  if args.eval_strategy != "no" else f"training: {state.max_steps} optimizer steps, no validation")

        def on_log(self, args, state, control, logs=None, **kwargs):
            logs = logs or {}
            if "loss" not in logs and "eval_loss" not in logs:
                return
            spent = time.perf_counter() - self.start
            done = state.global_step - self.first
            left = spent / done * (state.max_steps - state.global_step) if done > 0 else 0.0
            what = (f"validation loss {logs['eval_loss']:.4f}" + (" (best)" if state.best_metric == logs["eval_loss"] else "")
                    if "eval_loss" in logs else f"loss {logs['loss']:.4f}")
            write(f"step {state.global_step}/{state.max_steps}  {what}  {_clock(spent)} spent, "
                  f"about {_clock(left)} left", )

    return Progress()


def _clock(seconds: float) -> str:
    m, s = divmod(int(seconds), 60)
    return f"{m // 60}:{m % 60:02d}:{s:02d}" if m >= 60 else f"{m}:{s:02d}"


def labelled_loss(model, inputs: dict[str, Any], num_items_in_batch=None):
    """The mean next-token loss over the labelled tokens of a batch, its logits computed only at the positions
    whose next token is labelled (``logits_to_keep``): an SFT trajectory's labels are its assistant turns,
    about a fifth of its tokens, so the LM head and the softmax over the vocabulary run on a fifth of the
    positions. The same value and gradients as TRL's fused loss, which on a device without Triton scores every
    position. ``num_items_in_batch``: the labelled tokens of all micro-batches of one optimizer step (the
    Trainer's divisor under gradient accumulation); None: this batch's own."""
    import torch
    import torch.nn.functional as F

    targets = inputs["labels"][:, 1:]   # position t predicts token t + 1
    keep = (targets != -100).any(dim=0).nonzero().squeeze(-1)
    out = model(input_ids=inputs["input_ids"], attention_mask=inputs.get("attention_mask"), logits_to_keep=keep,
                use_cache=False)
    kept = targets[:, keep]
    total = F.cross_entropy(out.logits.float().flatten(0, 1), kept.flatten(), ignore_index=-100, reduction="sum")
    n = num_items_in_batch if num_items_in_batch is not None else (kept != -100).sum().clamp(min=1)
    return total / torch.as_tensor(n, device=total.device)


def sft_trainer_class():
    """TRL's `SFTTrainer` whose loss, on a CPU, is `labelled_loss` (elsewhere TRL's own, which scores only the
    labelled positions where Triton runs). Its logs then carry the loss but not TRL's entropy and token accuracy."""
    from trl import SFTTrainer

    class LabelledLossSFTTrainer(SFTTrainer):
        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            if return_outputs or self.args.device.type != "cpu":
                return super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
            loss = labelled_loss(model, inputs, num_items_in_batch)
            if self.args.average_tokens_across_devices and num_items_in_batch is not None:
                loss = loss * self.accelerator.num_processes   # as Trainer does: DDP averages the gradients
            return loss

    return LabelledLossSFTTrainer


def make_trainer(model, tokenizer, train_examples: list[dict], val_examples: list[dict] | None,
                 cfg: DistillConfig, callbacks: list | None = None):
    """The trainer `train_lora` runs: LoRA from `cfg` on `model`, the examples as datasets."""
    from peft import PeftModel

    has_eval = bool(val_examples)
    model = with_init_adapter(model, cfg)
    return sft_trainer_class()(
        model=model, args=sft_config(cfg, has_eval), train_dataset=to_dataset(train_examples),
        eval_dataset=to_dataset(val_examples) if has_eval else None, processing_class=tokenizer,
        peft_config=None if isinstance(model, PeftModel) else lora_config(cfg), callbacks=callbacks or [],
    )


def train_lora(model, tokenizer, train_examples: list[dict], val_examples: list[dict] | None,
               cfg: DistillConfig, card: dict[str, Any] | None = None) -> TrainResult:
    """Train a LoRA adapter on `model`; save the chosen adapter + tokenizer + model card to output_dir/adapter.

    `train_examples`/`val_examples`: from `sft_data.build_examples` (labels already assistant-only).
    `card`: facts for the model card (teacher, student, graph, queries, ...). Goes on from the latest
    checkpoint of the same inputs in output_dir (`resume_point`).
    """
    import torch
    from transformers import EarlyStoppingCallback

    if not train_examples:
        raise ValueError("no training examples (every trajectory was empty or cut away by max_length)")
    has_eval = bool(val_examples)
    inputs = training_inputs(train_examples, val_examples, cfg, (card or {}).get("student", "?"))
    resume = resume_point(cfg, inputs)
    model = with_init_adapter(model, cfg)   # a misfit adapter is refused before anything is written
    (cfg.output_dir / "checkpoints").mkdir(parents=True, exist_ok=True)
    (cfg.output_dir / "checkpoints" / INPUTS_FILE).write_text(json.dumps(inputs, indent=2), encoding="utf-8")
    if resume is not None:
        print(f"resuming from {resume} (step {_step(resume)})")
    callbacks = [progress_callback()]
    if cfg.stop_after_steps:
        callbacks.append(stop_callback(cfg.stop_after_steps))
    if has_eval and cfg.early_stopping_patience:
        callbacks.append(EarlyStoppingCallback(early_stopping_patience=cfg.early_stopping_patience))
    trainer = make_trainer(model, tokenizer, train_examples, val_examples, cfg, callbacks)
    if torch.cuda.is_available():
        torch.cuda.reset_peak_memory_stats()
    t0 = time.perf_counter()
    out = trainer.train(resume_from_checkpoint=str(resume) if resume is not None else None)
    runtime = time.perf_counter() - t0
    history = trainer.state.log_history
    train_losses = [h["loss"] for h in history if "loss" in h and "eval_loss" not in h]
    eval_losses = [h["eval_loss"] for h in history if "eval_loss" in h]
    steps = trainer.state.global_step
    lengths = [min(len(e["input_ids"]), cfg.max_length) for e in train_examples]
    # Examples the optimizer saw in this process: steps * batch * accumulation, cycling through the data.
    per_step = cfg.per_device_batch_size * cfg.gradient_accumulation_steps * max(1, trainer.args.world_size)
    start = _step(resume) if resume is not None else 0
    train_tokens = _tokens_seen(lengths, steps * per_step) - _tokens_seen(lengths, start * per_step)
    data = {"train": dataset_stats(train_examples)}
    if has_eval:
        data["val"] = dataset_stats(val_examples)
    result = TrainResult(
        adapter_dir=cfg.output_dir / ADAPTER_SUBDIR, train_losses=train_losses, eval_losses=eval_losses,
        best_eval_loss=trainer.state.best_metric, best_checkpoint=trainer.state.best_model_checkpoint,
        global_steps=steps, train_runtime_s=runtime, train_tokens=int(train_tokens),
        tokens_per_s=train_tokens / runtime if runtime > 0 else 0.0,
        peak_memory_gb=torch.cuda.max_memory_allocated() / 2**30 if torch.cuda.is_available() else None,
        data=data, resumed_from=str(resume) if resume is not None else None, bf16=trainer.args.bf16,
    )
    del out
    save_adapter(trainer.model, tokenizer, result, cfg, card or {})
    return result


def save_adapter(model, tokenizer, result: TrainResult, cfg: DistillConfig, card: dict[str, Any]) -> Path:
    """Write the adapter, the tokenizer (with the training chat template) and the model card."""
    out = result.adapter_dir
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(out))
    tokenizer.save_pretrained(str(out))
    write_card(out, card, cfg, result)
    return out


def write_card(folder: Path, card: dict[str, Any], cfg: DistillConfig, result: TrainResult) -> None:
    """The model card (README.md) and distill_info.json (card, settings, outcome) in ``folder``."""
    info = {"card": card, "settings": {k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(cfg).items()},
            "result": {k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(result).items()}}
    (folder / INFO_FILE).write_text(json.dumps(info, indent=2), encoding="utf-8")
    (folder / CARD_FILE).write_text(model_card(card, cfg, result), encoding="utf-8")


def model_card(card: dict[str, Any], cfg: DistillConfig, result: TrainResult) -> str:
    """Markdown model card: teacher, student, data size, settings, outcome."""
    train = result.data.get("train", {})
    val = result.data.get("val")
    lines = [
        f"# ARK distilled student: {card.get('student', '?')} (LoRA)",
        "",
        "Label-free distillation of the ARK retrieval agent (arXiv:2601.13969): the student imitates the "
        "teacher's tool-use trajectories (tool calls and observations only, no relevance labels"
        + (", REJECTION-SAMPLED WITH LABELS" if card.get("rejection_sampling") else "") + ").",
        "",
        "| | |",
        "|---|---|",
        f"| teacher | {card.get('teacher', '?')} |",
        f"| student base | {card.get('student', '?')} |",
        f"| graph(s) | {card.get('graph', '?')} |",
        f"| training queries | {card.get('queries', '?')} |",
        f"| training trajectories | {train.get('examples', 0)} |",
        *([f"| teacher trajectories (sha256 of their chats) | {card['trajectories_sha256'][:16]} |"]
          if card.get("trajectories_sha256") else []),
        *([f"| SFT examples (sha256 of the token ids and labels) | {card['sft_sha256'][:16]} |"] if card.get("sft_sha256") else []),
        f"| training tokens (assistant-labelled) | {train.get('tokens', 0):,} ({train.get('assistant_tokens', 0):,}) |",
        f"| validation trajectories | {val['examples'] if val else 'none'} |",
        f"| LoRA | r {cfg.lora_r}, alpha {cfg.lora_alpha}, dropout {cfg.lora_dropout}, "
        f"targets {cfg.lora_target_modules} |",
        f"| optimizer | {cfg.optim}, lr {cfg.learning_rate}, {cfg.lr_scheduler_type} schedule, "
        f"batch {cfg.per_device_batch_size} x {cfg.gradient_accumulation_steps} accumulation |",
        f"| epochs / max steps | {cfg.epochs} / {cfg.max_steps}"
        + (f", stopped after {cfg.stop_after_steps} steps (learning rate on the whole run's schedule)"
           if cfg.stop_after_steps else "") + " |",
        f"| context length | {cfg.max_length} |",
        f"| checkpoint selection | "
        f"{'early stopping on validation loss, patience ' + str(cfg.early_stopping_patience) if val else 'last step'} |",
        f"| steps trained | {result.global_steps} |",
        *([f"| started from | the adapter `{cfg.init_adapter}` (sha256 {card['init_adapter_sha256'][:16]}) |"]
          if cfg.init_adapter is not None and card.get("init_adapter_sha256") else []),
        *([f"| resumed from | {Path(result.resumed_from).name} (the training time below is from there on) |"]
          if result.resumed_from else []),
        f"| training time | {result.train_runtime_s / 60:.0f} min ({result.tokens_per_s:.0f} tokens/s"
        + (", CPU" if result.peak_memory_gb is None else f", {result.peak_memory_gb:.1f} GB GPU peak")
        + ("" if result.bf16 is None else ", bfloat16 autocast" if result.bf16 else ", float32") + ") |",
        f"| best validation loss | {result.best_eval_loss} |",
        f"| final training loss | {result.train_losses[-1] if result.train_losses else None} |",
        "",
    ]
    if card.get("gguf"):
        g = card["gguf"]
        lines += [f"Served by llama.cpp: `{g['file']}` ({g['bytes']:,} bytes, sha256 {g['sha256'][:16]}), a GGUF LoRA "
                  f"adapter on `{g['base']}`, in the chat format the student was trained on "
                  f"(`{card.get('chat_template')}`; `ark.llm.hermes`).", ""]
    else:
        lines += ["Serve with vLLM: `vllm serve <student base> --enable-lora --lora-modules ark-student=<this folder> "
                  f"--max-lora-rank {cfg.lora_r}` and point a `backbone` config at model `ark-student`.", ""]
    if card.get("command"):
        lines += ["Rebuilt by:", "", "```", card["command"], "```", ""]
    extra = {k: v for k, v in card.items()
             if k not in {"teacher", "student", "graph", "queries", "rejection_sampling", "gguf", "command", "sft_sha256",
                         "trajectories_sha256", "init_adapter_sha256"}}
    if extra:
        lines += ["Other facts:", "", "```json", json.dumps(extra, indent=2, default=str), "```", ""]
    return "\n".join(lines)


def example_loss(model, example: dict[str, Any]) -> float:
    """Mean next-token loss of `model` on one tokenized example's labelled (assistant) tokens (`labelled_loss`)."""
    import torch

    batch = {key: torch.tensor([example[key]], device=model.device) for key in ("input_ids", "labels")}
    was_training = model.training
    model.eval()  # no dropout
    try:
        with torch.no_grad():
            return float(labelled_loss(model, batch))
    finally:
        model.train(was_training)


def load_adapter(model, adapter_dir: Path):
    """`model` with the saved LoRA adapter attached (PeftModel), in eval mode."""
    from peft import PeftModel

    return PeftModel.from_pretrained(model, str(adapter_dir)).eval()
