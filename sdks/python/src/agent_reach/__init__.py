"""Agent-Reach agent SDK for Python (asyncio).

An agent registers what it can do, keeps a WebSocket to the dispatcher, and answers what it is
sent. ``AgentNode`` does the plumbing; ``ReachClient`` is the plain HTTP client of the message
API; ``agent_reach.testing`` runs agents against a local stack in pytest.
"""

from .backoff import RECONNECT_BACKOFF, Backoff, reconnect_delay
from .dedupe import DedupeCache, DedupeOptions, dedupe_key
from .direct import LocalReachProcess, shared_local_reach
from .env import ConnectionSettings, connection_from_env, ssl_context_from_files
from .errors import ERROR_CODES, AgentReplacedError, ErrorCodeInfo, NonRetryableError, ReachError, error_info
from .handler_context import AgentApi, Handler, HandlerContext
from .message import AgentDescriptor, CapabilitySpec, LoadReport, Message, Receipt, Registration
from .mode import REACH_MODES, ReachMode, mode_of
from .node import AgentNode
from .pending_requests import Reply
from .reach_client import ReachClient
from .registry_client import RegistryClient
from .session import SessionContext, context_from_headers, context_to_headers
from .token_expiry import refresh_delay, token_lifetime

__version__ = "0.1.0"

__all__ = [
    "LocalReachProcess",
    "REACH_MODES",
    "ReachMode",
    "mode_of",
    "shared_local_reach",
    "AgentApi",
    "AgentDescriptor",
    "AgentNode",
    "AgentReplacedError",
    "Backoff",
    "CapabilitySpec",
    "ConnectionSettings",
    "DedupeCache",
    "DedupeOptions",
    "ERROR_CODES",
    "ErrorCodeInfo",
    "Handler",
    "HandlerContext",
    "LoadReport",
    "Message",
    "NonRetryableError",
    "RECONNECT_BACKOFF",
    "ReachClient",
    "ReachError",
    "Receipt",
    "Registration",
    "RegistryClient",
    "Reply",
    "SessionContext",
    "connection_from_env",
    "ssl_context_from_files",
    "context_from_headers",
    "context_to_headers",
    "dedupe_key",
    "error_info",
    "reconnect_delay",
    "refresh_delay",
    "token_lifetime",
]
