"""The rule-based teacher (``backbone=rules``, `ark.llm.rules`): it drives the real agent loop and tools,
its trajectories have an LLM's format, it never reads gold, it ranks nodes next to more of the question's
anchors first, its code holds none of the demo's question wordings, and a run with it is free."""

from __future__ import annotations

import asyncio
import json
import random
import re
import string
from dataclasses import replace
from pathlib import Path

import pytest

from ark.agent import Agent, AgentConfig, ARKRetriever
from ark.data.graph import KnowledgeGraph
from ark.llm.client import BackboneConfig, LLMClient
from ark.prompts import system_prompt
from ark.search.bm25 import BM25Index
from ark.tools import ToolConfig, ToolSet
from tests.helpers.paths import REPO
from tests.helpers.toy_graph import graph, index, toolset  # noqa: F401 - fixtures

RULES = BackboneConfig(name="rules", model="rules", provider="rules")


def run_agent(llm: LLMClient, tools: ToolSet, question: str):
    agent = Agent(llm, tools, system_prompt(tools.graph, toolset=tools), AgentConfig(n_agents=1))
    return asyncio.run(agent.run(question, query_id=1))


def test_trajectory_has_the_format_of_an_llms(toolset):  # noqa: F811
    """The same question through the real loop, once with the rules and once with a model behind the
    OpenAI protocol (the scripted server): the records have the same fields, every reply is an
    assistant message of tool calls each answered by a tool message, and the answer is the gene
    next to the disease the question names."""
    from tests.helpers.policies import search_select_finish
    from tests.helpers.scripted_server import ScriptedServer

    question = "Which genes are associated with Marfan syndrome?"
    rules = run_agent(LLMClient(RULES), toolset, question)
    with ScriptedServer(responder=search_select_finish) as server:
        model = LLMClient(BackboneConfig(name="scripted", model="scripted", provider="vllm",
                                         base_url=server.base_url, max_retries=0))
        llm = run_agent(model, toolset, question)
        asyncio.run(model.aclose())

    a, b = rules.to_json(), llm.to_json()
    assert set(a) == set(b)
    assert {k for s in a["steps"] for k in s} == {k for s in b["steps"] for k in s}
    assert rules.stop_reason == "finish" and rules.error is None
    assert [m["role"] for m in rules.messages[:2]] == ["system", "user"]
    calls = {}
    for m in rules.messages[2:]:
        if m["role"] == "assistant":
            assert set(m) == {"role", "content", "tool_calls"} and m["tool_calls"]
            for tc in m["tool_calls"]:
                assert set(tc) == {"id", "type", "function"} and isinstance(json.loads(tc["function"]["arguments"]), dict)
                calls[tc["id"]] = tc["function"]["name"]
        else:
            assert m["role"] == "tool" and m["tool_call_id"] in calls
    assert all(not s.error for s in rules.steps)   # no call the tools refused
    assert set(calls.values()) >= {"search_graph", "explore_neighbors", "select", "finish"}
    chat = rules.to_chat()["messages"]
    assert chat[-1]["role"] in ("assistant", "tool")
    fbn1 = toolset.graph.names().index("FBN1")
    assert rules.selected[0] == fbn1


def club_graph() -> KnowledgeGraph:
    """Two clubs and three people: Ann (the lowest id) in the first club only, Bob in both, Cid in the
    second only."""
    nodes = [("Alpha Rowing Club", "club"), ("Beta Chess Club", "club"), ("Ann Smith", "person"),
             ("Bob Jones", "person"), ("Cid Lee", "person")]
    edges = [(2, 0), (3, 0), (3, 1), (4, 1)]
    return KnowledgeGraph.from_edges(
        name="clubs", node_type_names=["club", "person"], node_types=[0 if t == "club" else 1 for _, t in nodes],
        names=[n for n, _ in nodes], texts=[f"- name: {n}\n- type: {t}\n" for n, t in nodes],
        relation_names=["member of"], src=[s for s, _ in edges], dst=[d for _, d in edges], rel=[0] * len(edges))


def test_a_node_next_to_two_anchors_ranks_above_one_next_to_one():
    g = club_graph()
    tools = ToolSet(g, BM25Index.build(g.texts()), ToolConfig())
    traj = run_agent(LLMClient(RULES), tools, "Which person is a member of both Alpha Rowing Club and Beta Chess Club?")
    names = [g.node_name(i) for i in traj.selected]
    assert names[0] == "Bob Jones"
    assert set(names[1:3]) == {"Ann Smith", "Cid Lee"}
    assert not {"Alpha Rowing Club", "Beta Chess Club"} & set(names)   # the anchors are not the answer


