#!/usr/bin/env bash
# Developer entry points for kode_nb. Works on a fresh machine (only python3 >= 3.10 needed) and is
# fast when everything is already installed.
#
#   bash scripts/dev.sh lab   [jupyter lab args...]  install, then JupyterLab on the quickstart notebook
#   bash scripts/dev.sh test  [pytest args...]       install, then ruff (lint, format), mypy, pytest, the docs
#                                                    build (strict), nbval (strict);
#                                                    the kernel tests also run on ipykernel 6, from a
#                                                    second venv .venv-ipykernel6; the live-model
#                                                    tests run against llama-server, built and
#                                                    cached by scripts/llama_server.sh
#   bash scripts/dev.sh docs  [mkdocs build args...] install, then build the documentation site into site/
#                                                    (strict: warnings and broken links fail)
#   bash scripts/dev.sh bench [run.py args...]       separate .venv-bench with '.[bench]', run benchmarks
#   bash scripts/dev.sh bench --compare REF [...]    T1, T7, T6 of this tree and of commit REF, alternating
#   bash scripts/dev.sh live  [pytest args...]       the live-model tests against llama-cpp-python's
#                                                    server (opt-in: its first build takes 12-17 min,
#                                                    then cached; KODE_NB_LIVE_SERVER=llama-server
#                                                    runs them against llama-server instead)
#   bash scripts/dev.sh install                      only create/update .venv (and build labextension/)
#
# Environment: PYTHON (default python3) builds the venvs; KODE_NB_FORCE_INSTALL=1 reinstalls even
# when pyproject.toml has not changed. `test` exports KODE_NB_EXTRA_KERNELS (kernelspec names, comma
# separated) for tests/kernel: the kernels to run the approval and stream tests on besides python3.
# KODE_NB_TEST_LOAD=N makes `test` run its checks beside N busy processes (one CPU hog each, started
# before the checks and stopped when they end): the suite must hold on a busy machine.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

PYTHON="${PYTHON:-python3}"
VENV="$ROOT/.venv"
BENCH_VENV="$ROOT/.venv-bench"
IPYKERNEL6_VENV="$ROOT/.venv-ipykernel6"
IPYKERNEL6_KERNEL=kode-ipykernel6
PHOENIX_VENV="$ROOT/.venv-phoenix"
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1
export PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 # the browser is Debian's chromium, never a download
export JUPYTER_PLATFORM_DIRS=1 # silences jupyter_core's platformdirs DeprecationWarning

log() { printf '\033[1m==> %s\033[0m\n' "$*" >&2; }
now_ns() { date +%s%N; }
# since NS: seconds elapsed since the now_ns value NS, e.g. "12.3 s"
since() { awk "BEGIN{printf \"%.1f s\", ($(now_ns) - $1) / 1e9}"; }

# timed WHAT COMMAND...: say what is about to happen, run COMMAND, then say how long it took (or
# that it failed). Each setup step goes through it, so a first run says what it is doing.
timed() {
    local what="$1" start rc=0
    shift
    log "$what"
    start=$(now_ns)
    "$@" || rc=$?
    if ((rc)); then
        log "$what: FAILED (exit $rc) after $(since "$start")"
    else
        log "$what: done in $(since "$start")"
    fi
    return "$rc"
}
die() { printf 'dev.sh: %s\n' "$*" >&2; exit 2; }

# ------------------------------------------------------------------------------------------ install

