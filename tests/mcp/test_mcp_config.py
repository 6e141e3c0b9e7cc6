"""MCP server configs and the TOML config file (no SDK needed to read them)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from kode_nb import ConfigurationError
from kode_nb.mcp import McpServerConfig, load_config, parse_config

GOOD = """
[servers.files]
command = ["npx", "-y", "@modelcontextprotocol/server-filesystem", "/data"]
env = { LOG_LEVEL = "info", TOKEN = "${KODE_TEST_TOKEN}" }
cwd = "/tmp"
timeout = 60

[servers.search]
url = "http://127.0.0.1:8931/mcp"
headers = { Authorization = "Bearer ${KODE_TEST_TOKEN}" }
enabled = false

[servers.local]
command = "python -m my_server"
args = ["--verbose"]
connect_timeout = 5
"""


def test_load_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KODE_TEST_TOKEN", "s3cret")
    path = tmp_path / "mcp.toml"
    path.write_text(GOOD, encoding="utf-8")
    configs = load_config(path)
    assert list(configs) == ["files", "search", "local"]
    files, search, local = configs.values()
    assert files.command == ("npx", "-y", "@modelcontextprotocol/server-filesystem", "/data")
    assert files.env == {"LOG_LEVEL": "info", "TOKEN": "s3cret"}
    assert (files.cwd, files.timeout, files.enabled, files.transport) == ("/tmp", 60, True, "stdio")
    assert search.url == "http://127.0.0.1:8931/mcp"
    assert search.transport == "http"
    assert search.headers == {"Authorization": "Bearer s3cret"}
    assert not search.enabled
    assert local.command == ("python", "-m", "my_server", "--verbose")
    assert local.connect_timeout == 5
    assert local.describe() == "python -m my_server --verbose"
    assert search.describe() == "http://127.0.0.1:8931/mcp"


def test_config_file_errors(tmp_path: Path) -> None:
    missing = tmp_path / "none.toml"
    with pytest.raises(ConfigurationError, match="does not exist"):
        load_config(missing)
    broken = tmp_path / "broken.toml"
    broken.write_text("[servers.x\ncommand = 1", encoding="utf-8")
    with pytest.raises(ConfigurationError, match=r"broken\.toml.*not valid TOML"):
        load_config(broken)
    bad = tmp_path / "bad.toml"
    bad.write_text('[servers.x]\ncommand = ["a"]\ncolor = "red"\n', encoding="utf-8")
    with pytest.raises(
        ConfigurationError, match=r"bad\.toml: \[servers\.x\]: unknown key\(s\) 'color'"
    ):
        load_config(bad)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"server": {}}, "unknown top-level key"),
        ({"servers": []}, "must be a table"),
        ({"servers": {"x": 3}}, r"\[servers\.x\] must be a table"),
        ({"servers": {"x": {}}}, "give either command"),
        ({"servers": {"x": {"command": ["a"], "url": "http://h/mcp"}}}, "not both"),
        ({"servers": {"x": {"command": ["a"], "args": "b"}}}, "args must be a list"),
        ({"servers": {"x": {"args": ["b"]}}}, "args needs a command"),
        ({"servers": {"x": {"command": [1]}}}, "command must hold non-empty strings"),
        ({"servers": {"x": {"command": 7}}}, "command must be a list"),
        ({"servers": {"x": {"url": "ftp://h"}}}, "must start with http"),
        (
            {"servers": {"x": {"url": "http://h/mcp", "env": {"A": "b"}}}},
            "env and cwd apply to stdio",
        ),
        ({"servers": {"x": {"command": ["a"], "headers": {"A": "b"}}}}, "headers apply to HTTP"),
        ({"servers": {"x": {"command": ["a"], "env": {"A": 1}}}}, "env must map strings"),
        ({"servers": {"x": {"command": ["a"], "timeout": 0}}}, "timeout must be a positive"),
        ({"servers": {"x": {"command": ["a"], "connect_timeout": True}}}, "connect_timeout must"),
        ({"servers": {"x": {"command": ["a"], "enabled": "yes"}}}, "enabled must be true or false"),
        ({"servers": {"x": {"command": ["a"], "cwd": 3}}}, "cwd must be a path"),
        ({"servers": {"no spaces": {"command": ["a"]}}}, "bad MCP server name"),
        (
            {"servers": {"x": {"command": ["a"], "env": {"T": "${KODE_UNSET_VAR}"}}}},
            "KODE_UNSET_VAR.*not set",
        ),
    ],
)
def test_bad_configs_name_the_problem(data: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        parse_config(data, source="test.toml", environ={})


def test_parse_config_uses_the_given_environment() -> None:
    configs = parse_config(
        {"servers": {"x": {"url": "http://h/mcp", "headers": {"K": "${A}-${B}"}}}},
        environ={"A": "1", "B": "2"},
    )
    assert configs["x"].headers == {"K": "1-2"}
    assert parse_config({}) == {}


def test_config_objects_validate_and_normalize() -> None:
    config = McpServerConfig(name="x", command=["python", "s.py"])  # type: ignore[arg-type]
    assert config.command == ("python", "s.py")
    assert config.env == {}
    assert config.timeout is None
    with pytest.raises(ConfigurationError, match="bad MCP server name"):
        McpServerConfig(name="", command=("a",))
    with pytest.raises(ConfigurationError, match="timeout must be a positive number"):
        McpServerConfig(name="x", command=("a",), timeout=float("inf"))


def test_reading_config_does_not_import_the_sdk() -> None:
    code = "import kode_nb.mcp, sys; kode_nb.mcp.parse_config({}); print('mcp' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
    code = "import kode_nb, sys; kode_nb.default_registry(); print('mcp' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_a_deeply_nested_config_file_is_a_configuration_error(tmp_path: Path) -> None:
    from kode_nb import ConfigurationError

    deep = tmp_path / "deep.toml"
    deep.write_text("a = " + "[" * 10_000 + "]" * 10_000 + "\n")
    with pytest.raises(ConfigurationError, match="nests values too deeply"):
        load_config(deep)