def test_predictions_do_not_change_when_gold_is_scrubbed(tmp_path):
    """The tables graph's queries run twice through the runner, the second time with every gold set
    replaced by other nodes: the rankings are the same, the scores are not."""
    from ark.data.tables.source import TablesSource
    from ark.run.rundir import read_predictions, ranking
    from ark.run.runner import run_queries
    from ark.run.settings import RunSettings
    from ark.search.bm25 import load_index

    source = TablesSource(REPO / "tests" / "data" / "tables_kg", root=tmp_path / "data")
    g = source.graph()
    tools = ToolSet(g, load_index(g, source.cache_dir), ToolConfig())
    queries = list(source.queries())
    rng = random.Random(0)
    scrubbed = [replace(q, answer_ids=tuple(rng.sample([i for i in range(g.num_nodes) if i not in q.answer_ids],
                                                       len(q.answer_ids)))) for q in queries]
    runs = {}
    for name, qs in (("gold", queries), ("scrubbed", scrubbed)):
        retriever = ARKRetriever(LLMClient(RULES), tools, g, AgentConfig(n_agents=3))
        summary = run_queries(retriever, qs, RunSettings(out_dir=tmp_path / name, progress=False, n_boot=0),
                              candidate_ids=g.candidate_ids)
        runs[name] = (summary, {k: ranking(r) for k, r in read_predictions(tmp_path / name / "predictions.jsonl").items()})
    assert runs["gold"][1] == runs["scrubbed"][1] and len(runs["gold"][1]) == len(queries)
    assert runs["gold"][0]["metrics"]["hit@5"]["mean"] > runs["scrubbed"][0]["metrics"]["hit@5"]["mean"]


def template_fragments() -> list[str]:
    """The fixed text of every demo question template: the pieces between its placeholders, of two
    words or more, lower-cased with runs of spaces made one."""
    from ark.data.demo.queries import PHRASES

    out = []
    for phrasings in PHRASES.values():
        for template in phrasings:
            for literal, *_ in string.Formatter().parse(template):
                piece = " ".join((literal or "").lower().split())
                if len(re.findall(r"[a-z]+", piece)) >= 2:
                    out.append(piece)
    return out


def test_the_rules_hold_no_demo_question_wording():
    import ark.llm.rules

    fragments = template_fragments()
    assert len(fragments) >= 13   # every template has at least one
    source = " ".join(Path(ark.llm.rules.__file__).read_text().lower().split())
    assert [f for f in fragments if f in source] == []
    # and the search would find one: a fragment planted in the text is reported
    assert fragments[0] in " ".join((source + " " + fragments[0]).split())


def test_rules_backbone_is_free_and_takes_sampling_flags(tmp_path):
    from hydra.utils import instantiate

    from ark.config.compose import compose
    from ark.config.plan import is_paid
    from ark.config.prerequisites import key_problems, server_problems

    cfg = compose(["backbone=rules", "graph=demo", "backbone.temperature=0.7"])
    backbone = instantiate(cfg.backbone)
    assert backbone.provider == "rules" and backbone.temperature == 0.7
    assert not is_paid(cfg)
    assert key_problems(backbone) == [] and server_problems(backbone) == []
    llm = LLMClient(backbone, cache=tmp_path / "llm" / "rules.sqlite")
    assert llm.price.input_per_m == 0 and llm.price.output_per_m == 0
    reply = asyncio.run(llm.chat([{"role": "system", "content": ""}, {"role": "user", "content": "KCNH2"}], []))
    assert reply.cost_usd == 0 and not reply.cached and llm.stats.http_requests == 0
    assert not (tmp_path / "llm").exists()   # nothing to cache: no cache file


def test_a_reply_reads_only_the_conversation(toolset):  # noqa: F811
    """The policy is a function of the request: the same conversation gives the same reply, so the
    agents of a query and a replay agree."""
    from ark.llm.rules import RulesPolicy

    traj = run_agent(LLMClient(RULES), toolset, "Which genes are associated with Marfan syndrome?")
    tools = traj.tools
    prefix = traj.messages[:2]
    assert RulesPolicy()(prefix, tools) == RulesPolicy()(list(prefix), tools)
    first = RulesPolicy()(prefix, tools)["tool_calls"]
    assert [tc["function"]["name"] for tc in first] == ["search_graph"] * len(first)
    assert json.loads(first[0]["function"]["arguments"])["query"] == "Which genes are associated with Marfan syndrome?"


