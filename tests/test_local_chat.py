"""ark.llm.llama_server: every completion the local server's chat handler makes stops at max_tokens."""

from ark.llm.llama_server import FALLBACK_MAX_TOKENS, bounded, chat_format_arg, visible_messages


class RecordingLlama:
    """Stands in for llama_cpp.Llama: records the max_tokens of each completion it is asked for."""

    verbose = False

    def __init__(self):
        self.asked: list = []

    def create_completion(self, prompt, **kwargs):
        self.asked.append(kwargs.get("max_tokens"))
        return {"choices": [{"text": prompt}]}


def unbounded_handler(*, llama, messages, max_tokens=None, **kwargs):
    """Calls like llama-cpp-python's chatml-function-calling: tool name, arguments and message
    completions with max_tokens=None, and one with an explicit small bound."""
    llama.create_completion(prompt="name", max_tokens=None)
    llama.create_completion(prompt="args", max_tokens=None)
    llama.create_completion(prompt="tiny", max_tokens=8)
    llama.create_completion(prompt="huge", max_tokens=100_000)
    return {"verbose": llama.verbose, "max_tokens": max_tokens, "messages": messages}


def test_bounded_caps_every_internal_completion_at_the_requests_max_tokens():
    llama = RecordingLlama()
    out = bounded(unbounded_handler)(llama=llama, messages=["hi"], max_tokens=256)
    assert llama.asked == [256, 256, 8, 256]
    assert out == {"verbose": False, "max_tokens": 256, "messages": ["hi"]}  # other attributes pass through


def test_bounded_without_a_request_bound_uses_the_fallback():
    for none in (None, 0, -1):
        llama = RecordingLlama()
        bounded(unbounded_handler)(llama=llama, messages=[], max_tokens=none)
        assert llama.asked == [FALLBACK_MAX_TOKENS, FALLBACK_MAX_TOKENS, 8, FALLBACK_MAX_TOKENS]


def test_chat_format_arg_reads_both_spellings():
    assert chat_format_arg(["--model", "m.gguf", "--chat_format", "chatml-function-calling"]) == \
        "chatml-function-calling"
    assert chat_format_arg(["--chat_format=chatml"]) == "chatml"
    assert chat_format_arg(["--model", "m.gguf"]) is None


def test_visible_messages_show_tool_results_as_named_user_turns_marked_safe():
    from markupsafe import Markup, escape

    msgs = [{"role": "system", "content": 'Use "search_graph".'},
            {"role": "user", "content": "genes of <gout>?"},
            {"role": "assistant", "content": "", "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "search_graph", "arguments": '{"query": "gout"}'}},
                {"id": "c2", "type": "function", "function": {"name": "explore_neighbors", "arguments": '{"node_id": 7}'}}]},
            {"role": "tool", "tool_call_id": "c1", "content": '[7] "Gout" (disease)'},
            {"role": "tool", "tool_call_id": "c2", "content": "[9] SLC2A9 & more"},
            {"role": "tool", "tool_call_id": "unknown", "content": "x"}]
    out = visible_messages(msgs)
    assert [m["role"] for m in out] == ["system", "user", "assistant", "user", "user", "user"]
    assert out[3]["content"] == 'functions.search_graph result:\n[7] "Gout" (disease)'
    assert out[4]["content"] == "functions.explore_neighbors result:\n[9] SLC2A9 & more"
    assert out[5]["content"].startswith("functions.tool result:")
    # autoescape leaves safe text as it is: quotes, brackets and ampersands reach the model verbatim
    for m in out:
        assert isinstance(m["content"], Markup) and escape(m["content"]) == m["content"]
    args = out[2]["tool_calls"][0]["function"]["arguments"]
    assert isinstance(args, Markup) and str(escape(args)) == '{"query": "gout"}'
    assert msgs[3]["role"] == "tool" and not isinstance(msgs[0]["content"], Markup)  # input untouched
