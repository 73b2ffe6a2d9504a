"""SFT data: assistant-only labels on real collected trajectories, for SmolLM2's and Qwen3's templates."""

from __future__ import annotations

from pathlib import Path

import pytest

from ark.distill import sft_data
from ark.distill.sft_data import IGNORE_INDEX
from ark.distill.student import StudentConfig, training_chat_template

pytestmark = pytest.mark.distill


def _hermes(message: dict) -> str:
    """What an assistant message should look like in Hermes format, written out independently of the template."""
    parts = [message["content"]] if message.get("content") else []
    for tc in message.get("tool_calls") or []:
        f = tc["function"]
        parts.append(f'<tool_call>\n{{"name": "{f["name"]}", "arguments": {f["arguments"]}}}\n</tool_call>')
    return "\n".join(parts) + "<|im_end|>\n"


def _chats(collected):
    trajs = sft_data.load_trajectories(collected.train_dir)
    return [c for c in map(sft_data.trainable_chat, trajs) if c is not None]


def test_labels_are_exactly_the_assistant_turns(collected, student_tokenizer, student_cfg):
    chats = _chats(collected)
    assert len(chats) == collected.summary["trajectories"] == 6
    examples = sft_data.build_examples(chats, student_tokenizer, student_cfg.render_kwargs())
    assert len(examples) == len(chats)
    for chat, ex in zip(chats, examples):
        assert sft_data.check_masking(chat, ex, student_tokenizer, student_cfg.render_kwargs()) == []
        # Decoded: one labelled span per assistant message, equal to its Hermes rendering.
        expected = [_hermes(m) for m in chat["messages"] if m["role"] == "assistant"]
        assert sft_data.labelled_spans(ex, student_tokenizer) == expected
        # Everything else is masked: system prompt, question and every observation.
        masked = student_tokenizer.decode([t for t, lab in zip(ex["input_ids"], ex["labels"]) if lab == IGNORE_INDEX])
        for m in chat["messages"]:
            if m["role"] in ("system", "user", "tool") and m.get("content"):
                assert m["content"].strip() in masked
    stats = sft_data.dataset_stats(examples)
    assert stats["tokens"] == sum(len(e["input_ids"]) for e in examples)
    assert 0 < stats["assistant_tokens"] < stats["tokens"] / 4   # the prompt dominates
    print(f"\nSFT data from {len(chats)} demo trajectories: {stats}")


def test_qwen3_template_masks_assistant_turns_with_thinking_off(collected, student_tokenizer):
    """Qwen3's own template (as TRL ships it) on the same chats: TRL's training variant, thinking disabled."""
    import copy

    import trl

    tok = copy.deepcopy(student_tokenizer)   # ChatML special tokens are shared with Qwen3's vocabulary
    tok.chat_template = (Path(trl.__file__).parent / "chat_templates" / "qwen3.jinja").read_text()
    tok.chat_template = training_chat_template(tok, "native")
    kw = {"enable_thinking": False}
    chat = _chats(collected)[0]
    ex = sft_data.tokenize_chat(chat, tok, kw)
    assert sft_data.check_masking(chat, ex, tok, kw) == []
    spans = sft_data.labelled_spans(ex, tok)
    expected = [_hermes(m) for m in chat["messages"] if m["role"] == "assistant"]
    assert spans == ["<think>\n\n</think>\n\n" + e for e in expected]
    # At inference the generation prompt already holds the empty think block; the model emits the rest.
    targets = sft_data.inference_targets(chat, tok, kw)
    assert targets == expected


def test_template_without_generation_markers_is_refused(collected, student_tokenizer):
    import copy

    tok = copy.deepcopy(student_tokenizer)
    tok.chat_template = "{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}"
    with pytest.raises(ValueError, match="generation"):
        sft_data.tokenize_chat(_chats(collected)[0], tok)


def test_truncation_keeps_the_start_and_drops_examples_without_assistant_tokens(collected, student_tokenizer):
    chat = _chats(collected)[0]
    full = sft_data.tokenize_chat(chat, student_tokenizer)
    n = len(full["input_ids"])
    cut = sft_data.tokenize_chat(chat, student_tokenizer, max_length=n - 5)
    assert cut["truncated"] and cut["input_ids"] == full["input_ids"][: n - 5]
    first_label = next(i for i, lab in enumerate(full["labels"]) if lab != IGNORE_INDEX)
    assert sft_data.build_examples([chat], student_tokenizer, max_length=first_label) == []
    assert sft_data.dataset_stats([cut])["truncated"] == 1


def test_trajectories_read_from_jsonl_and_from_the_run_directory_agree(collected):
    from_jsonl = sft_data.load_trajectories(collected.train_dir / "trajectories.jsonl")
    per_query = sft_data.load_trajectories(*sorted((collected.train_dir / "trajectories").glob("*.json")))
    key = lambda t: (str(t.query_id), t.agent_index)  # noqa: E731
    assert sorted(map(key, from_jsonl)) == sorted(map(key, per_query))
    assert {key(t): t.to_chat() for t in from_jsonl} == {key(t): t.to_chat() for t in per_query}


def test_bad_chat_template_choice_names_the_valid_ones():
    with pytest.raises(ValueError, match=r"chat_template='qwen'.*\['native', 'chatml_tools', 'chatml_tools_compact'\]"):
        StudentConfig(chat_template="qwen")
