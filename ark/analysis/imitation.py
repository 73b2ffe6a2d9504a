"""Imitation: how a student's trajectories follow its teacher's on the same queries (the distillation's diagnosis).

A distilled student and its teacher run the same queries through the same tools, so their trajectories can be
laid side by side call by call. For every query both answered, the first call where they part (its step, the
two tools, and when the tool is the same the arguments that differ) says where the student stopped imitating;
over all queries, the trajectory shapes of each (its steps, each the tools it called), the argument values the student
gives that its teacher never gave with that tool (of the arguments the teacher gives few distinct values of,
such as ``k`` or a type filter), how many ids each answer list holds and how often both start with one id; given
each side's Hit@1 per query, how many hits each makes on the queries of each of the teacher's shapes (where the
student loses what its teacher finds).

No LLM calls, no graph and no run directory: two {query id: trajectory} maps, such as one agent's trajectories
of two runs (`ark.run.rundir.RunDir.agent_trajectories`).

    from ark.analysis.imitation import compare, format_imitation
    from ark.run.rundir import RunDir
    print(format_imitation(compare(RunDir(student_dir).agent_trajectories(), RunDir(teacher_dir).agent_trajectories())))
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ark.tools.arguments import loads_arguments
from ark.trajectory import Trajectory

NO_CALL = "(no tool call)"   # a step whose reply called no tool
CATEGORICAL = 10             # an argument the teacher gives at most this many distinct values of is categorical


@dataclass(frozen=True)
class Call:
    """One tool call of a trajectory: its tool, its arguments (None when they are not a JSON object) and the
    step (LLM reply) that made it. Two calls are the same call when tool and arguments are."""

    name: str
    args: Mapping[str, Any] | None
    step: int = field(default=0, compare=False)


def _trajectory(t: Trajectory | Mapping) -> Trajectory:
    return t if isinstance(t, Trajectory) else Trajectory.from_json(dict(t))


def calls(trajectory: Trajectory | Mapping) -> list[Call]:
    """The calls of one trajectory in order; a step without a tool call counts as one `NO_CALL`."""
    traj = _trajectory(trajectory)
    out: list[Call] = []
    for i, step in enumerate(traj.steps):
        if not step.tool_calls:
            out.append(Call(NO_CALL, None, i))
        for tc in step.tool_calls:
            try:
                args = loads_arguments(tc.arguments or "{}")   # as the agent reads them
            except (TypeError, ValueError):
                args = None
            out.append(Call(tc.name, args if isinstance(args, dict) else None, i))
    return out


def shape(cs: Iterable[Call]) -> str:
    """A trajectory's shape: its steps in order, each the tools it called joined by ``+``, e.g.
    ``search_graph > explore_neighbors+explore_neighbors > select+finish``."""
    steps: dict[int, list[str]] = {}
    for c in cs:
        steps.setdefault(c.step, []).append(c.name)
    return " > ".join("+".join(names) for _, names in sorted(steps.items()))


def _hashable(value: Any) -> Any:
    return tuple(_hashable(v) for v in value) if isinstance(value, list) else value


def divergence(student: list[Call], teacher: list[Call]) -> tuple | None:
    """Where two call sequences first part: (call index, student tool, teacher tool, differing argument names)
    (``"end"`` for a sequence that ended first); None when they are identical."""
    for i, (s, t) in enumerate(zip(student, teacher)):
        if s == t:
            continue
        if s.name != t.name or s.args is None or t.args is None:
            return i, s.name, t.name, ()
        return i, s.name, t.name, tuple(sorted(k for k in set(s.args) | set(t.args) if s.args.get(k) != t.args.get(k)))
    if len(student) == len(teacher):
        return None
    n = min(len(student), len(teacher))
    return (n, student[n].name if n < len(student) else "end", teacher[n].name if n < len(teacher) else "end", ())


def _parallel(cs: list[Call]) -> bool:
    """Whether a step of the trajectory made several calls, ``finish`` not counted."""
    per_step = Counter(c.step for c in cs if c.name != "finish")
    return any(n > 1 for n in per_step.values())


@dataclass
class Imitation:
    """A student's trajectories against its teacher's on the queries both hold."""

    queries: int = 0
    identical: int = 0
    divergences: Counter = field(default_factory=Counter)       # divergence() -> queries
    student_shapes: Counter = field(default_factory=Counter)
    teacher_shapes: Counter = field(default_factory=Counter)
    unseen_values: Counter = field(default_factory=Counter)     # (tool, argument, value) -> student calls
    student_parallel: int = 0                                   # trajectories with a step of several calls
    teacher_parallel: int = 0                                   # (finish aside: select+finish is one)
    student_selected: float = 0.0                               # ids on the answer list per query
    teacher_selected: float = 0.0
    same_first: int = 0                                         # queries whose answer lists start with one id
    by_teacher_shape: dict = field(default_factory=dict)        # teacher shape -> [queries, teacher hits, student hits]


def compare(student: Mapping[Any, Trajectory | Mapping], teacher: Mapping[Any, Trajectory | Mapping],
            student_hits: Mapping[Any, float] | None = None,
            teacher_hits: Mapping[Any, float] | None = None) -> Imitation:
    """`Imitation` of two {query id: trajectory} maps, over the queries both hold; with both {query id: Hit@1}
    maps (`ark.run.rundir.RunDir.per_query_metric`), also the hits of each by the teacher's shape."""
    both = [q for q in student if q in teacher]
    s_traj = {q: _trajectory(student[q]) for q in both}
    t_traj = {q: _trajectory(teacher[q]) for q in both}
    s_calls = {q: calls(s_traj[q]) for q in both}
    t_calls = {q: calls(t_traj[q]) for q in both}
    values: dict[tuple[str, str], set] = {}
    for cs in t_calls.values():
        for c in cs:
            for k, v in (c.args or {}).items():
                values.setdefault((c.name, k), set()).add(_hashable(v))
    categorical = {key: vs for key, vs in values.items() if len(vs) <= CATEGORICAL}
    out = Imitation(queries=len(both))
    n_sel_s = n_sel_t = 0
    for q in both:
        s, t = s_calls[q], t_calls[q]
        d = divergence(s, t)
        if d is None:
            out.identical += 1
        else:
            out.divergences[d] += 1
        t_shape = shape(t)
        out.student_shapes[shape(s)] += 1
        out.teacher_shapes[t_shape] += 1
        if student_hits is not None and teacher_hits is not None:
            row = out.by_teacher_shape.setdefault(t_shape, [0, 0.0, 0.0])
            row[0] += 1
            row[1] += teacher_hits.get(q, 0.0)
            row[2] += student_hits.get(q, 0.0)
        out.student_parallel += _parallel(s)
        out.teacher_parallel += _parallel(t)
        for c in s:
            for k, v in (c.args or {}).items():
                seen = categorical.get((c.name, k))
                if seen is not None and _hashable(v) not in seen:
                    out.unseen_values[(c.name, k, _hashable(v))] += 1
        sel_s, sel_t = s_traj[q].selected, t_traj[q].selected
        n_sel_s += len(sel_s)
        n_sel_t += len(sel_t)
        out.same_first += bool(sel_s and sel_t and sel_s[0] == sel_t[0])
    if both:
        out.student_selected, out.teacher_selected = n_sel_s / len(both), n_sel_t / len(both)
    return out


