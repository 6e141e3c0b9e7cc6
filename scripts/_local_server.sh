# Shared by scripts/llama_server.sh and scripts/llama_cpp_python.sh (sourced, never run): the
# cache location, one lock per step, a free loopback port, stopping a server by its pid.
# Callers set TAG (the log prefix) before sourcing.

PYTHON="${PYTHON:-python3}"
CACHE="${KODE_NB_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kode_nb}"
ALIAS="${KODE_NB_LLAMA_ALIAS:-qwen2.5-coder-0.5b}"
CTX="${KODE_NB_LLAMA_CTX:-4096}"
WHEEL_DIR="$CACHE/wheels"
# This CPU family advertises instructions a VM may not run (AMX): a -march=native build segfaults at
# the first inference, so native flags stay OFF and the common x86-64 extensions are named.
CMAKE_FLAGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_CURL=OFF"
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1

log() { printf '[%s] %s\n' "$TAG" "$*" >&2; }
die() { printf '%s.sh: %s\n' "$TAG" "$*" >&2; exit 1; }

# with_lock NAME COMMAND...: concurrent callers (two worktrees, a test run and a benchmark) share
# the cache: one lock per step.
with_lock() {
    local name="$1"
    shift
    mkdir -p "$CACHE/locks"
    (
        flock 9
        "$@"
    ) 9>"$CACHE/locks/$name.lock"
}

# cached_wheel PACKAGE VERSION: the path of PACKAGE==VERSION's wheel in the cache, or nothing.
cached_wheel() { compgen -G "$WHEEL_DIR/${1//-/_}-$2-*.whl" | head -n1 || true; }

# build_wheel_once PACKAGE VERSION HOW_LONG [VAR=VALUE...]: build PACKAGE==VERSION's wheel from
# its sdist (with CMAKE_FLAGS and the given variables, niced so the machine stays responsive)
# into the cache, unless it is there already; HOW_LONG goes into the log line.
build_wheel_once() {
    local package="$1" version="$2" how_long="$3" wheel t0 tmp
    shift 3
    wheel="$(cached_wheel "$package" "$version")"
    if [[ -n "$wheel" ]]; then
        log "wheel cached: $wheel"
        return 0
    fi
    mkdir -p "$WHEEL_DIR"
    tmp="$(mktemp -d "$WHEEL_DIR/.build-$package.XXXXXX")"
    t0=$(date +%s)
    log "building $package==$version from source; $how_long (log: $tmp/build.log)"
    if ! env CMAKE_ARGS="$CMAKE_FLAGS" "$@" nice -n 10 "$PYTHON" -m pip wheel --no-deps \
        --no-binary "$package" -w "$tmp" "$package==$version" >"$tmp/build.log" 2>&1; then
        tail -n 40 "$tmp/build.log" >&2
        die "building $package failed (log above; full log in $tmp/build.log)"
    fi
    mv "$tmp"/"${package//-/_}"-*.whl "$WHEEL_DIR/"
    rm -rf "$tmp"
    log "wheel built in $(($(date +%s) - t0)) s: $(cached_wheel "$package" "$version")"
}

free_port() {
    "$PYTHON" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# wait_answering PID URL LOGFILE WHAT: until URL answers 200 (120 s), or the process exits.
wait_answering() {
    local pid="$1" url="$2" logf="$3" what="$4"
    for _ in $(seq 1 240); do
        if ! kill -0 "$pid" 2>/dev/null; then
            tail -n 30 "$logf" >&2
            die "$what exited while starting (log above)"
        fi
        if "$PYTHON" -c "import urllib.request,sys; sys.exit(0 if urllib.request.urlopen('$url', timeout=2).status == 200 else 1)" 2>/dev/null; then
            return 0
        fi
        sleep 0.5
    done
    kill "$pid" 2>/dev/null || true
    die "$what did not answer $url within 120 s (log: $logf)"
}

stop_server() {
    local pid="${1:?usage: stop PID}"
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
}
