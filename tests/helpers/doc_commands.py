"""The shell commands of README.md, CONTRIBUTING.md and docs/, and how each is tested.

    python -m tests.helpers.doc_commands          # the counts: run, run against the scripted server, parsed, not run

A fenced ``bash``/``python`` block carries a marker on the line above it (CONTRIBUTING.md, "Docs that
cannot rot"): ``<!-- doc-test: run -->``, ``<!-- doc-test: scripted -->``, ``<!-- doc-test: check -->``
or ``<!-- doc-test: not run: <reason> -->``. A command written inline (a code span starting with
``ark``, ``python``, ``make``, ``bash``, ``pip`` or naming a file under ``scripts/`` or ``tests/``) is
parsed (`check`): `tests/test_docs.py` checks it against the real parsers without running it.

`commands()` returns every `Command`; `check_problem(words)` says why a command would not parse (None
when it parses): Hydra overrides composed with the repo's configs and unknown-key check, ``ark`` verbs
parsed by the ``ark`` parser, make targets looked up in the Makefile, modules and files looked up.
Scripts' own argparse parsers are checked by `tests.helpers.doc_scripts` in a process of its own.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
MODES = ("run", "scripted", "check", "not run")
MARKER = re.compile(r"<!--\s*doc-test:\s*(run|scripted|check|not run:\s*(?P<reason>.+?))\s*-->")
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
SPAN = re.compile(r"(?<!`)`([^`\n]+)`(?!`)")
COMMAND_WORDS = ("ark", "python", "make", "bash", "pip")
OVERRIDE = re.compile(r"[+~]{0,2}[a-z_][\w]*([./][\w]+)*=[^\s()\"']*")   # a Hydra override written inline: key=value
EXTERNAL = ("pip", "wandb", "sbatch", "squeue", "scancel", "sacct", "git", "tmux", "export", "source", "cp",
            "rm", "cd", "mkdir", "mv", "nohup", "huggingface-cli", "curl")
HYDRA_ENTRY = {"experiments/run.py": "config", "experiments/diagnose.py": "diagnose",
               "experiments/collect.py": "config", "experiments/distill.py": "config",
               "experiments/embed.py": "config", "experiments.embed": "config"}


def doc_files() -> list[Path]:
    return [REPO / "README.md", REPO / "CONTRIBUTING.md", *sorted((REPO / "docs").glob("*.md"))]


@dataclass
class Command:
    file: str          # relative to the repo
    line: int          # 1-based line of the command (a block's first line for a python block)
    text: str          # the command as written (continuations joined), or a python block's source
    mode: str          # one of MODES
    reason: str = ""   # for "not run"
    kind: str = "shell"   # "shell", "python", or "inline" (a code span in the text)
    block: int = -1    # index of its fenced block in the file (-1: inline)


def shell_lines(block: str) -> list[tuple[int, str]]:
    """(offset of the first line, command) for each command of a shell block: continuations joined,
    comments and blank lines dropped."""
    out, buf, start = [], "", 0
    for k, raw in enumerate(block.split("\n")):
        if not buf:
            start = k
        line = raw.rstrip()
        if line.endswith("\\"):
            buf += line[:-1] + " "
            continue
        buf += line
        text = strip_comment(buf).strip()
        if text:
            out.append((start, text))
        buf = ""
    return out


def strip_comment(line: str) -> str:
    """``line`` without a trailing ``# comment`` outside quotes."""
    quote = None
    for i, c in enumerate(line):
        if quote:
            quote = None if c == quote else quote
        elif c in "'\"":
            quote = c
        elif c == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i]
    return line


def _marker_before(text: str, pos: int) -> tuple[str, str] | None:
    before = text[:pos].rstrip("\n").split("\n")
    while before and not before[-1].strip():
        before.pop()
    m = MARKER.search(before[-1]) if before else None
    if not m:
        return None
    reason = m.group("reason")
    return ("not run", reason.strip()) if reason else (m.group(1), "")


