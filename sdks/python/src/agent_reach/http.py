"""JSON over HTTP for the SDK's clients (httpx).

Every failure becomes a ReachError: an error body keeps its code and name, an unreachable
service is 5002 (retryable), a timeout 1001. The HTTP status and ``Retry-After`` go into
``details``.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from typing import Any, Iterable

import httpx

from .errors import ReachError, error_from_body


@dataclass(frozen=True, slots=True)
class JsonResponse:
    status: int
    body: Any


class JsonHttp:
    """One pooled httpx client; ``aclose()`` when done. ``ssl_context``: a private CA (and client
    certificate) for https URLs; None verifies against the system trust store."""

    def __init__(self, timeout: float = 10.0, ssl_context: ssl.SSLContext | None = None) -> None:
        self.timeout = timeout
        self._client = httpx.AsyncClient(timeout=timeout, verify=ssl_context if ssl_context is not None else True)

    async def request(
        self,
        method: str,
        url: str,
        *,
        token: str | None = None,
        body: Any = None,
        headers: dict[str, str] | None = None,
        timeout: float | None = None,
        accept: Iterable[int] = (),
    ) -> JsonResponse:
        """``accept``: statuses besides 2xx that are answers rather than errors (e.g. 404 of a lookup)."""
        h = {"accept": "application/json", **(headers or {})}
        if token:
            h["authorization"] = f"Bearer {token}"
        try:
            res = await self._client.request(method, url, json=body, headers=h, timeout=timeout or self.timeout)
        except httpx.TimeoutException as err:
            raise ReachError("CONNECT_TIMEOUT", f"{method} {url} timed out", details={"url": url}) from err
        except httpx.HTTPError as err:
            raise ReachError("DEPENDENCY_UNAVAILABLE", f"{method} {url} failed: {err}", details={"url": url}) from err
        parsed: Any = None
        if res.content:
            try:
                parsed = res.json()
            except ValueError:
                parsed = res.text
        if not res.is_success and res.status_code not in accept:
            raise error_from_body(res.status_code, parsed, res.headers.get("retry-after"))
        return JsonResponse(res.status_code, parsed)

    async def aclose(self) -> None:
        await self._client.aclose()


def join_url(base: str, path: str) -> str:
    return base.rstrip("/") + path


def list_of(body: Any, *keys: str) -> list[Any]:
    """The items of a list response, whether the service answers ``[...]`` or ``{<key>: [...]}``."""
    if isinstance(body, list):
        return body
    if isinstance(body, dict):
        for k in (*keys, "items", "data"):
            if isinstance(body.get(k), list):
                return list(body[k])
    return []
