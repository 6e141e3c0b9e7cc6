#!/usr/bin/env bash
# llama-cpp-python's OpenAI-compatible server (`python -m llama_cpp.server`) with
# Qwen2.5-Coder-0.5B-Instruct and the `chatml-function-calling` chat format, for kode_nb's opt-in
# live run (`bash scripts/dev.sh live`). Building it from the PyPI sdist takes 12-17 min on 2 cores,
# so the built wheel and a venv holding it are cached OUTSIDE the repository, keyed by version:
# only a new machine (or a new version) pays the build. The model is scripts/llama_server.sh's.
#
#   bash scripts/llama_cpp_python.sh wheel     build (or reuse) the llama-cpp-python wheel
#   bash scripts/llama_cpp_python.sh install   wheel + a venv holding it and the server's extras
#   bash scripts/llama_cpp_python.sh prepare   model + install, in parallel
#   bash scripts/llama_cpp_python.sh start     prepare, then start the server on 127.0.0.1 on a free
#                                              port; prints `URL PID LOGFILE` once it answers
#   bash scripts/llama_cpp_python.sh stop PID  stop a server started by `start`
#
# Environment: KODE_NB_CACHE (default ${XDG_CACHE_HOME:-$HOME/.cache}/kode_nb), PYTHON (python3),
# LLAMA_CPP_BUILD_JOBS (2), KODE_NB_LLAMA_ALIAS (qwen2.5-coder-0.5b), KODE_NB_LLAMA_CTX (4096).
# Any failure exits non-zero with the reason.
set -euo pipefail

TAG=llama_cpp_python
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=scripts/_local_server.sh
source "$HERE/_local_server.sh"
LCP_VERSION=0.3.36
SERVER_VENV="$CACHE/llama-cpp-python-venv-$LCP_VERSION"

find_wheel() { cached_wheel llama-cpp-python "$LCP_VERSION"; }

# scikit-build-core reads the job count from CMAKE_BUILD_PARALLEL_LEVEL.
build_wheel() {
    build_wheel_once llama-cpp-python "$LCP_VERSION" "12-17 min on 2 cores" \
        CMAKE_BUILD_PARALLEL_LEVEL="${LLAMA_CPP_BUILD_JOBS:-2}"
}

install_server() {
    local wheel
    with_lock wheel-lcp build_wheel
    wheel="$(find_wheel)"
    [[ -n "$wheel" ]] || die "no llama-cpp-python wheel in $WHEEL_DIR"
    if [[ -f "$SERVER_VENV/.ok" && "$SERVER_VENV/.ok" -nt "$wheel" ]]; then
        return 0
    fi
    rm -rf "$SERVER_VENV"
    "$PYTHON" -m venv "$SERVER_VENV"
    # the wheel itself, then its runtime and [server] dependencies from PyPI (binary wheels)
    "$SERVER_VENV/bin/python" -m pip install -q "${wheel}[server]" \
        || die "installing $wheel with its server extras failed"
    "$SERVER_VENV/bin/python" -c 'import llama_cpp.server.app' || die "llama_cpp.server does not import"
    touch "$SERVER_VENV/.ok"
    log "llama-cpp-python server installed in $SERVER_VENV"
}

prepare() {
    local pid rc=0
    bash "$HERE/llama_server.sh" model &
    pid=$!
    with_lock install-lcp install_server || rc=$?
    wait "$pid" || rc=$?
    ((rc == 0)) || die "preparing llama-cpp-python's server failed"
}

start_server() {
    local port logf pid model
    prepare
    model="$(bash "$HERE/llama_server.sh" model-path)"
    port="$(free_port)"
    logf="$(mktemp "${TMPDIR:-/tmp}/llama-cpp-python.XXXXXX.log")"
    "$SERVER_VENV/bin/python" -m llama_cpp.server --model "$model" --model_alias "$ALIAS" \
        --chat_format chatml-function-calling --host 127.0.0.1 --port "$port" \
        --n_ctx "$CTX" --n_threads 2 >"$logf" 2>&1 &
    pid=$!
    wait_answering "$pid" "http://127.0.0.1:$port/v1/models" "$logf" "llama-cpp-python's server"
    echo "http://127.0.0.1:$port/v1 $pid $logf"
}

cmd="${1:-}"
[[ $# -gt 0 ]] && shift
case "$cmd" in
    wheel) with_lock wheel-lcp build_wheel ;;
    install) with_lock install-lcp install_server ;;
    prepare) prepare ;;
    start) start_server ;;
    stop) stop_server "$@" ;;
    *) sed -n '2,17p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