def is_command_span(span: str) -> bool:
    words = span.split()
    if not words:
        return False
    first = words[0]
    return (first in COMMAND_WORDS and len(words) > 1) or (first.startswith(("scripts/", "tests/")) and
                                      first.endswith((".py", ".sh")))


def commands(files: list[Path] | None = None) -> tuple[list[Command], list[str]]:
    """Every command of the docs, and the problems of blocks that cannot be placed (no marker, an
    unlabelled block holding commands)."""
    out, problems = [], []
    for path in files or doc_files():
        text = path.read_text(encoding="utf-8")
        rel = str(path.relative_to(REPO)) if path.is_relative_to(REPO) else path.name
        blocks = list(FENCE.finditer(text))
        for b, m in enumerate(blocks):
            lang, body = m.group(1), m.group(2)
            line0 = text[:m.start()].count("\n") + 2
            if lang not in ("bash", "sh", "shell", "console", "python"):
                if lang == "" and any(l.split(" ")[0] in COMMAND_WORDS and len(l.split()) > 1
                                      for l in body.split("\n")):
                    problems.append(f"{rel}:{line0 - 1}: an unlabelled block holds commands: label it ```bash")
                continue
            marker = _marker_before(text, m.start())
            if marker is None:
                problems.append(f"{rel}:{line0 - 1}: a ```{lang} block without a <!-- doc-test: ... --> marker")
                continue
            mode, reason = marker
            if lang == "python":
                out.append(Command(rel, line0, body, mode, reason, "python", b))
                continue
            for k, cmd in shell_lines(body):
                out.append(Command(rel, line0 + k, cmd, mode, reason, "shell", b))
        outside = FENCE.sub(lambda m: "\n" * m.group(0).count("\n"), text)
        for m in SPAN.finditer(outside):
            span = m.group(1).replace("\\|", "|")
            if is_command_span(span):
                out.append(Command(rel, outside[:m.start()].count("\n") + 1, span, "check", "", "inline"))
            elif OVERRIDE.fullmatch(span):
                out.append(Command(rel, outside[:m.start()].count("\n") + 1, span, "check", "", "override"))
    return out, problems


# --- parsing without running ----------------------------------------------------------------------

def words_of(text: str) -> list[str]:
    """The command's words, as the shell would split them, without leading ``VAR=value`` assignments,
    optional-part brackets (``[--type T]``) and ``...`` placeholders."""
    words = shlex.split(text)
    while words and re.match(r"^[A-Z_][A-Z0-9_]*=", words[0]):
        words.pop(0)
    out = []
    for w in words:
        w = w.strip("[]") if not re.match(r"^[\w.+~/-]+=\[", w) else w
        if w in ("", "...", "…", "|"):
            continue
        out.append(w)
    return out


def make_targets() -> set[str]:
    text = (REPO / "Makefile").read_text()
    return set(re.findall(r"^([A-Za-z0-9][\w.-]*):", text, re.M))


def _compose_problem(overrides: list[str], config_name: str, sweep: bool) -> str | None:
    from ark.config.compose import compose, one_line, sweep_points

    given = [o for o in overrides if not o.startswith("-") and "..." not in o and "<" not in o
             and not _placeholder(o)]
    try:
        points = sweep_points(given, config_name) if sweep else [given]
        for p in points[:4]:
            compose(p, config_name)
    except SystemExit as e:
        return f"does not compose: {e}"
    except Exception as e:  # a Hydra or OmegaConf error, or an unknown key
        return f"does not compose: {one_line(e)}"
    return None


def _drop_hydra_flags(args: list[str]) -> tuple[list[str], bool]:
    out, sweep, skip = [], False, False
    for a in args:
        if skip:
            skip = False
            continue
        if a in ("-m", "--multirun"):
            sweep = True
        elif a in ("--cfg", "-c", "--package", "-p", "--config-name", "-cn", "--config-dir", "-cd"):
            skip = True
        elif not a.startswith("-"):
            out.append(a)
    return out, sweep