@pytest.mark.parametrize("user_ids", [True, False])
def test_ids_go_back_as_the_tools_show_them(tmp_path, user_ids):
    """On the tables graph the tools may show the graph's own string ids: the rules pass them back
    in that form, so no call is refused."""
    from ark.data.tables.source import TablesSource
    from ark.search.bm25 import load_index

    source = TablesSource(REPO / "tests" / "data" / "tables_kg", root=tmp_path / "data")
    g = source.graph()
    tools = ToolSet(g, load_index(g, source.cache_dir), ToolConfig(user_ids=user_ids))
    q = next(iter(source.queries()))
    traj = run_agent(LLMClient(RULES), tools, q.text)
    assert traj.stop_reason == "finish" and all(not s.error for s in traj.steps)
    assert set(q.answer_ids) & set(traj.selected)


def test_without_type_filters_it_reads_types_from_the_observations(graph, index):  # noqa: F811
    """With both type filters switched off the schemas name no node type: the node lines are still read
    (their type from the brackets), and the relation the question names picks the answer."""
    tools = ToolSet(graph, index, ToolConfig(type_filter=False, search_type_filter=False))
    traj = run_agent(LLMClient(RULES), tools, "Which genes are associated with Marfan syndrome?")
    assert all(not s.error for s in traj.steps)
    assert traj.selected[0] == graph.names().index("FBN1")


def test_compact_settings_ask_less_of_the_tools(toolset):  # noqa: F811
    """`backbone.extra_body.rules` shapes every call the policy makes: the k of its searches and
    explorations and the length of its answer list follow the settings, not the full teacher's."""
    from ark.llm.rules import RulesSettings

    question = "Which genes are associated with Marfan syndrome?"
    full = run_agent(LLMClient(RULES), toolset, question)
    small = RulesSettings(question_k=3, head_k=2, max_phrases=0, neighbors_k=4, select_n=1)
    compact = run_agent(LLMClient(replace(RULES, extra_body={"rules": vars(small)})), toolset, question)

    def calls(traj):
        return [(tc["function"]["name"], json.loads(tc["function"]["arguments"]))
                for m in traj.messages if m["role"] == "assistant" for tc in m["tool_calls"]]

    searches = [a for n, a in calls(compact) if n == "search_graph"]
    explores = [a for n, a in calls(compact) if n == "explore_neighbors"]
    assert searches and {a["k"] for a in searches} <= {3, 2}
    assert explores and {a["k"] for a in explores} == {4}
    assert [len(a["node_ids"]) for n, a in calls(compact) if n == "select"] == [1]
    assert len(searches) < len([1 for n, _ in calls(full) if n == "search_graph"])


@pytest.mark.parametrize("options, named", [({"check_count": 3}, "unknown key 'check_count'"),
                                            ({"neighbors_k": 0}, "neighbors_k must be a whole number from 1"),
                                            ({"select_n": "ten"}, "select_n must be a whole number from 1"),
                                            ({"head_search": 0}, "head_search must be true or false")])
def test_a_bad_rules_setting_is_named_before_a_run(options, named):
    with pytest.raises(ValueError, match=named) as err:
        BackboneConfig(name="rules", model="rules", provider="rules", extra_body={"rules": options})
    assert "\n" not in str(err.value)


def test_the_compact_teacher_config_composes_with_the_students_budget():
    """conf/backbone/rules-compact.yaml with conf/budget/t4_n1_compact.yaml: the compact prompt, one agent
    of 4 steps, the short snippets, and settings the policy accepts."""
    from hydra import compose, initialize_config_dir
    from hydra.utils import instantiate

    from ark.llm.rules import RulesSettings

    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        cfg = compose("config", overrides=["experiment=collect_student", "graph=demo"])
    backbone, agent, tools = instantiate(cfg.backbone), instantiate(cfg.budget.agent), instantiate(cfg.ablation.tools)
    assert backbone.provider == "rules" and RulesSettings.of(backbone.extra_body["rules"]) != RulesSettings()
    assert (agent.prompt_version, agent.t_max, agent.n_agents) == ("student", 4, 1)
    assert (tools.search_k, tools.neighbors_k, tools.snippet_chars) == (5, 10, 60)
    assert cfg.collect.trajectories_per_query == 1 and cfg.collect.t_max == 4


