"""`ark.distill.decisions` in SmolLM2's compact chat format: one decision per step that opens with a search or an
exploration, its prefix ending where a step of one call and a step of two part, the teacher's choice read from
its step."""

from __future__ import annotations

import pytest

from ark.distill.decisions import decisions
from tests.test_multi_call_repeats import ONE_PER_STEP, TWO_ANCHORS, TWO_SEARCHES

pytestmark = pytest.mark.distill


def _render(chat, tok, kw) -> str:
    return tok.apply_chat_template(chat["messages"], tools=None, tokenize=False, **kw)


@pytest.mark.parametrize("chat, expected", [(ONE_PER_STEP, [(0, False), (1, False)]),
                                            (TWO_SEARCHES, [(0, True)]),
                                            (TWO_ANCHORS, [(0, False), (1, True)])],
                         ids=["one call per step", "second search", "two explorations"])
def test_one_decision_per_step_that_searches_or_explores(chat, expected, student_tokenizer, student_cfg):
    kw = student_cfg.render_kwargs()
    got = decisions(chat, student_tokenizer, kw)
    assert [(d.turn, d.teacher_goes_on) for d in got] == expected
    whole = _render(chat, student_tokenizer, kw)
    for d in got:
        before = student_tokenizer.decode(d.prefix)
        assert before.rstrip().endswith("</tool_call>") and whole.startswith(before)
        assert d.go_on != d.stop
        # the teacher's own next token is the one its choice names
        taken = student_tokenizer.decode(d.prefix + [d.go_on if d.teacher_goes_on else d.stop])
        assert whole.startswith(taken)
        assert "<tool_call>" in student_tokenizer.decode([d.go_on]) or student_tokenizer.decode([d.go_on]).isspace()
        assert student_tokenizer.decode([d.stop]) == "<|im_end|>"