def _ark_problem(args: list[str]) -> str | None:
    from ark.cli.main import build_parser

    if args and args[0] in ("run", "diagnose"):
        overrides, sweep = _drop_hydra_flags(args[1:])
        return _compose_problem(overrides, "diagnose" if args[0] == "diagnose" else "config", sweep)
    if any("<" in a for a in args):
        return None   # a placeholder the reader fills in
    parser = build_parser()
    try:
        parser.parse_args(args)
        return None
    except SystemExit as e:
        if e.code in (0, None):
            return None
    # a verb named in the text (`ark search`, `ark mcp --http`): the verb and its options must exist
    verbs = parser.get_default("verbs") or {}
    rest = [a for a in args if a.startswith("-")]
    positional = [a for a in args if not a.startswith("-")]
    if len(positional) > 1 or (positional and positional[0] not in verbs):
        return f"ark does not parse {' '.join(args)}"
    sub = verbs[positional[0]] if positional else parser
    unknown = [a for a in rest if a.split("=", 1)[0] not in sub._option_string_actions]
    return f"ark {' '.join(positional)} has no option {', '.join(unknown)}" if unknown else None


def _placeholder(word: str) -> bool:
    """A word the reader replaces: KEY=VALUE, RUN_DIR, a glob such as bench-*."""
    return bool(re.fullmatch(r"[A-Z][A-Z_]*(=[A-Z_]+)?", word)) or "*" in word


def check_problem(words: list[str]) -> str | None:
    """Why the command ``words`` would not parse, or None. Scripts under scripts/ are only looked up
    here; their arguments are checked by `tests.helpers.doc_scripts`."""
    if not words:
        return "empty command"
    first, args = words[0], words[1:]
    if first in EXTERNAL:
        return None
    if first == "make":
        import fnmatch

        targets = [a for a in args if "=" not in a and not a.startswith("-")]
        if any("*" in t for t in targets):
            return None if all(fnmatch.filter(make_targets(), t) for t in targets) else f"no make target {targets}"
        missing = [t for t in targets if t not in make_targets()]
        if missing:
            return f"no make target {', '.join(missing)}"
        extra = [a.split("=", 1)[1] for a in args if a.startswith("ARGS=")]
        if extra and targets and targets[0] == "reproduce-table1":
            return _compose_problem(["experiment=table1", *shlex.split(extra[0])], "config", True)
        return None
    if first == "ark":
        return _ark_problem(args)
    if first == "bash":
        return None if args and (REPO / args[0]).exists() else f"no file {args[:1]}"
    if first == "python":
        if args[:1] == ["-m"] and len(args) > 1:
            import importlib.util

            if args[1] in HYDRA_ENTRY:
                overrides, sweep = _drop_hydra_flags(args[2:])
                return _compose_problem(overrides, HYDRA_ENTRY[args[1]], sweep)
            try:
                found = importlib.util.find_spec(args[1]) is not None
            except ModuleNotFoundError:
                found = False
            return None if found else f"no module {args[1]}"
        if args and args[0] in HYDRA_ENTRY:
            overrides, sweep = _drop_hydra_flags(args[1:])
            return _compose_problem(overrides, HYDRA_ENTRY[args[0]], sweep)
        if args and args[0].startswith(("scripts/", "tests/")):
            return None if (REPO / args[0]).is_file() else f"no file {args[0]}"
        return f"a python command this test does not know how to check: {' '.join(words)}"
    if first.startswith(("scripts/", "tests/")):
        return None if (REPO / first).is_file() or list(REPO.glob(first)) else f"no file {first}"
    return f"a command this test does not know how to check: {' '.join(words)}"


