"""MkDocs hooks (mkdocs.yml ``hooks:``): the docstrings are written with Sphinx roles (``:class:`X```), which
Markdown renders as the role's name followed by the code; the role's name is dropped so that ``X`` remains."""

from __future__ import annotations

import re
from typing import Any

_ROLE = re.compile(r":(?:py:)?(?:attr|class|data|exc|func|meth|mod|obj):(<code>)")


def on_page_content(html: str, **kwargs: Any) -> str:
    return _ROLE.sub(r"\1", html)