# ensure_venv VENV EXTRAS [REQUIREMENT...]: create VENV if missing and `pip install -e ".[EXTRAS]"`
# (`-e .` when EXTRAS is empty) and the REQUIREMENTs into it, unless the stamp file says this exact
# pyproject.toml (and extras and requirements) is already installed.
ensure_venv() {
    local venv="$1" extras="$2" stamp want target=.
    shift 2
    if [[ -n "$extras" ]]; then target=".[$extras]"; fi
    stamp="$venv/.kode_nb-install-stamp"
    want="$(cat pyproject.toml <(echo "extras=$extras") <(printf 'requirement=%s\n' "$@") \
        | sha256sum | cut -d' ' -f1)"
    if [[ ! -x "$venv/bin/python" ]]; then
        command -v "$PYTHON" >/dev/null || die "no '$PYTHON' on PATH (set PYTHON=/path/to/python3.10+)"
        "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 10))' \
            || die "'$PYTHON' is older than Python 3.10"
        timed "creating ${venv#"$ROOT"/} with $("$PYTHON" --version 2>&1)" \
            "$PYTHON" -m venv "$venv" || return 1
    fi
    if [[ "${KODE_NB_FORCE_INSTALL:-0}" != 1 && -f "$stamp" && "$(cat "$stamp")" == "$want" ]] \
        && (cd / && "$venv/bin/python" -c 'import kode_nb' 2>/dev/null); then
        log "${venv#"$ROOT"/} is up to date (kode_nb${extras:+[$extras]})"
        return 0
    fi
    rm -f "$stamp"
    # The build hook (hatch-jupyter-builder) builds labextension/ only on a fresh clone; after
    # that ensure_labextension rebuilds it when its sources change. A symlinked share/ entry is
    # removed first so pip never writes or deletes through it.
    local skip_npm=0 link="$venv/share/jupyter/labextensions/kode-nb"
    [[ -f kode_nb/labextension/package.json ]] && skip_npm=1
    if [[ -L "$link" ]]; then rm -f "$link" || return 1; fi
    # (explicit `|| return`: `set -e` is off inside a function called from `step ... ||`)
    # pip's own lines (one per package, download progress on a terminal) stay visible: the first
    # install takes minutes.
    local why="pyproject.toml changed or first run"
    ((skip_npm)) || why="first run: this takes minutes and builds the JupyterLab extension too"
    timed "installing $(printf '%s ' "kode_nb${extras:+[$extras]}" "$@")into ${venv#"$ROOT"/} ($why)" \
        env HATCH_JUPYTER_BUILDER_SKIP_NPM=$skip_npm PATH="$venv/bin:$PATH" \
        "$venv/bin/python" -m pip install --progress-bar on -e "$target" "$@" || return 1
    if [[ $skip_npm == 0 && -f kode_nb/labextension/static/style.js ]]; then
        # the hook just built these very sources: no second build in ensure_labextension
        labextension_hash >"$venv/.kode_nb-labextension-stamp" || return 1
    fi

    echo "$want" >"$stamp" || return 1
}

# labextension_hash: what the built JupyterLab extension depends on (its npm manifest, lock file,
# TypeScript sources and styles).
labextension_hash() {
    (cd labextension && find package.json yarn.lock .yarnrc.yml tsconfig.json src style -type f \
        -print0 | sort -z | xargs -0 sha256sum) | sha256sum | cut -d' ' -f1
}

# ensure_labextension VENV: build labextension/ into kode_nb/labextension with VENV's jlpm when
# its sources changed (a cold `jlpm install` takes ~2 min, later builds ~15 s), and let VENV's
# JupyterLab load it from there: share/jupyter/labextensions/kode-nb -> kode_nb/labextension
# (as `jupyter labextension develop` does).
ensure_labextension() {
    local venv="$1" stamp want link
    stamp="$venv/.kode_nb-labextension-stamp"
    link="$venv/share/jupyter/labextensions/kode-nb"
    want="$(labextension_hash)" || return 1
    if [[ ! -f kode_nb/labextension/static/style.js || ! -f "$stamp" \
        || "$(cat "$stamp")" != "$want" ]]; then
        rm -f "$stamp"
        timed "building the JupyterLab extension (labextension/ changed or first run)" \
            bash -c 'cd labextension && export PATH="$1/bin:$PATH" && jlpm install && jlpm build:prod' \
            _ "$venv" || return 1
        echo "$want" >"$stamp" || return 1
    fi
    if [[ "$(readlink "$link" 2>/dev/null)" != "$ROOT/kode_nb/labextension" ]]; then
        mkdir -p "$(dirname "$link")" && rm -rf "$link" \
            && ln -s "$ROOT/kode_nb/labextension" "$link" || return 1
    fi
}

