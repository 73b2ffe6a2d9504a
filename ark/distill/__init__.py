"""Label-free distillation of the ARK agent (paper §3.3 and §4.3): teacher trajectories -> student LoRA.

- `ark.distill.student`: the student backbone (Qwen3 for the paper, SmolLM2 from a GGUF on CPU), its
  training chat template, generation and tool-call parsing;
- `ark.distill.sft_data`: trajectories -> tokenized chats whose labels cover assistant tokens only;
- `ark.distill.train`: LoRA SFT with TRL + PEFT, early stopping on validation loss, model card;
- `ark.distill.collect`: teacher trajectories from a run of the ARK teacher on the train split (core
  dependencies only);
- `ark.distill.pipeline`: collected trajectories -> SFT data -> the trained adapter.

Entry points: `experiments/collect.py` (teacher trajectories), `experiments/distill.py` (training), both
through `ark.config.jobs`. Training needs `pip install -r requirements-distill.txt`; only `ark.config`
imports this package.
"""
