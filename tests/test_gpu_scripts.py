"""The GPU path's wiring, checked on CPU: students' adapter names, one vLLM server per base model, and
scripts/gpu_check.sh's commands (their --dry-run output composed by Hydra exactly as they would run).

Nothing here starts vLLM or trains: scripts/gpu_check.sh does that on a GPU machine.
"""
from __future__ import annotations

import json
import os
import shlex
import subprocess
from pathlib import Path
from urllib.parse import urlparse

import pytest
from hydra.utils import instantiate

from ark.config.compose import compose

REPO = Path(__file__).resolve().parents[1]


def _adapter(root: Path, name: str, base: str) -> Path:
    d = root / name / "adapter"
    d.mkdir(parents=True)
    (d / "adapter_config.json").write_text(json.dumps({"base_model_name_or_path": base, "r": 32}))
    return d


def _serve(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(REPO / "scripts" / "serve_vllm.sh"), *args, "--dry-run"],
                          capture_output=True, text=True, cwd=REPO)


def _vllm_args(proc: subprocess.CompletedProcess) -> list[str]:
    line = next(l for l in proc.stderr.splitlines() if l.startswith("+ vllm "))
    return shlex.split(line)[2:]


@pytest.mark.parametrize("graph", ["prime", "mag", "amazon"])
@pytest.mark.parametrize("size,n", [("4b", 600), ("4b", 6000), ("8b", 600), ("8b", 6000)])
def test_student_asks_for_the_adapter_distill_writes_for_its_graph(graph, size, n):
    student = compose([f"backbone=student-{size}-{n}", f"graph={graph}"]).backbone
    distill = compose(["experiment=distill", f"graph={graph}", f"distill.size={size}", f"distill.n_queries={n}"]).distill
    assert student.model == distill.name == f"{graph}-qwen3-{size}-{n}"
    assert Path(distill.train.output_dir).name == distill.name        # served under its folder's name
    assert student.name == f"qwen3-{size}-{n}"                         # the run name: the graph is in the run's path
    base = compose([f"backbone=qwen3-{size}"]).backbone
    assert student.base_url == base.base_url                          # one server per base model
    assert instantiate(student).model == student.model


def test_the_two_bases_have_their_own_servers():
    urls = {size: compose([f"backbone=qwen3-{size}"]).backbone.base_url for size in ("4b", "8b")}
    assert urlparse(urls["4b"]).port != urlparse(urls["8b"]).port


def test_serve_vllm_puts_every_adapter_of_its_base_on_one_server(tmp_path):
    p8 = _adapter(tmp_path, "prime-qwen3-8b-600", "Qwen/Qwen3-8B")
    m8 = _adapter(tmp_path, "mag-qwen3-8b-6000", "/models/Qwen3-8B")      # a local copy of the base
    _adapter(tmp_path, "prime-qwen3-4b-600", "Qwen/Qwen3-4B")
    proc = _serve("Qwen/Qwen3-8B", "--adapters", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    args = _vllm_args(proc)
    assert args[:2] == ["serve", "Qwen/Qwen3-8B"] and "--enable-lora" in args
    modules = args[args.index("--lora-modules") + 1:]
    assert modules == [f"mag-qwen3-8b-6000={m8}", f"prime-qwen3-8b-600={p8}"]
    assert args[args.index("--max-loras") + 1] == "2" and args[args.index("--port") + 1] == "8000"
    four = _vllm_args(_serve("Qwen/Qwen3-4B", "--port", "8001", "--adapters", str(tmp_path)))
    assert four[four.index("--lora-modules") + 1:] == [f"prime-qwen3-4b-600={tmp_path / 'prime-qwen3-4b-600' / 'adapter'}"]


def test_serve_vllm_bad_input_is_one_clear_line(tmp_path):
    _adapter(tmp_path, "prime-qwen3-4b-600", "Qwen/Qwen3-4B")
    proc = _serve("Qwen/Qwen3-8B", "--adapters", str(tmp_path))
    assert proc.returncode == 1 and "no adapter of Qwen/Qwen3-8B under" in proc.stderr
    proc = _serve("Qwen/Qwen3-8B", "--adapter", str(tmp_path / "missing"))
    assert proc.returncode == 1 and "adapter_config.json missing" in proc.stderr
    proc = _serve("Qwen/Qwen3-8B", "--lora")
    assert proc.returncode == 2 and "valid: --host" in proc.stderr
    # a single adapter given by path is served under its folder's name
    one = _adapter(tmp_path, "mag-qwen3-8b-600", "Qwen/Qwen3-8B")
    args = _vllm_args(_serve("Qwen/Qwen3-8B", "--adapter", str(one)))
    assert args[args.index("--lora-modules") + 1:] == [f"mag-qwen3-8b-600={one}"]


def _gpu_check(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(REPO / "scripts" / "gpu_check.sh"), *args],
                          capture_output=True, text=True, cwd=REPO)