# ensure_chromium: the browser tests need Debian's chromium at /usr/bin/chromium. Installed with
# apt when missing and we are root (as on CI); otherwise say how to get it.
ensure_chromium() {
    [[ -x /usr/bin/chromium ]] && return 0
    if [[ "$(id -u)" != 0 ]]; then
        echo "dev.sh: /usr/bin/chromium is missing; install it: sudo apt-get install -y chromium" >&2
        return 1
    fi
    timed "installing Debian's chromium for the browser tests (apt-get)" \
        env DEBIAN_FRONTEND=noninteractive bash -c \
        'apt-get update -qq && apt-get install -y -qq --no-install-recommends chromium >/dev/null' \
        || return 1
}

# ensure_ipykernel6: the notebook layer must work on ipykernel 6 as well as 7 (the dev venv's). A
# second venv with kode_nb and ipykernel 6, registered as the kernelspec `kode-ipykernel6` in the
# Jupyter data dir (call after use_jupyter_state) and named in KODE_NB_EXTRA_KERNELS for the tests.
ensure_ipykernel6() {
    ensure_venv "$IPYKERNEL6_VENV" "" "ipykernel>=6.29,<7" || return 1
    register_kernel "$IPYKERNEL6_KERNEL" "Python 3 (kode_nb, ipykernel 6)" \
        "$IPYKERNEL6_VENV/bin/python" || return 1
    export KODE_NB_EXTRA_KERNELS="$IPYKERNEL6_KERNEL"
}

# ensure_phoenix: a real OpenTelemetry collector for the OTLP export tests (Arize Phoenix, about
# 850 MB, so in a venv of its own), named in KODE_NB_PHOENIX_PYTHON (tests/interop/test_interop_otlp.py).
ensure_phoenix() {
    ensure_venv "$PHOENIX_VENV" "" "arize-phoenix>=20.26" || return 1
    export KODE_NB_PHOENIX_PYTHON="$PHOENIX_VENV/bin/python"
}

