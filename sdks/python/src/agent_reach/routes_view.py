"""The node's local view of what it can reach (R-G6), kept from the dispatcher's ``routes``
frames over the node's own socket (docs/protocol.md, "Pre-flight view"): a pre-flight check is a
map lookup, no network round trip. A name the view does not hold has no verdict: it may belong to
an agent that registered a moment ago, so the node asks the registry about it instead. Same as
the TypeScript SDK's RoutesView."""

from __future__ import annotations

from typing import Literal

from .errors import ReachError, error_info, is_known_code
from .frames import Routes

RouteKind = Literal["capability", "topic"]

_WHY = {
    2001: "no live agent offers {kind} {name}",
    2003: "every agent that offers {kind} {name} is in a security domain no grant opens to this agent",
    3001: "every agent that offers {kind} {name} has an open circuit",
}


def _base(name: str) -> str:
    at = name.rfind("@")
    return name[:at] if at > 0 else name


class RoutesView:
    def __init__(self) -> None:
        self._maps: dict[RouteKind, dict[str, int]] = {"capability": {}, "topic": {}}
        self.ready = False

    def reset(self) -> None:
        """Forgets the view: the connection it came on is gone, and what it said may be stale by
        the time a new one sends its full view. Until then there is no verdict — a view that is not
        complete never refuses."""
        self._maps = {"capability": {}, "topic": {}}
        self.ready = False

    def apply(self, frame: Routes) -> None:
        if frame.full:
            self._maps = {"capability": {}, "topic": {}}
            self.ready = True
        for kind, entries in (("capability", frame.capabilities), ("topic", frame.topics)):
            target = self._maps[kind]  # type: ignore[index]
            for name, code in entries.items():
                if code is None:
                    target.pop(name, None)
                else:
                    target[name] = code

    def verdict(self, kind: RouteKind, name: str) -> int | None:
        """0 when a message would be routed, else its refusal code; None before the first view and for a name it does not hold."""
        if not self.ready:
            return None
        return self._maps[kind].get(_base(name))

    def refusal(self, kind: RouteKind, name: str, *, may_wait: bool = False) -> ReachError | None:
        """The error a refused pre-flight raises, or None when the message may go (or there is no
        verdict). ``may_wait``: the message has an expire_at, so the router parks it while nobody can
        take it (2001, 3001) instead of refusing it; only a domain refusal (2003) is final for it too."""
        code = self.verdict(kind, name)
        if code is None or code == 0:
            return None
        if may_wait and code != 2003:
            return None
        error_name = error_info(code).name if is_known_code(code) else "NO_ROUTE"
        why = _WHY.get(code, "{kind} {name} is refused").format(kind=kind, name=name)
        return ReachError(error_name, f"pre-flight: {why}", details={kind: name, "preflight": "local"})
