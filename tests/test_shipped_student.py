"""The student the repo ships (results/distill/demo-smollm2-480, served as ``backbone=smollm2-distilled``): its
adapter is the file its card names, small enough to ship, and the backbone config points at it. The card's
data digests are checked against what the repo builds today in the distill tier
(tests/distill/test_shipped_student_inputs.py)."""

from __future__ import annotations

import hashlib
import json

from ark.config.compose import compose
from ark.distill.train import CARD_FILE, INFO_FILE
from tests.helpers.paths import REPO

SHIPPED = REPO / "results" / "distill" / "demo-smollm2-480"


def test_the_shipped_adapter_is_the_file_its_card_names():
    info = json.loads((SHIPPED / INFO_FILE).read_text(encoding="utf-8"))
    gguf = info["card"]["gguf"]
    data = (SHIPPED / gguf["file"]).read_bytes()
    assert len(data) == gguf["bytes"] <= 10 * 2**20
    assert hashlib.sha256(data).hexdigest() == gguf["sha256"]
    card = (SHIPPED / CARD_FILE).read_text(encoding="utf-8")
    assert gguf["sha256"][:16] in card and info["card"]["sft_sha256"][:16] in card
    assert info["card"]["teacher"] == "rules-compact" and info["card"]["chat_template"] == "chatml_tools_compact"
    assert info["result"]["best_eval_loss"] is not None and str(round(info["result"]["best_eval_loss"], 4))[:5] in card


def test_the_student_backbone_serves_the_shipped_adapter_in_its_training_format():
    cfg = compose(["backbone=smollm2-distilled", "budget=t4_n1_compact"])
    info = json.loads((SHIPPED / INFO_FILE).read_text(encoding="utf-8"))
    assert cfg.backbone.local.lora_path == str(SHIPPED / info["card"]["gguf"]["file"])
    assert cfg.backbone.local.chat_format == "ark-hermes-compact"
    assert cfg.budget.agent.prompt_version == "student" and cfg.backbone.temperature == 0
    base = compose(["backbone=smollm2-base"])
    assert base.backbone.local.lora_path is None and base.backbone.local.chat_format == "ark-hermes-compact"