# register_kernel NAME DISPLAY_NAME PYTHON: a kernelspec NAME in $JUPYTER_DATA_DIR/kernels whose
# kernel is PYTHON's ipykernel.
register_kernel() {
    local dir="$JUPYTER_DATA_DIR/kernels/$1"
    mkdir -p "$dir" || return 1
    "$3" -c 'import json, sys
path, display_name, python = sys.argv[1:]
argv = [python, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
spec = {"argv": argv, "display_name": display_name, "language": "python"}
with open(path, "w") as f:
    json.dump(spec, f, indent=1)' "$dir/kernel.json" "$2" "$3"
}

# ---------------------------------------------------------------------------- isolated Jupyter state

# use_jupyter_state DIR: keep every bit of Jupyter/IPython state inside DIR, so nothing depends on
# (or writes to) ~/.jupyter, ~/.ipython or ~/.local/share/jupyter.
use_jupyter_state() {
    local dir="$1"
    mkdir -p "$dir"
    export JUPYTER_CONFIG_DIR="$dir/config"
    export JUPYTER_DATA_DIR="$dir/data"
    export JUPYTER_RUNTIME_DIR="$dir/runtime"
    export IPYTHONDIR="$dir/ipython"
    export MPLCONFIGDIR="$dir/matplotlib"
    export JUPYTERLAB_WORKSPACES_DIR="$dir/workspaces"
    export JUPYTERLAB_SETTINGS_DIR="$dir/settings"
    unset JUPYTER_PATH JUPYTER_CONFIG_PATH
}

# quiet_lab_news: JupyterLab asks on first start whether to fetch news from jupyter.org, which this
# offline set-up cannot reach anyway. Answer "no" in the user settings unless the user already has.
quiet_lab_news() {
    local file="$JUPYTERLAB_SETTINGS_DIR/@jupyterlab/apputils-extension/notification.jupyterlab-settings"
    [[ -e "$file" ]] && return 0
    mkdir -p "$(dirname "$file")" || return 1
    printf '{\n    "fetchNews": "false",\n    "checkForUpdates": false\n}\n' >"$file"
}

# ---------------------------------------------------------------------------------------- commands

QUICKSTART=notebooks/01-quickstart.ipynb

# announce_lab PID: once the Jupyter server PID has written its runtime file (after its own banner),
# print the quickstart notebook's URL with the server's token as the last line.
announce_lab() {
    local info="$JUPYTER_RUNTIME_DIR/jpserver-$1.json" i
    for ((i = 0; i < 1200; i++)); do
        kill -0 "$1" 2>/dev/null || return 0
        if [[ -s "$info" ]]; then
            sleep 1 # let JupyterLab finish printing its banner first
            "$VENV/bin/python" -c 'import json, sys
info, notebook = json.load(open(sys.argv[1])), sys.argv[2]
url = info["url"] + "lab/tree/" + notebook + "?token=" + info["token"]
print("\033[1m==> JupyterLab is serving " + notebook + ": open " + url + "  (Ctrl-C stops it)\033[0m")' \
                "$info" "$QUICKSTART" >&2
            return 0
        fi
        sleep 0.5
    done
}

cmd_lab() {
    local t0
    t0=$(now_ns)
    ensure_venv "$VENV" dev
    ensure_labextension "$VENV"
    use_jupyter_state "$VENV/jupyter-state"
    quiet_lab_news
    local args=(--ip=127.0.0.1 "--ServerApp.root_dir=$ROOT" "--LabApp.default_url=/lab/tree/$QUICKSTART")
    [[ "$(id -u)" == 0 ]] && args+=(--allow-root)
    log "set-up done in $(since "$t0"); starting JupyterLab (its log follows, the URL to open comes last)"
    announce_lab $$ & # the same pid as JupyterLab's after exec
    exec "$VENV/bin/jupyter" lab "${args[@]}" "$@"
}

# start_live_server: build (cached outside the repository) and start llama-server on 127.0.0.1
# with a small model, for tests/kernel/test_kernel_live_model.py (KODE_NB_LIVE_URL); stopped by
# stop_live_server. A failure fails this step, and the live tests then fail too (never skip).
start_live_server() {
    local line
    line="$(bash scripts/llama_server.sh start)" || return 1
    read -r KODE_NB_LIVE_URL LIVE_SERVER_PID LIVE_SERVER_LOG <<<"$line"
    export KODE_NB_LIVE_URL
    log "llama-server at $KODE_NB_LIVE_URL (pid $LIVE_SERVER_PID, log $LIVE_SERVER_LOG)"
}
stop_live_server() {
    [[ -n "${LIVE_SERVER_PID:-}" ]] && bash scripts/llama_server.sh stop "$LIVE_SERVER_PID"
    LIVE_SERVER_PID=""
}

# start_load N: N busy processes (CPU hogs) beside the checks, bounded to 3 hours; stop_load ends
# them. For proving that the suite holds under load (KODE_NB_TEST_LOAD).
LOAD_PIDS=()
start_load() {
    local n="$1" i
    [[ "$n" =~ ^[0-9]+$ ]] || die "KODE_NB_TEST_LOAD must be a number of busy processes, got '$n'"
    for ((i = 0; i < n; i++)); do
        timeout 10800 sh -c 'while :; do :; done' &
        LOAD_PIDS+=("$!")
    done
    ((n == 0)) || log "running the checks beside $n busy processes (KODE_NB_TEST_LOAD)"
}
stop_load() {
    local pid
    for pid in "${LOAD_PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    LOAD_PIDS=()
}

STEPS=()
RESULTS=()
TIMES=()

# step NAME COMMAND...: run one check, record PASS/FAIL and its duration, never abort the others.
step() {
    local name="$1" start end rc=0
    shift
    log "$name: $*"
    start=$(date +%s%N)
    "$@" || rc=$?
    end=$(date +%s%N)
    STEPS+=("$name")
    RESULTS+=("$([[ $rc == 0 ]] && echo PASS || echo "FAIL (exit $rc)")")
    TIMES+=("$(( (end - start) / 1000000 ))")
}

cmd_test() {
    local t0 scratch failed=0 i
    t0=$(date +%s%N)
    step install ensure_venv "$VENV" dev
    if [[ "${RESULTS[0]}" != PASS ]]; then
        echo "dev.sh test: installing kode_nb[dev] failed; nothing was checked" >&2
        exit 1
    fi
    step labext ensure_labextension "$VENV"

    # Browser tests drive a real JupyterLab in Debian's chromium (never a downloaded browser).
    step chromium ensure_chromium
    scratch="$(mktemp -d "${TMPDIR:-/tmp}/kode_nb-test.XXXXXX")"
    # shellcheck disable=SC2064
    trap "rm -rf '$scratch'; stop_live_server; stop_load" EXIT
    start_load "${KODE_NB_TEST_LOAD:-0}"
    use_jupyter_state "$scratch"
    export PATH="$VENV/bin:$PATH"
    # The kernel tests run on ipykernel 6 too (tests/kernel/conftest.py reads KODE_NB_EXTRA_KERNELS).
    step ipykernel6 ensure_ipykernel6
    step phoenix ensure_phoenix  # the OTLP export tests' collector

    step ruff "$VENV/bin/ruff" check
    step format "$VENV/bin/ruff" format --check
    step mypy "$VENV/bin/mypy"
    step deptry "$VENV/bin/deptry" kode_nb  # everything imported is declared, nothing unused
    step js node --check kode_nb/ui/static/stream.js  # the widget ESM parses
    # The extension's TypeScript: tsc --noEmit (strict), eslint, prettier; then node --test on its
    # logic and, in happy-dom, its DOM code (labextension/test/).
    step ts-lint bash -c 'cd labextension && jlpm lint'
    step ts-test bash -c 'cd labextension && jlpm test'
    export KODE_NB_LIVE_REQUIRED=1 # the live tests fail, not skip, without a server
    # a round-trip case passes with a majority of its 5 tries (the 0.5B model's noise is not a
    # regression); each case's count is printed after pytest
    export KODE_NB_LIVE_MIN_OK="${KODE_NB_LIVE_MIN_OK:-3}"
    export KODE_NB_LIVE_REPORT="$scratch/live-report.jsonl"
    # kode_nb's model in pydantic-ai, the Agents SDK and LangChain's own loop (LangGraph is no
    # dev dependency), tests/interop/test_interop_live_models.py: 2 of 3 tries a case, 150 s a
    # try at most, a case's tries stopping once it has passed or cannot pass (172 s, load 2)
    export KODE_NB_LIVE_FRAMEWORKS=1 KODE_NB_LIVE_FRAMEWORK_TRIES=3
    export KODE_NB_LIVE_FRAMEWORK_TRY_SECONDS=150 KODE_NB_LIVE_FRAMEWORK_GATE=1
    step llama-server start_live_server
    step pytest "$VENV/bin/python" -m pytest -p no:cacheprovider "$@"
    stop_live_server
    [[ -f "$KODE_NB_LIVE_REPORT" ]] && log "round trips on llama-server:" && cat "$KODE_NB_LIVE_REPORT"
    # the documentation site, strictly (broken links and anchors fail), into the scratch dir;
    # never --quiet: it drops the warnings that --strict counts, and the build passes
    step docs env NO_MKDOCS_2_WARNING=1 "$VENV/bin/mkdocs" build --strict --site-dir "$scratch/site"
    local notebooks=(notebooks/*.ipynb)
    if [[ -e "${notebooks[0]}" ]]; then
        step nbval "$VENV/bin/python" -m pytest -p no:cacheprovider --nbval --nbval-current-env \
            --nbval-sanitize-with notebooks/nbval-sanitize.cfg "${notebooks[@]}"
    fi

    printf '\n\033[1m== kode_nb test summary ==\033[0m\n'
    for i in "${!STEPS[@]}"; do
        printf '  %-10s %-16s %6.1f s\n' "${STEPS[$i]}" "${RESULTS[$i]}" \
            "$(awk "BEGIN{print ${TIMES[$i]}/1000}")"
        [[ "${RESULTS[$i]}" == PASS ]] || failed=$((failed + 1))
    done
    printf '  total %.1f s: ' "$(awk "BEGIN{print ($(date +%s%N) - $t0)/1e9}")"
    if ((failed)); then
        printf '\033[31m%d step(s) FAILED\033[0m\n' "$failed"
        exit 1
    fi
    printf '\033[32mall passed\033[0m\n'
}

# cmd_docs: build the documentation site (mkdocs.yml, docs/) into site/; strict: a warning (a
# broken link or anchor, a docstring griffe cannot read) fails the build. (NO_MKDOCS_2_WARNING:
# Material's notice about MkDocs 2.0, which this site does not use; see docs/contributing.md.)
cmd_docs() {
    ensure_venv "$VENV" dev
    local t0
    t0=$(now_ns)
    NO_MKDOCS_2_WARNING=1 "$VENV/bin/mkdocs" build --strict --clean "$@"
    log "documentation site built in $(since "$t0"): $ROOT/site/index.html"
}

cmd_bench() {
    ensure_venv "$BENCH_VENV" bench
    [[ -f benchmarks/run.py ]] || die "benchmarks/run.py does not exist yet"
    if [[ "${1:-}" == --compare ]]; then
        # this working tree against commit REF (a temporary git worktree), alternating in one window
        [[ -n "${2:-}" ]] || die "bench --compare needs a commit: bench --compare REF"
        shift
        exec "$BENCH_VENV/bin/python" benchmarks/compare.py "$@"
    fi
    exec "$BENCH_VENV/bin/python" benchmarks/run.py "$@"
}

# cmd_live: tests/kernel/test_kernel_live_model.py against a real local server started here on
# 127.0.0.1 (llama-cpp-python's unless KODE_NB_LIVE_SERVER names llama-server); each round-trip
# case's counts go to live-report.jsonl in the scratch dir, printed at the end.
cmd_live() {
    local server="${KODE_NB_LIVE_SERVER:-llama-cpp-python}" script scratch line rc=0
    case "$server" in
        llama-cpp-python) script=scripts/llama_cpp_python.sh ;;
        llama-server) script=scripts/llama_server.sh ;;
        *) die "KODE_NB_LIVE_SERVER must be llama-cpp-python or llama-server, got '$server'" ;;
    esac
    ensure_venv "$VENV" dev || exit 1
    scratch="$(mktemp -d "${TMPDIR:-/tmp}/kode_nb-live.XXXXXX")"
    use_jupyter_state "$scratch"
    export PATH="$VENV/bin:$PATH"
    line="$(timed "starting $server (built and cached on first use)" bash "$script" start)" || exit 1
    read -r KODE_NB_LIVE_URL LIVE_SERVER_PID LIVE_SERVER_LOG <<<"$line"
    # shellcheck disable=SC2064
    trap "bash '$script' stop '$LIVE_SERVER_PID'" EXIT
    log "$server at $KODE_NB_LIVE_URL (pid $LIVE_SERVER_PID, log $LIVE_SERVER_LOG)"
    export KODE_NB_LIVE_URL KODE_NB_LIVE_SERVER="$server" KODE_NB_LIVE_REQUIRED=1
    export KODE_NB_LIVE_REPORT="$scratch/live-report.jsonl"
    "$VENV/bin/python" -m pytest -p no:cacheprovider tests/kernel/test_kernel_live_model.py "$@" \
        || rc=$?
    [[ -f "$KODE_NB_LIVE_REPORT" ]] && log "round trips on $server:" && cat "$KODE_NB_LIVE_REPORT"
    return "$rc"
}

usage() { sed -n '2,20p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }

cmd="${1:-}"
[[ $# -gt 0 ]] && shift
case "$cmd" in
    lab) cmd_lab "$@" ;;
    test) cmd_test "$@" ;;
    bench) cmd_bench "$@" ;;
    live) cmd_live "$@" ;;
    docs) cmd_docs "$@" ;;
    install)
        t0=$(now_ns)
        ensure_venv "$VENV" dev || exit 1
        ensure_labextension "$VENV" || exit 1
        log "ready in $(since "$t0"): .venv has kode_nb[dev] and the built JupyterLab extension"
        ;;
    -h | --help | help) usage ;;
    *) usage >&2; exit 2 ;;
esac