def teacher_runs(tmp_path, *backbones: str) -> dict:
    """{backbone: its trajectories on the tables graph's queries}, each backbone composed as the student's
    collection composes it (experiment=collect_student)."""
    from hydra import compose, initialize_config_dir
    from hydra.utils import instantiate

    from ark.data.tables.source import TablesSource
    from ark.search.bm25 import load_index

    source = TablesSource(REPO / "tests" / "data" / "tables_kg", root=tmp_path / "data")
    g = source.graph()
    tools = ToolSet(g, load_index(g, source.cache_dir), ToolConfig())
    runs = {}
    for name in backbones:
        with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
            cfg = compose("config", overrides=["experiment=collect_student", f"backbone={name}"])
        llm = LLMClient(instantiate(cfg.backbone))
        runs[name] = [run_agent(llm, tools, q.text) for q in source.queries()]
    return runs


def test_the_uniform_teacher_takes_one_shape_and_keeps_the_hits_answer(tmp_path):
    """conf/backbone/rules-compact-uniform.yaml on the tables graph's queries beside rules-compact: the
    compact teacher searches a head noun in step 1 or selects straight from its search in some of them
    (so the comparison can fail); the uniform one makes one search and then explores in every query, and
    where the compact one answered from its search the uniform answer starts with the same node."""
    runs = teacher_runs(tmp_path, "rules-compact", "rules-compact-uniform")

    def steps(traj):
        return [[tc["function"]["name"] for tc in m["tool_calls"]] for m in traj.messages if m["role"] == "assistant"]

    compact, uniform = runs["rules-compact"], runs["rules-compact-uniform"]
    from_search = [i for i, t in enumerate(compact) if steps(t)[1][0] == "select"]
    assert from_search and any(steps(t)[0] == ["search_graph"] * 2 for t in compact)
    for t in uniform:
        assert steps(t)[0] == ["search_graph"] and steps(t)[1][0] == "explore_neighbors"
        assert t.stop_reason == "finish" and not any(s.error for s in t.steps)
    assert [uniform[i].selected[0] for i in from_search] == [compact[i].selected[0] for i in from_search]


def test_the_explained_teacher_says_what_it_reads_and_calls_what_the_compact_one_calls(tmp_path):
    """conf/backbone/rules-compact-explained.yaml beside rules-compact on the tables graph's queries: the
    same calls, step by step, and the same answers; each of its replies opens with one line (the compact
    teacher's replies have none), and where it explores a node the question names, that line names the
    node's id and the type it then filters by."""
    runs = teacher_runs(tmp_path, "rules-compact", "rules-compact-explained")

    def replies(traj):
        return [m for m in traj.messages if m["role"] == "assistant"]

    explored_named = 0
    for plain, said in zip(runs["rules-compact"], runs["rules-compact-explained"]):
        assert said.selected == plain.selected
        assert [m["tool_calls"] for m in replies(said)] == [m["tool_calls"] for m in replies(plain)]
        assert all(m["content"] == "" for m in replies(plain))
        for m in replies(said):
            assert m["content"].strip() and "\n" not in m["content"], m["content"]
            for tc in m["tool_calls"]:
                args = json.loads(tc["function"]["arguments"])
                if tc["function"]["name"] == "explore_neighbors" and m["content"].startswith("It names "):
                    explored_named += 1
                    assert f"[{args['node_id']}]" in m["content"]
                    for t in args.get("node_types", []):
                        assert f"It asks for: {t}." in m["content"]
    assert explored_named, "no query of the tables graph explores a node it names: the check above ran on nothing"


def test_the_explained_teacher_names_the_node_next_to_both_anchors_before_selecting_it():
    g = club_graph()
    tools = ToolSet(g, BM25Index.build(g.texts()), ToolConfig())
    llm = LLMClient(replace(RULES, extra_body={"rules": {"explain": True}}))
    traj = run_agent(llm, tools, "Which person is a member of both Alpha Rowing Club and Beta Chess Club?")
    last = [m for m in traj.messages if m["role"] == "assistant"][-1]
    bob = g.names().index("Bob Jones")
    assert traj.selected[0] == bob
    assert last["content"].endswith(f"at once: [{bob}].") and "Alpha Rowing Club [0]" in last["content"]
