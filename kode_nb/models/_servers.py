"""What is at a base URL: asked once per process, before the first request (internal).

:func:`identify` asks ``GET /models`` (at most :data:`IDENTIFY_TIMEOUT` seconds) and keeps the
answer per base URL for the life of the process, shared by every model object that talks to it:
the profile the listing names (``owned_by``: ``llamacpp`` -> llama-server, ``me`` ->
llama-cpp-python, ``vllm``) and the model ids it serves (checked against the id a request asks
for). A server that does not answer, or answers something else, is remembered as unknown
(``profile`` and ``model_ids`` ``None``): requests go on as before. A model object given its own
``http_client`` gets its own entry (tests serve different fakes at one URL).
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections.abc import Mapping
from dataclasses import dataclass

import httpx

from kode_nb.models._profiles import ServerProfile, profile_from_models

__all__ = ["IDENTIFY_TIMEOUT", "ServerInfo", "forget_servers", "identify", "known_server"]

logger = logging.getLogger("kode_nb.models")

IDENTIFY_TIMEOUT = 3.0
"""Seconds a server has to answer ``GET /models``."""


@dataclass(frozen=True, slots=True)
class ServerInfo:
    """What ``GET /models`` said about one base URL."""

    base_url: str
    """The base URL asked."""
    profile: ServerProfile | None
    """The profile the listing identifies, ``None``: not a well-known server."""
    model_ids: tuple[str, ...] | None
    """The ids it lists; ``None``: it did not answer with a listing."""

    def serves(self, model: str) -> bool:
        """Whether ``model`` is listed (always true when nothing is known). Ollama's tags:
        ``name`` is ``name:latest``."""
        if not self.model_ids:
            return True
        return model in self.model_ids or f"{model}:latest" in self.model_ids


_KNOWN: dict[str, ServerInfo] = {}
_BY_CLIENT: weakref.WeakKeyDictionary[httpx.AsyncClient, dict[str, ServerInfo]] = (
    weakref.WeakKeyDictionary()
)


def _table(client: httpx.AsyncClient | None) -> dict[str, ServerInfo]:
    if client is None:
        return _KNOWN
    return _BY_CLIENT.setdefault(client, {})


def known_server(base_url: str, client: httpx.AsyncClient | None = None) -> ServerInfo | None:
    """What is already known about ``base_url`` (``client``: a model's own client), else None."""
    if client is not None and client not in _BY_CLIENT:
        return None
    return _table(client).get(base_url)


def forget_servers() -> None:
    """Forget every identified server (the next request asks again)."""
    _KNOWN.clear()
    _BY_CLIENT.clear()


async def identify(
    client: httpx.AsyncClient,
    base_url: str,
    headers: Mapping[str, str],
    *,
    own_client: httpx.AsyncClient | None = None,
) -> ServerInfo:
    """What is at ``base_url``, asked once (``own_client``: the client a model was given, which
    keys its own entry); never raises."""
    table = _table(own_client)
    found = table.get(base_url)
    if found is not None:
        return found
    profile: ServerProfile | None = None
    ids: tuple[str, ...] | None = None
    try:
        response = await asyncio.wait_for(
            client.get(base_url + "/models", headers=dict(headers), timeout=IDENTIFY_TIMEOUT),
            IDENTIFY_TIMEOUT,
        )
        if response.status_code == 200:
            payload = response.json()
            profile = profile_from_models(payload)
            data = payload.get("data") if isinstance(payload, dict) else None
            if isinstance(data, list):
                ids = tuple(str(m["id"]) for m in data if isinstance(m, dict) and "id" in m)
    except Exception as exc:  # whatever the server does, it stays unknown
        logger.debug("GET %s/models did not identify the server: %r", base_url, exc)
    info = ServerInfo(base_url=base_url, profile=profile, model_ids=ids)
    table[base_url] = info
    return info
