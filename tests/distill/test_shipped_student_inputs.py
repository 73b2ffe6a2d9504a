"""The shipped student's card (results/distill/demo-smollm2-480/distill_info.json) against what the repo builds
today: the free teacher's trajectories on the demo's train split (`experiment=collect_student`, collected
afresh into a temporary folder) have the digest the card records, and so do the SFT examples the student's
tokenizer and compact template make of them; the base GGUF is the one the card names."""

from __future__ import annotations

import hashlib
import json

import pytest

from tests.helpers.paths import REPO

pytestmark = pytest.mark.distill
SHIPPED = REPO / "results" / "distill" / "demo-smollm2-480"


def test_the_card_matches_the_inputs_built_today(tmp_path):
    from ark.config.compose import compose
    from ark.config.jobs import collect
    from ark.distill.pipeline import first_queries, trajectories_sha256
    from ark.distill.sft_data import build_examples, examples_sha256, load_trajectories, repeated, trainable_chat
    from ark.distill.student import StudentConfig, load_tokenizer, smollm2_gguf_path

    card = json.loads((SHIPPED / "distill_info.json").read_text(encoding="utf-8"))["card"]
    settings = json.loads((SHIPPED / "distill_info.json").read_text(encoding="utf-8"))["settings"]
    out = tmp_path / "train"
    collect(compose(["experiment=collect_student", "graph=demo", "progress=false", f"out_dir={out}"]))
    trajs = first_queries(load_trajectories(out), card["queries"])
    assert trajectories_sha256(trajs) == card["trajectories_sha256"]
    student = StudentConfig(model="smollm2", chat_template=card["chat_template"], torch_dtype="float32")
    tok = load_tokenizer(student)
    chats = repeated([c for c in map(trainable_chat, trajs) if c], settings.get("multi_call_repeats", 1))
    examples = build_examples(chats, tok, student.render_kwargs(), settings["max_length"])
    assert examples_sha256(examples) == card["sft_sha256"]
    assert hashlib.sha256(smollm2_gguf_path().read_bytes()).hexdigest() == card["gguf"]["base_sha256"]


def test_make_distill_demo_trains_with_the_cards_settings():
    from dataclasses import asdict

    from omegaconf import OmegaConf

    from ark.config.compose import compose
    from ark.distill.train import DistillConfig

    settings = json.loads((SHIPPED / "distill_info.json").read_text(encoding="utf-8"))["settings"]
    d = OmegaConf.to_container(compose(["experiment=distill_student", "graph=demo"]).distill, resolve=True)
    today = {k: (str(v) if k == "output_dir" else v) for k, v in asdict(DistillConfig(**d["train"])).items()}
    # a setting added after the card was written: the card's run had its default's behaviour
    defaults = asdict(DistillConfig())
    # bf16: the card's run had bfloat16 autocast (true then; its CPU has AVX512-BF16); the config now says
    # auto, which is the same there and float32 on a CPU that would emulate bfloat16
    assert (today.pop("bf16"), settings.pop("bf16")) == ("auto", True)
    assert {k: v for k, v in today.items() if k in settings or v != defaults[k]} == settings
    assert SHIPPED.name == d["name"]
