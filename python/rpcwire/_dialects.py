"""The two dialects of cancellation and progress rpcwire speaks: LSP's and MCP's method names, in one place."""

from __future__ import annotations

from typing import Literal

Dialect = Literal["lsp", "mcp"]
"""Which dialect a request's progress token, or a cancellation, is in."""

LSP_CANCEL = "$/cancelRequest"
"""LSP: ``{"id": ...}`` cancels that request (answered -32800 if it is still running)."""
MCP_CANCEL = "notifications/cancelled"
"""MCP: ``{"requestId": ..., "reason": ...}`` cancels that request (never answered)."""
LSP_PROGRESS = "$/progress"
"""LSP: ``{"token": workDoneToken, "value": {"kind": "begin" | "report" | "end", ...}}``."""
MCP_PROGRESS = "notifications/progress"
"""MCP: ``{"progressToken": ..., "progress": ..., "total"?: ..., "message"?: ...}``."""

CANCEL_ID_KEYS: dict[str, tuple[Dialect, str]] = {LSP_CANCEL: ("lsp", "id"), MCP_CANCEL: ("mcp", "requestId")}
"""A cancellation's method: its dialect and the member of its params that names the request it cancels."""