@pytest.mark.parametrize("size", ["4b", "8b"])
def test_gpu_check_commands_fit_together(size, tmp_path):
    """Each step reads what the previous one writes: composed with Hydra from the dry run's own lines."""
    proc = _gpu_check("--dry-run", "--size", size, "--queries", "7", "--out", str(tmp_path / "gc"))
    assert proc.returncode == 0, proc.stderr
    lines = [shlex.split(l[2:]) for l in proc.stdout.splitlines() if l.startswith("+ ")]
    python = {Path(c[1]).stem: c[2:] for c in lines if len(c) > 1 and c[1].startswith("experiments/")}
    python.update({"run": c[4:] for c in lines if c[1:4] == ["-m", "ark", "run"]})     # ark run ...
    collects = [c[2:] for c in lines if len(c) > 1 and c[1] == "experiments/collect.py"]
    assert len(collects) == 2 and set(python) == {"collect", "distill", "run"}
    train, val = (compose(o) for o in collects)
    distill = compose(python["distill"])
    run = compose(python["run"])
    assert distill.distill.train_dirs == [train.out_dir] and distill.distill.val_dirs == [val.out_dir]
    assert distill.distill.student.model == f"Qwen/Qwen3-{size.upper()}" == train.backbone.model
    assert distill.distill.name == f"demo-qwen3-{size}-7" == Path(distill.distill.train.output_dir).name
    assert run.backbone.model == distill.distill.name                  # the runner asks for the new adapter
    serves = [c for c in lines if c[0] == "scripts/serve_vllm.sh"]
    assert [c[1] for c in serves] == [train.backbone.model] * 2
    port = serves[-1][serves[-1].index("--port") + 1]
    assert urlparse(run.backbone.base_url).port == urlparse(train.backbone.base_url).port == int(port)
    adapters = Path(serves[-1][serves[-1].index("--adapters") + 1])
    assert Path(distill.distill.train.output_dir).parent == adapters   # where serve_vllm.sh looks
    assert run.limit == 3 and instantiate(run.backbone).model == f"demo-qwen3-{size}-7"


def test_gpu_check_help_and_bad_size():
    assert "--dry-run" in _gpu_check("--help").stdout
    proc = _gpu_check("--size", "2b")
    assert proc.returncode == 2 and "valid sizes are 4b, 8b" in proc.stderr


def _replica_lines(proc: subprocess.CompletedProcess) -> list[tuple[str, list[str]]]:
    """(CUDA_VISIBLE_DEVICES, vllm arguments) of each replica's printed command."""
    out = []
    for line in proc.stderr.splitlines():
        if line.startswith("+ CUDA_VISIBLE_DEVICES="):
            words = shlex.split(line[2:])
            out.append((words[0].split("=", 1)[1], words[2:]))
    return out


def test_serve_vllm_starts_one_replica_per_gpu_and_names_them_for_the_backbone(tmp_path):
    p8 = _adapter(tmp_path, "prime-qwen3-8b-600", "Qwen/Qwen3-8B")
    proc = subprocess.run(["bash", str(REPO / "scripts" / "serve_vllm.sh"), "Qwen/Qwen3-8B", "--replicas", "3",
                           "--adapters", str(tmp_path), "--dry-run"], capture_output=True, text=True, cwd=REPO,
                          env={k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"})
    assert proc.returncode == 0, proc.stderr
    replicas = _replica_lines(proc)
    assert [gpus for gpus, _ in replicas] == ["0", "1", "2"]
    assert [args[args.index("--port") + 1] for _, args in replicas] == ["8000", "8001", "8002"]
    assert all(args[args.index("--lora-modules") + 1:] == [f"prime-qwen3-8b-600={p8}"] for _, args in replicas)
    override = proc.stdout.strip()
    backbone = instantiate(compose(["backbone=student-8b-600", "graph=prime", override]).backbone)
    assert backbone.base_url == [f"http://127.0.0.1:{p}/v1" for p in (8000, 8001, 8002)]
    assert backbone.model == "prime-qwen3-8b-600"                     # served by every replica


def test_serve_vllm_replicas_take_the_jobs_gpus_in_groups():
    """On a SLURM node the job's GPUs are CUDA_VISIBLE_DEVICES; a replica of K GPUs runs tensor-parallel."""
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "4,5,6,7"}
    proc = subprocess.run(["bash", str(REPO / "scripts" / "serve_vllm.sh"), "Qwen/Qwen3-8B", "--replicas", "2",
                           "--gpus-per-replica", "2", "--host", "0.0.0.0", "--port", "9000", "--dry-run"],
                          capture_output=True, text=True, cwd=REPO, env=env)
    assert proc.returncode == 0, proc.stderr
    replicas = _replica_lines(proc)
    assert [gpus for gpus, _ in replicas] == ["4,5", "6,7"]
    assert all(args[args.index("--tensor-parallel-size") + 1] == "2" and args[args.index("--host") + 1] == "0.0.0.0"
               for _, args in replicas)
    import socket

    host = socket.gethostname()    # 0.0.0.0 listens everywhere: the URLs name the node, for jobs on other nodes
    assert proc.stdout.strip() == f"backbone.base_url=[http://{host}:9000/v1,http://{host}:9001/v1]"
    short = subprocess.run(["bash", str(REPO / "scripts" / "serve_vllm.sh"), "Qwen/Qwen3-8B", "--replicas", "3",
                            "--dry-run"], capture_output=True, text=True, cwd=REPO, env={**env, "CUDA_VISIBLE_DEVICES": "0,1"})
    assert short.returncode == 2 and short.stderr.strip() == (
        "--replicas 3 x --gpus-per-replica 1 needs 3 GPUs; CUDA_VISIBLE_DEVICES has 2 (0,1)")
