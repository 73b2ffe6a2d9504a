#!/usr/bin/env bash
# Print the path of jemalloc's shared library (for LD_PRELOAD), or nothing and a note on stderr when it is absent.
#   LD_PRELOAD=$(bash scripts/jemalloc.sh --install) python experiments/distill.py ...
# --install: when it is absent, install Debian's libjemalloc2 with apt-get (as root only; otherwise the note
# says how). A CPU training process under glibc's allocator keeps the memory it freed in fragments and grows
# (the demo student: 12 GB resident after 10 steps, 17 GB by step 74); under jemalloc a step peaks near 7 GB and
# the process holds under 3 GB between steps, at the same speed or better (docs/benchmarks.md,
# scripts/bench_distill_memory.py).
set -euo pipefail
find_lib() {
    { ldconfig -p 2>/dev/null | awk '/libjemalloc\.so\.2 /{print $NF}'
      ls /usr/lib/*/libjemalloc.so.2 /usr/lib64/libjemalloc.so.2 /usr/local/lib/libjemalloc.so.2 2>/dev/null; } | head -n 1
}
lib=$(find_lib || true)
if [[ -z "$lib" && "${1:-}" == "--install" && $(id -u) == 0 ]] && command -v apt-get >/dev/null; then
    echo "installing libjemalloc2 (apt-get) for the training process's memory" >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q libjemalloc2 >/dev/null 2>&1 \
        || { apt-get update -q >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q libjemalloc2 >/dev/null 2>&1; } || true
    lib=$(find_lib || true)
fi
if [[ -z "$lib" ]]; then
    echo "jemalloc not found: training runs on glibc's allocator and its process grows to about 17 GB (install libjemalloc2, e.g. apt-get install libjemalloc2, to keep it near 7 GB)" >&2
    exit 1
fi
echo "$lib"