def override_problem(span: str) -> str | None:
    """Why the inline override ``span`` (``search.setup.index_kind=hnsw``, ``retriever=dense``,
    ``seed=0,1``, ``logger.mode=online|offline|disabled``) names no setting, or None. Alternatives
    (``|``) are checked one by one, a sweep by its first value; a key below a config group
    (``retriever.build.build_embeddings``) is composed with each option of that group until one takes
    it; a placeholder value (``shard=I/N``, ``out_dir=``) checks the key only."""
    from ark.config.compose import compose, hydra_compose, one_line
    from ark.config.keys import unknown_keys

    key, value = span.split("=", 1)
    bare = key.lstrip("+~")
    conf = REPO / "conf"
    groups = {p.name for p in conf.iterdir() if p.is_dir()}
    if "/" in bare or bare in groups:   # a group choice: each option must compose (Hydra's plugins' too)
        if not value or _placeholder(value) or "<" in value:
            return None if (conf / bare).is_dir() or bare.startswith("hydra/") else f"no config group {bare}"
        for v in re.split(r"[|,]", value):
            try:
                compose([f"{key}={v}"])
            except Exception as e:
                return f"`{span}`: {one_line(e)}"
        return None
    values = value.split("|")
    if not value or any(_placeholder(v) or "<" in v or "..." in v for v in values):
        values = ["null"]
    prefix = bare.split(".")[0]
    contexts = [[]] + ([[f"{prefix}={p.stem}"] for p in sorted((conf / prefix).glob("*.yaml"))]
                       if prefix in groups else [[]])
    if prefix == "hydra":
        contexts = [[f"hydra/launcher={p.stem}"] for p in sorted((conf / "hydra" / "launcher").glob("*.yaml"))]
    last = None
    for ctx in contexts:
        problems = []
        for v in values:
            ov = f"{key}={v.split(',')[0]}"
            try:
                if v == "null":
                    problems += unknown_keys([*ctx, ov], compose=hydra_compose)
                else:
                    compose([*ctx, ov])
            except Exception as e:
                problems.append(one_line(e))
        if not problems:
            return None
        last = problems[0]
    return f"`{span}` names no setting: {last}"


def script_invocations(cmds: list[Command]) -> list[tuple[Command, list[str]]]:
    """The commands that call a Python script under scripts/ with arguments (for `doc_scripts`)."""
    out = []
    for c in cmds:
        if c.kind == "python" or c.mode not in ("check", "not run"):
            continue
        try:
            words = words_of(c.text)
        except ValueError:
            continue
        if words[:1] == ["python"] and len(words) > 1 and words[1].startswith("scripts/") and words[1].endswith(".py"):
            out.append((c, words[1:]))
    return out


def counts(cmds: list[Command]) -> dict[str, int]:
    out = {m: 0 for m in MODES}
    for c in cmds:
        out[c.mode] += 1
    return out


def main() -> None:
    cmds, problems = commands()
    per_file: dict[str, dict[str, int]] = {}
    for c in cmds:
        per_file.setdefault(c.file, {m: 0 for m in MODES})[c.mode] += 1
    total = counts(cmds)
    print(f"{len(cmds)} commands in {len(per_file)} files: run {total['run']}, run against the scripted server "
          f"{total['scripted']}, parsed (not run) {total['check']}, not run (with a reason) {total['not run']}")
    for f, n in per_file.items():
        print(f"  {f}: " + ", ".join(f"{m} {k}" for m, k in n.items() if k))
    print(f"  of the parsed: {sum(c.kind == 'override' for c in cmds)} inline overrides (key=value), "
          f"{sum(c.kind == 'inline' for c in cmds)} inline commands, "
          f"{sum(c.kind != 'inline' and c.kind != 'override' and c.mode == 'check' for c in cmds)} in blocks")
    reasons = sorted({c.reason for c in cmds if c.mode == "not run"})
    print("not run, because:\n" + "\n".join(f"  - {r}" for r in reasons))
    for p in problems:
        print("problem:", p)


if __name__ == "__main__":
    main()