def format_imitation(im: Imitation, top: int = 5) -> str:
    """A few lines for a terminal: identical trajectories, the first partings, shapes and unseen values."""
    pct = (lambda n: f"{100 * n / im.queries:.0f}%") if im.queries else (lambda n: "-")
    lines = [f"{im.queries} queries; identical trajectories {im.identical}; the same first answer "
             f"{im.same_first} ({pct(im.same_first)}); ids on the answer list per query {im.student_selected:.1f} "
             f"(teacher {im.teacher_selected:.1f})",
             "first call where the student parts from the teacher (call, student tool, teacher tool, arguments):"]
    for (i, s, t, args), n in im.divergences.most_common(top):
        lines.append(f"  {n:5d} ({pct(n)})  call {i + 1}: {s} / {t}" + (f" [{', '.join(args)}]" if args else ""))
    for label, shapes, parallel in (("student", im.student_shapes, im.student_parallel),
                                    ("teacher", im.teacher_shapes, im.teacher_parallel)):
        lines.append(f"{label} shapes ({len(shapes)} distinct; a step of several calls, finish aside, in "
                     f"{parallel} ({pct(parallel)})):")
        lines += [f"  {n:5d} ({pct(n)})  {sh}" for sh, n in shapes.most_common(top)]
    lines.append("argument values the teacher never gives with that tool (student calls):")
    unseen = im.unseen_values.most_common(top)
    lines += [f"  {n:5d}  {tool}({arg}={value!r})" for (tool, arg, value), n in unseen] or ["  none"]
    if im.by_teacher_shape:
        lines.append("Hit@1 on the queries of each teacher shape, the most the student loses first (queries, teacher, "
                     "student, lost):")
        rows = sorted(im.by_teacher_shape.items(), key=lambda kv: (kv[1][2] - kv[1][1], -kv[1][0], kv[0]))[:top]
        lines += [f"  {n:5d}  {t:5.0f}  {s:5.0f}  {t - s:5.0f}  {sh}" for sh, (n, t, s) in rows]
    return "\n".join(lines)
