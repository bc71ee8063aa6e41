"""MkDocs hooks (mkdocs.yml ``hooks:``): the docstrings are written with Sphinx roles (``:class:`X```), which
Markdown renders as the role's name followed by the code; the role's name is dropped so that ``X`` remains, and
Sphinx's ``~`` (``:class:`~rpcwire.ConnectionClosed```: show the last name only) is applied."""

from __future__ import annotations

import re
from typing import Any

_ROLE = re.compile(r":(?:py:)?(?:attr|class|data|exc|func|meth|mod|obj):<code>(~)?([^<]*)</code>")


def _shown(match: re.Match[str]) -> str:
    text = match.group(2).rsplit(".", 1)[-1] if match.group(1) else match.group(2)
    return f"<code>{text}</code>"


def on_page_content(html: str, **kwargs: Any) -> str:
    return _ROLE.sub(_shown, html)
