"""Quoted history in HTML mail, removed from the markup before the HTML is turned into text.

Mail clients mark their quotes in the markup, more surely than any text rule can find them afterwards. The
markup is parsed with selectolax (the Lexbor HTML5 parser, which reads broken mail HTML as a browser does).

- **Quote elements** are removed where they are, and the text around them stays: above (a top-posted reply),
  between (an interleaved one) and below (a bottom-posted one). Gmail's `blockquote.gmail_quote` and its
  `.gmail_attr` line, Apple Mail's and Thunderbird's `blockquote[type=cite]` with Thunderbird's
  `.moz-cite-prefix` or Apple Mail's "On … wrote:" line just before it, Yahoo's `yahoo_quoted` block (whose
  class carries a prefix in a reply to a reply). Gmail splits its quote around what the person types inside
  it, and so does Thunderbird; whatever stands inside a quote element is taken as quoted history, even when
  the person typed it there (Apple Mail keeps such text in the quote): the markup cannot tell it from the
  quote, and the alternative would send every quoted ask again.
- **Outlook** (desktop, on the web, for Mac) marks only where the quote starts, with its header block:
  `#appendonsend`, `#divRplyFwdMsg`, `#mail-editor-reference-message-container`, `.OutlookMessageHeader`,
  or a `border-top` box whose text is a header block ("From: … Sent: … To: … Subject: …"). The marker and
  everything after it go, as Outlook replies are written above the quote.
- A message with nothing of its own outside its quotes is a bare forward: its quotes are its content. It
  keeps them, unquoted, for the text rules, which keep a bare forward's text.
- A `blockquote` with no border and no quote mark is Gmail's "indent more": the person's own text, kept
  unquoted (html2text would otherwise prefix it with ">", which the text rules drop).
"""

from __future__ import annotations

from selectolax.lexbor import LexborHTMLParser, LexborNode

from integrations.mail.quote_headers import is_attribution, is_header_block

_QUOTES = "blockquote.gmail_quote, blockquote[type=cite], [class*=yahoo_quoted], [id^=yahoo_quoted]"
_ATTRIBUTION_CLASSES = ("gmail_attr", "moz-cite-prefix")
_OUTLOOK_MARKERS = (
    "#appendonsend, #divRplyFwdMsg, #mail-editor-reference-message-container, .OutlookMessageHeader, "
    "div[style*=border-top]"
)
_NOT_TEXT = {"style", "script", "head", "title", "-comment"}
_SEPARATORS = {"hr", "br"}


def without_quoted_html(html: str) -> str:
    """`html` without the quoted history its mail client marked (see the module docstring)."""
    tree = LexborHTMLParser(html)
    body = tree.body
    if body is None:
        return html
    indents = _unindent(tree)
    quotes = _top_level(tree.css(_QUOTES))
    for quote in quotes:
        _remove_attribution_before(quote)
        quote.decompose()
    cut = _cut_at_outlook_header(tree)
    if not (indents or quotes or cut):
        return html
    if not _text(body):  # a bare forward
        bare = LexborHTMLParser(html)
        _unindent(bare)
        bare.unwrap_tags(["blockquote"])
        return bare.html or html
    return tree.html or html


def _unindent(tree: LexborHTMLParser) -> int:
    """Unwrap Gmail's indents; how many there were."""
    indents = [
        blockquote
        for blockquote in tree.css("blockquote")
        if "border:none" in "".join((blockquote.attributes.get("style") or "").lower().split())
        and not blockquote.attributes.get("type")
        and not blockquote.attributes.get("class")
    ]
    for blockquote in indents:
        blockquote.unwrap()
    return len(indents)


def _top_level(nodes: list[LexborNode]) -> list[LexborNode]:
    """The nodes not inside another of them (removing the outer one removes the inner)."""
    chosen = {node.mem_id for node in nodes}
    result = []
    for node in nodes:
        parent = node.parent
        while parent is not None and parent.mem_id not in chosen:
            parent = parent.parent
        if parent is None:
            result.append(node)
    return result


def _remove_attribution_before(quote: LexborNode) -> None:
    """Remove the "On … wrote:" line right before a quote: Gmail's and Thunderbird's by class, Apple Mail's
    (a plain element or text) by its text."""
    node = quote.prev
    while node is not None and (node.tag in _SEPARATORS or (node.is_text_node and not _text(node))):
        node = node.prev
    if node is None:
        return
    classes = (node.attributes.get("class") or "").split() if node.is_element_node else []
    if any(name in classes for name in _ATTRIBUTION_CLASSES) or is_attribution(node.text(deep=True) or ""):
        node.decompose()


def _cut_at_outlook_header(tree: LexborHTMLParser) -> bool:
    marker = next((node for node in tree.css(_OUTLOOK_MARKERS) if _is_outlook_marker(node)), None)
    if marker is None or not _text_before(marker):  # none, or a bare forward, which the text rules keep
        return False
    _remove_from(marker)
    return True


def _is_outlook_marker(node: LexborNode) -> bool:
    # A box with a top border is Outlook's header only when its text is a header block: signatures have them too.
    return "border-top" not in (node.attributes.get("style") or "") or is_header_block(_lines(node))


def _remove_from(marker: LexborNode) -> None:
    """Remove `marker`, everything after it in document order, and the rule line Outlook draws above it."""
    node: LexborNode | None = marker
    while node is not None and node.tag not in ("body", "html"):
        following = node.next
        while following is not None:
            after = following.next
            following.decompose()
            following = after
        node = node.parent
    before = marker.prev
    while before is not None and before.is_text_node and not _text(before):
        before = before.prev
    if before is not None and before.tag == "hr":
        before.decompose()
    marker.decompose()


def _text_before(marker: LexborNode) -> bool:
    node: LexborNode | None = marker
    while node is not None and node.tag not in ("body", "html"):
        sibling = node.prev
        while sibling is not None:
            if sibling.tag not in _NOT_TEXT and _text(sibling):
                return True
            sibling = sibling.prev
        node = node.parent
    return False


def _text(node: LexborNode) -> str:
    """The node's text without any white space: whether there is any."""
    return "".join((node.text(deep=True) or "").split())


def _lines(node: LexborNode) -> str:
    """The element's text with a line break for each <br> and block, as a header block is read."""
    copy = LexborHTMLParser(node.html or "")
    for br in copy.css("br, p, div"):
        br.insert_after("\n")
    return copy.body.text(deep=True) if copy.body is not None else ""
