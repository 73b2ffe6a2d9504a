"""The weight a distillation puts on a teacher's steps of several calls: `sft_data.several_calls` tells such a
trajectory from one that makes one call per step, `sft_data.repeated` trains it `multi_call_repeats` times,
and `DistillConfig` refuses a repeat count that is no whole number from 1 in one line."""

from __future__ import annotations

import json

import pytest

from ark.distill.sft_data import repeated, several_calls
from ark.distill.train import DistillConfig
from ark.tools import FINISH, NEIGHBORS, SEARCH, SELECT


def _call(name: str, **args) -> dict:
    return {"id": f"call_{name}", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}


def _chat(*steps: list[dict]) -> dict:
    messages = [{"role": "system", "content": "s"}, {"role": "user", "content": "q"}]
    for calls in steps:
        messages.append({"role": "assistant", "content": "", "tool_calls": calls})
        messages += [{"role": "tool", "tool_call_id": c["id"], "content": "r"} for c in calls]
    return {"messages": messages, "tools": []}


ONE_PER_STEP = _chat([_call(SEARCH, query="q", k=8)], [_call(NEIGHBORS, node_id=1, k=10)],
                     [_call(SELECT, node_ids=[2, 3]), _call(FINISH)])
TWO_SEARCHES = _chat([_call(SEARCH, query="q", k=8), _call(SEARCH, query="gene", k=5)],
                     [_call(SELECT, node_ids=[2]), _call(FINISH)])
TWO_ANCHORS = _chat([_call(SEARCH, query="q", k=8)],
                    [_call(NEIGHBORS, node_id=1, k=10), _call(NEIGHBORS, node_id=4, k=10)],
                    [_call(FINISH)])


def test_select_with_finish_is_not_a_step_of_several_calls():
    assert not several_calls(ONE_PER_STEP)
    assert not several_calls(_chat([_call(FINISH)]))


@pytest.mark.parametrize("chat", [TWO_SEARCHES, TWO_ANCHORS], ids=["second search", "two explorations"])
def test_a_step_of_two_tool_calls_is_one(chat):
    assert several_calls(chat)


def test_repeated_trains_each_multi_call_trajectory_n_times_in_place():
    chats = [ONE_PER_STEP, TWO_SEARCHES, ONE_PER_STEP, TWO_ANCHORS]
    assert repeated(chats, 1) == chats
    out = repeated(chats, 3)
    assert out == [ONE_PER_STEP] + [TWO_SEARCHES] * 3 + [ONE_PER_STEP] + [TWO_ANCHORS] * 3


@pytest.mark.parametrize("bad", [0, -1, 1.5, "2", True])
def test_a_bad_repeat_count_is_refused_in_one_line(bad, tmp_path):
    with pytest.raises(ValueError, match=r"multi_call_repeats must be a whole number from 1, got ") as err:
        DistillConfig(output_dir=tmp_path, multi_call_repeats=bad)
    assert repr(bad) in str(err.value) and "\n" not in str(err.value)
    assert not any(tmp_path.iterdir())
