"""What an admin change list shows, read from its HTML: the header and the cells of each row as text
(a boolean icon as its alt text, `True`/`False`), for exact assertions on list columns."""

from __future__ import annotations

from html.parser import HTMLParser

from django.http import HttpResponse


class _ResultListParser(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.depth = 0  # > 0 inside <table id="result_list">
        self.headers: list[str] = []
        self.rows: list[list[str]] = []
        self.cell: list[str] | None = None
        self.in_head = False
        self.skipped = 0  # > 0 inside a sorted column's sort controls (its priority number)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = dict(attrs)
        if tag == "table" and (self.depth or attributes.get("id") == "result_list"):
            self.depth += 1
        if not self.depth:
            return
        if self.skipped or (tag == "div" and "sortoptions" in (attributes.get("class") or "")):
            self.skipped += tag == "div"
            return
        if tag == "thead":
            self.in_head = True
        elif tag == "tr" and not self.in_head:
            self.rows.append([])
        elif tag in ("th", "td"):
            self.cell = []
        elif tag == "img" and self.cell is not None:
            self.cell.append(attributes.get("alt") or "")

    def handle_endtag(self, tag: str) -> None:
        if not self.depth:
            return
        if self.skipped:
            self.skipped -= tag == "div"
            return
        if tag == "table":
            self.depth -= 1
        elif tag == "thead":
            self.in_head = False
        elif tag in ("th", "td") and self.cell is not None:
            text = " ".join("".join(self.cell).split())
            (self.headers if self.in_head else self.rows[-1]).append(text)
            self.cell = None

    def handle_data(self, data: str) -> None:
        if self.cell is not None and not self.skipped:
            self.cell.append(data)


def _parsed(response: HttpResponse) -> _ResultListParser:
    assert response.status_code == 200, response.status_code
    parser = _ResultListParser()
    parser.feed(response.content.decode())
    return parser


def changelist_headers(response: HttpResponse) -> list[str]:
    """The column titles as Django writes them (first letter capitalised), without the selection
    checkbox column."""
    return [header for header in _parsed(response).headers if header]


def changelist_cells(response: HttpResponse) -> list[list[str]]:
    """Each row's cells as text, the selection checkbox column (when there are actions) left out."""
    parser = _parsed(response)
    has_checkboxes = bool(parser.headers) and parser.headers[0] == ""
    return [row[1:] if has_checkboxes else row for row in parser.rows]
