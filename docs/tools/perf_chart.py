"""Draw docs/assets/transport-speed.svg from the first table of docs/performance.md (``make bench``'s figures).

    python docs/tools/perf_chart.py            # rewrites the SVG
    python docs/tools/perf_chart.py --check    # exits 1 if the committed SVG is not what the table gives

Standard library only: the SVG is written by hand (horizontal bars, log scale), so that the chart needs no
plotting package and the same table always gives the same bytes. tests/integrations/test_examples.py runs ``--check``.
"""

from __future__ import annotations

import math
import sys
from html import escape
from pathlib import Path

DOCS = Path(__file__).resolve().parent.parent
TABLE_PAGE = DOCS / "performance.md"
CHART = DOCS / "assets" / "transport-speed.svg"
HEADER = "| implementation | stream |"
# The columns drawn (header cell -> legend), each a bar per implementation, and their colours.
SERIES = [
    ("stream", "stream (in memory)", "#3f6fb5"),
    ("pipe ping-pong (p50 round trip)", "pipe ping-pong (p50 round trip)", "#e08a2c"),
    ("pipe pipelined", "pipe pipelined", "#4a9d5b"),
]
LOW, HIGH = 0.1, 1000.0  # the axis, µs (log scale)
LEFT, PLOT, BAR, GAP, GROUP_GAP, TOP = 250, 470, 8, 1, 10, 58


def read_table(text: str) -> tuple[list[str], list[list[str]]]:
    """The header cells and the rows of the Markdown table whose header starts with ``HEADER``."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(HEADER))
    header = [cell.strip() for cell in lines[start].strip("|").split("|")]
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip("|").split("|")])
    return header, rows


def number(cell: str) -> float | None:
    """``"**0.46**"`` -> 0.46, ``"2.82 ✗"`` -> 2.82, ``"can't"`` -> None."""
    text = cell.replace("*", "").replace("✗", "").replace(",", "").strip()
    try:
        return float(text)
    except ValueError:
        return None


def x_of(value: float) -> float:
    return LEFT + PLOT * (math.log10(value) - math.log10(LOW)) / (math.log10(HIGH) - math.log10(LOW))


def render(header: list[str], rows: list[list[str]]) -> str:
    columns = [header.index(name) for name, _, _ in SERIES]
    group = len(SERIES) * (BAR + GAP) + GROUP_GAP
    height = TOP + len(rows) * group + 40
    width = LEFT + PLOT + 60
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12">',
        f'<rect width="{width}" height="{height}" fill="#ffffff"/>',
        f'<text x="{LEFT}" y="18" font-size="14" font-weight="bold">µs per message, lower is better (log scale)</text>',
    ]
    legend_x: float = LEFT
    for _, label, colour in SERIES:
        out.append(f'<rect x="{legend_x:.1f}" y="28" width="10" height="10" fill="{colour}"/>')
        out.append(f'<text x="{legend_x + 14:.1f}" y="37" font-size="11">{escape(label)}</text>')
        legend_x += 20 + 6.2 * len(label)
    axis_bottom = TOP + len(rows) * group
    tick = LOW
    while tick <= HIGH * 1.0001:
        x = x_of(tick)
        out.append(f'<line x1="{x:.1f}" y1="{TOP - 6}" x2="{x:.1f}" y2="{axis_bottom}" stroke="#d0d0d0"/>')
        label = f"{tick:g}"
        out.append(f'<text x="{x:.1f}" y="{axis_bottom + 16}" text-anchor="middle" font-size="11">{label}</text>')
        tick *= 10
    out.append(f'<text x="{LEFT + PLOT / 2}" y="{axis_bottom + 32}" text-anchor="middle" font-size="11">µs</text>')
    for i, row in enumerate(rows):
        name = row[0].replace("*", "").replace("`", "")
        top = TOP + i * group
        weight = ' font-weight="bold"' if row[0].startswith("**") else ""
        middle = top + len(SERIES) * (BAR + GAP) / 2 + 4
        out.append(f'<text x="{LEFT - 8}" y="{middle:.1f}" text-anchor="end"{weight}>{escape(name)}</text>')
        for j, ((_, label, colour), column) in enumerate(zip(SERIES, columns, strict=True)):
            value = number(row[column])
            y = top + j * (BAR + GAP)
            if value is None:
                missing = f'<text x="{LEFT + 4}" y="{y + BAR - 1}" font-size="9" fill="#666">'
                out.append(f"{missing}no {escape(label)}</text>")
                continue
            end = x_of(min(max(value, LOW), HIGH))
            out.append(
                f'<rect x="{LEFT}" y="{y}" width="{end - LEFT:.1f}" height="{BAR}" fill="{colour}">'
                f"<title>{escape(name)}, {escape(label)}: {value:g} µs</title></rect>"
            )
            out.append(f'<text x="{end + 3:.1f}" y="{y + BAR - 1}" font-size="9" fill="#333">{value:g}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def main(argv: list[str]) -> int:
    svg = render(*read_table(TABLE_PAGE.read_text(encoding="utf-8")))
    if "--check" in argv:
        if CHART.read_text(encoding="utf-8") != svg:
            print(f"{CHART} is not what {TABLE_PAGE}'s table gives: run python {__file__}", file=sys.stderr)
            return 1
        return 0
    CHART.write_text(svg, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
