"""What a distillation that goes on from an adapter (`DistillConfig.init_adapter`) records, without training:
the adapter's digest is part of the run's inputs, so checkpoints started from one adapter are not gone on
from by a run of a new LoRA or of another adapter (`ark.distill.train.resume_point`), and a PEFT folder's rank
and alpha are checked when the settings are made. Training from one is in the distill tier."""

from __future__ import annotations

import json

import pytest

from ark.distill.train import DistillConfig, resume_point, training_inputs

EXAMPLES = [{"input_ids": [1, 2, 3], "labels": [-100, 2, 3]}]


def _peft_folder(path, weights: bytes = b"weights", r: int = 16, alpha: int = 32):
    path.mkdir()
    (path / "adapter_config.json").write_text(json.dumps({"peft_type": "LORA", "r": r, "lora_alpha": alpha}))
    (path / "adapter_model.safetensors").write_bytes(weights)
    return path


def _checkpoints_of(cfg: DistillConfig) -> None:
    """The output folder of a run of `cfg` that saved checkpoint-1."""
    folder = cfg.output_dir / "checkpoints"
    (folder / "checkpoint-1").mkdir(parents=True)
    (folder / "inputs.json").write_text(json.dumps(training_inputs(EXAMPLES, None, cfg)))


def test_checkpoints_from_an_adapter_are_gone_on_from_only_with_that_adapter(tmp_path):
    kw = dict(output_dir=tmp_path / "run", lora_r=16, lora_alpha=32)
    started = DistillConfig(init_adapter=_peft_folder(tmp_path / "a"), **kw)
    _checkpoints_of(started)
    assert resume_point(started, training_inputs(EXAMPLES, None, started)).name == "checkpoint-1"

    fresh = DistillConfig(**kw)
    with pytest.raises(ValueError, match=r"other inputs \(init_adapter, init_adapter_sha256\)"):
        resume_point(fresh, training_inputs(EXAMPLES, None, fresh))
    # the same path with other weights in it: the digest tells
    (tmp_path / "a" / "adapter_model.safetensors").write_bytes(b"retrained")
    with pytest.raises(ValueError, match=r"other inputs \(init_adapter_sha256\)"):
        resume_point(started, training_inputs(EXAMPLES, None, started))


def test_a_run_of_a_new_lora_keeps_the_inputs_it_had_before_the_setting():
    """No init_adapter: nothing of it in the inputs, so checkpoints written before the setting existed resume."""
    inputs = training_inputs(EXAMPLES, None, DistillConfig())
    assert "init_adapter" not in inputs["settings"] and "init_adapter_sha256" not in inputs


def test_a_peft_folder_of_another_rank_is_refused_in_one_line(tmp_path):
    folder = _peft_folder(tmp_path / "a", r=8, alpha=16)
    with pytest.raises(ValueError) as err:
        DistillConfig(init_adapter=folder, lora_r=16, lora_alpha=32)
    assert str(err.value) == (f"init_adapter {str(folder)!r} has LoRA r 8, alpha 16; this run trains r 16, alpha 32: "
                              "set lora_r and lora_alpha to the adapter's")
