"""The document a browser builds from markup, written in one form (html5lib reads it as the HTML standard says): two
markups with the same form show the same elements, attributes and text, however each was written."""

from __future__ import annotations

import html5lib
from html5lib.serializer import HTMLSerializer

SERIALIZER = HTMLSerializer(quote_attr_values="always", alphabetical_attributes=True, omit_optional_tags=False,
                            minimize_boolean_attributes=False, use_trailing_solidus=False, escape_lt_in_attrs=True)


def fragment_dom(markup: str) -> str:
    """The elements, attributes and text of `markup` read as a fragment inside a page's body."""
    tree = html5lib.parseFragment(markup, treebuilder="etree", namespaceHTMLElements=False)
    return SERIALIZER.render(html5lib.getTreeWalker("etree")(tree))


def document_dom(markup: str) -> str:
    """The same for a whole page (doctype, head and body included)."""
    tree = html5lib.parse(markup, treebuilder="etree", namespaceHTMLElements=False)
    return SERIALIZER.render(html5lib.getTreeWalker("etree")(tree))
