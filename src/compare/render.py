"""The report as Markdown (plots linked under plots/) and as one self-contained HTML page (plots embedded as base64
data URIs), from its sections."""

from __future__ import annotations

import base64
import html
import re
from typing import Any

import pandas as pd

from .sections import Section, absent_line
from .summary import BOTTOM_TITLE, TITLE as SUMMARY_TITLE


def absent_html(section: Section) -> str:
    """The studies not in these runs as a collapsed list: the one line, opening on why each is absent."""
    items = "".join(
        f"<li><b>{html.escape(title)}</b>: {html.escape(' '.join(notes) or 'nothing to show')}</li>"
        for title, notes in section.absent
    )
    return f"<details class=note><summary>Note: {html.escape(absent_line(section))}</summary><ul>{items}</ul></details>"


def markdown_table(text: pd.DataFrame) -> str:
    def cell(value: Any) -> str:
        return str(value).replace("|", "\\|").replace("\n", " ")

    headers = [text.index.name or ""] + [str(c) for c in text.columns]
    lines = ["| " + " | ".join(map(cell, headers)) + " |", "|" + "|".join(["---"] * len(headers)) + "|"]
    for label, row in text.iterrows():
        lines.append("| " + " | ".join(cell(v) for v in [label, *row.tolist()]) + " |")
    return "\n".join(lines)


def html_table(text: pd.DataFrame, *, prose: bool = False) -> str:
    """A table of numbers (right-aligned, labels left), or with `prose` one of words, left-aligned throughout."""
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in [text.index.name or "", *text.columns])
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(str(v))}</td>" for v in [label, *row.tolist()]) + "</tr>"
        for label, row in text.iterrows()
    )
    return f"<table{' class=prose' if prose else ''}><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


# 1,300 px: the summary table of 4 conditions x 2 models fits a 1,400 x 900 window below the bottom line (its rows
# on one or two lines each; the browser tier checks it)
CSS = """body{font-family:system-ui,sans-serif;max-width:1300px;margin:1em auto;padding:0 1em;color:#222}
table{border-collapse:collapse;margin:.5em 0 1.5em;font-size:.85em}th,td{border:1px solid #ccc;padding:3px 8px;
text-align:right;white-space:pre-line}th:first-child,td:first-child{text-align:left}thead{background:#f3f3f3}
img{max-width:100%}
.prose td,.prose th{text-align:left;max-width:60em}.note{color:#8a5300}summary{cursor:pointer}
.caption{color:#555;font-size:.85em}figure{margin:1em 0}h3{margin-bottom:.2em}h1{margin:.4em 0}h2{margin:.8em 0 .4em}
table{display:block;overflow-x:auto;max-width:100%}.bottom li{font-weight:600;margin:.3em 0}"""


CONTENTS_TITLE = "Contents"
ABOUT_TITLE = "About this report"  # generated when, from which store, runs and filters: at the end


def anchor(title: str) -> str:
    """The id of a section's heading, as GitHub makes it from the Markdown heading (the contents link to it).

    >>> anchor("REVAS: accuracy, consistency and hard accuracy by number of options")
    'revas-accuracy-consistency-and-hard-accuracy-by-number-of-options'
    >>> anchor("Answer fluctuation: R² of metrics on permutation subsets")
    'answer-fluctuation-r²-of-metrics-on-permutation-subsets'
    """
    return re.sub(r"[^\w\- ]", "", title.strip().lower()).replace(" ", "-")


def _contents(sections: list[Section]) -> tuple[list[str], str]:
    """The table of contents, a link to every section: (Markdown lines, HTML paragraph)."""
    md = [f"## {CONTENTS_TITLE}", "", *[f"- [{s.title}](#{anchor(s.title)})" for s in sections], ""]
    links = " · ".join(f'<a href="#{anchor(s.title)}">{html.escape(s.title)}</a>' for s in sections)
    # one paragraph, no heading: the decision stays on the first screen
    return md, f"<p class=toc><b>{CONTENTS_TITLE}:</b> {links}</p>"


def render(sections: list[Section], header: list[str], title: str) -> tuple[str, str]:
    """(Markdown, HTML) of the whole report; Markdown links the PNGs under plots/, HTML embeds them."""
    md = [f"# {title}", ""]
    body = [f"<h1>{html.escape(title)}</h1>"]
    contents_md, contents_html = _contents(sections)
    if sections and sections[0].title != BOTTOM_TITLE:
        md += contents_md
        body.append(contents_html)
    for section in sections:
        md += [f"## {section.title}", ""]
        body.append(f'<h2 id="{anchor(section.title)}">{html.escape(section.title)}</h2>')
        if section.intro:
            md += [section.intro, ""]
            body.append(f"<p>{html.escape(section.intro)}</p>")
        if section.lines:
            md += [*[f"- **{line}**" for line in section.lines], ""]
            body.append("<ul class=bottom>" + "".join(f"<li>{html.escape(x)}</li>" for x in section.lines) + "</ul>")
        for table in section.tables:
            md += [f"### {table.title}", "", markdown_table(table.text), ""]
            if table.caption:
                md += [f"*{table.caption}* (`tables/{table.name}{table.suffix}`)", ""]
            body.append(f"<h3>{html.escape(table.title)}</h3>{html_table(table.text, prose=table.prose)}")
            if table.caption:
                file = html.escape(table.name + table.suffix)
                body.append(f"<p class=caption>{html.escape(table.caption)} (tables/{file})</p>")
        for plot in section.plots:
            md += [f"### {plot.title}", "", f"![{plot.title}](plots/{plot.name}.png)", ""]
            if plot.caption:
                md += [f"*{plot.caption}*", ""]
            data = base64.b64encode(plot.png).decode("ascii")
            body.append(
                f'<figure><h3>{html.escape(plot.title)}</h3><img alt="{html.escape(plot.title)}" '
                f'src="data:image/png;base64,{data}"><figcaption class=caption>{html.escape(plot.caption)}'
                "</figcaption></figure>"
            )
        if section.title == SUMMARY_TITLE and sections[0].title == BOTTOM_TITLE:
            # after the decision: the bottom line and its table fill the first screen
            md += contents_md
            body.append(contents_html)
        for note in section.notes:
            md += [f"> Note: {note}", ""]
            body.append(
                absent_html(section)
                if section.absent and note == absent_line(section)
                else f"<p class=note>Note: {html.escape(note)}</p>"
            )
    md += [f"## {ABOUT_TITLE}", "", *[f"- {line}" for line in header], ""]
    body.append(f"<h2>{ABOUT_TITLE}</h2><ul>" + "".join(f"<li>{html.escape(h)}</li>" for h in header) + "</ul>")
    page = (
        f"<!DOCTYPE html><html lang=en><head><meta charset=utf-8><title>{html.escape(title)}</title>"
        f"<style>{CSS}</style></head><body>{''.join(body)}</body></html>"
    )
    return "\n".join(md), page
