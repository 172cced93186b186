"""The page sanitiser: every kind of active or remote content a notebook can carry comes out inert, what is harmless
comes out as the same elements, attributes and text, and markup a browser reads in surprising ways cannot smuggle a
tag through."""

from __future__ import annotations

import re

import pytest
from html_dom import document_dom, fragment_dom
from hypothesis import given, settings
from hypothesis import strategies as st

from bertviz_lab.widgets.page_sanitizer import clean_css, link_url_ok, resource_url_ok, sanitize_html, sanitize_svg

# (name, hostile markup, text that must not survive, text that must be there instead)
HOSTILE = [
    ("script", "<p>a</p><script>window.__pwned = 1</script><p>b</p>", "__pwned", "<p>a</p><p>b</p>"),
    ("script type module", '<script type="module">import "https://evil.example/x.js"</script>', "evil", ""),
    ("unclosed script", "<p>a</p><script>window.__pwned = 1", "__pwned", "<p>a</p>"),
    ("img onerror", '<img src="x.png" onerror="window.__pwned = 1">', "onerror", '<img src="x.png">'),
    ("svg onload", '<svg onload="window.__pwned = 1"><rect width="1" height="1"/></svg>', "onload", "<rect"),
    ("body onload", '<body onload="window.__pwned = 1"><p>x</p></body>', "onload", "<p>x</p>"),
    ("details ontoggle", "<details open ontoggle=window.__pwned=1><summary>s</summary></details>", "ontoggle",
     "<summary>s</summary>"),
    ("javascript link", '<a href="javascript:window.__pwned=1">go</a>', "javascript", "<a>go</a>"),
    ("javascript link, obfuscated", '<a href=" JaVa&#x09;Script&colon;window.__pwned=1">go</a>', "__pwned",
     "<a>go</a>"),
    ("vbscript link", '<a href="vbscript:msgbox(1)">go</a>', "vbscript", "<a>go</a>"),
    ("data:text/html link", '<a href="data:text/html,&lt;script&gt;alert(1)&lt;/script&gt;">go</a>', "data:",
     "<a>go</a>"),
    ("remote image", '<img src="https://evil.example/track.png?id=1">', "evil.example/track",
     "remote image removed: evil.example"),
    ("protocol-relative image", '<img src="//evil.example/t.png">', "//evil", "remote image removed: evil.example"),
    ("image outside the folder", '<img src="../../secret.png">', "secret", "image removed"),
    ("image by absolute path", '<img src="/etc/passwd">', "passwd", "image removed"),
    ("remote srcset", '<img src="ok.png" srcset="https://evil.example/a.png 2x">', "evil", '<img src="ok.png">'),
    ("remote video poster", '<video poster="https://evil.example/p.png" src="clip.mp4"></video>', "evil",
     '<video src="clip.mp4"></video>'),
    ("iframe", '<iframe src="https://evil.example/page"></iframe>', "<iframe",
     "embedded content removed: evil.example"),
    ("iframe srcdoc", "<iframe srcdoc=\"<script>parent.__pwned=1</script>\"></iframe>", "__pwned",
     "embedded content removed"),
    ("object and embed", '<object data="https://evil.example/x.swf"><param name="a" value="b"></object>'
                         '<embed src="https://evil.example/y.swf">', "evil.example/", "embedded content removed"),
    ("remote style sheet", '<link rel="stylesheet" href="https://cdn.evil.example/s.css">', "<link",
     "remote style sheet removed: cdn.evil.example"),
    ("meta refresh", '<meta http-equiv="refresh" content="0; url=https://evil.example/">', "refresh", ""),
    ("base", '<base href="https://evil.example/"><img src="a.png">', "evil", '<img src="a.png">'),
    ("form action", '<form action="https://evil.example/steal" method="post"><button formaction="https://evil.'
                    'example/b">send</button></form>', "evil", '<button>send</button>'),
    ("css url in a style attribute", '<div style="color: red; background: url(https://evil.example/bg.png)">x</div>',
     "evil", '<div style="color: red; background: none">x</div>'),
    ("css escape in a style attribute", r'<div style="background: \75 rl(https://evil.example/bg.png)">x</div>',
     "evil", "<div>x</div>"),
    ("css @import", "<style>@import url(https://evil.example/i.css); p { color: red }</style>", "evil",
     "p { color: red }"),
    ("css url in a style element", "<style>p { background: url('https://evil.example/b.png') }</style>", "evil",
     "p { background: none }"),
    ("css url as a character reference in SVG", "<svg><style>p { background: &#x75;rl(https://evil.example/b.png) }"
                                                "</style></svg>", "evil", "p { background: none }"),  # read decoded
    ("css remote font", "<style>@font-face { font-family: f; src: url(https://evil.example/f.woff2) }</style>",
     "evil", "src: none"),
    ("svg presentation attribute", '<svg><rect fill="url(https://evil.example/p.svg#g)"/></svg>', "evil",
     "<svg><rect></rect></svg>"),
    ("svg script", '<svg><script href="https://evil.example/s.js"></script><script>window.__pwned=1</script></svg>',
     "script", "<svg></svg>"),
    ("svg foreignObject", '<svg><foreignObject><img src="x" onerror="window.__pwned=1"></foreignObject></svg>',
     "foreignObject", "<svg></svg>"),
    ("svg external image", '<svg><image href="https://evil.example/i.png"/><use xlink:href="https://evil.example/'
                           's.svg#a"/></svg>', "evil", "<svg><image></image><use></use></svg>"),
    ("svg javascript link", '<svg><a xlink:href="javascript:window.__pwned=1"><text>t</text></a></svg>', "javascript",
     "<svg><a><text>t</text></a></svg>"),
    ("svg animation rewriting a link", '<svg><a><set attributeName="href" to="javascript:window.__pwned=1"/>'
                                       '<text>t</text></a></svg>', "javascript", "<svg><a><text>t</text></a></svg>"),
    ("style written as closed", "<style/><p>*{background:url(https://evil.example/x.png)}</p>", "evil",
     "*{background:none}"),  # a browser reads `<style/>` as a style sheet, the paragraph as its CSS; so does nh3
    ("processing instruction", '<?xml-stylesheet href="https://evil.example/x.css"?><p>x</p>', "evil", "<p>x</p>"),
]


@pytest.mark.parametrize("markup, gone, kept", [case[1:] for case in HOSTILE], ids=[case[0] for case in HOSTILE])
def test_active_and_remote_content_is_removed(markup, gone, kept):
    clean = sanitize_html(markup)
    assert gone.lower() not in clean.lower(), clean
    assert kept in clean, clean
    assert_inert(clean)


# Markup that html.parser and a browser tokenise differently: the output must hold no tag html.parser did not check.
DIFFERENTIALS = {
    "attribute closing a raw-text element": '<noscript><p title="</noscript><img src=x onerror=alert(1)>"></noscript>',
    "abrupt comment": "<!--><img src=x onerror=alert(1)>-->",
    "comment ended by --!>": "<!-- a --!><img src=x onerror=alert(1)>-->",
    "bogus comment": "<!x><img src=x onerror=alert(1)>",
    "tag inside an SVG style": "<svg><style><img src=x onerror=alert(1)></style></svg>",
    "style end tag with attributes": "<style>p{}</style x><img src=x onerror=alert(1)></style>",
    "script end tag with a space": "<script>a</script ><img src=x onerror=alert(1)>",
    "CDATA in SVG": "<svg><![CDATA[<img src=x onerror=alert(1)>]]></svg>",
    "slash between attributes": "<img/src=x/onerror=alert(1)>",
    "unquoted attribute": "<img src=x onerror=alert(1)//>",
    "backtick value": "<img src=`x` onerror=alert(1)>",
    "no space between attributes": '<img src="x"onerror="alert(1)">',
    "textarea": "<textarea><img src=x onerror=alert(1)></textarea>",
    "title": "<title></title><img src=x onerror=alert(1)></title>",
    "xmp": "<xmp><img src=x onerror=alert(1)></xmp>",
    "half a tag at the end": "<p>x</p><img src=x onerror=alert(1)",
    "null in a tag name": "<img\x00 src=x onerror=alert(1)>",
    "math breakout": "<math><mtext><table><mglyph><style><img src=x onerror=alert(1)></style></mglyph></table>",
}


@pytest.mark.parametrize("markup", DIFFERENTIALS.values(), ids=DIFFERENTIALS.keys())
def test_markup_read_differently_by_a_browser_stays_inert(markup):
    assert_inert(sanitize_html(markup))


HARMLESS = [
    '<table class="dataframe"><thead><tr><th>a</th></tr></thead><tbody><tr><td>1</td></tr></tbody></table>',
    '<p>Text with <b>bold</b>, <code>&lt;script&gt;</code>, &amp; and a <a href="https://example.com/x?a=1&amp;b=2" '
    'target="_blank">link</a>.</p>',
    '<img src="data:image/png;base64,iVBORw0KGgo=" alt="a figure" width="20"/><img src="figures/local.png">',
    '<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink" viewBox="0 0 10 10" '
    'class="bvl-fig"><style>.bvl-fig text { fill: var(--jp-ui-font-color1, #222); } .a > .b { stroke: #000 }</style>'
    '<defs><linearGradient id="g"><stop offset="0" stop-color="#fff"/></linearGradient></defs>'
    '<rect width="10" height="10" fill="url(#g)"/><image href="data:image/png;base64,iVBORw0KGgo=" width="4" '
    'height="4"/><g><title>a &amp; b</title><text x="1" y="2">tok&#x27;s</text></g></svg>',
    '<!-- Generated by graphviz version 2.43.0 (0) -->\n<!-- Title: G Pages: 1 -->\n<svg width="62pt" height="44pt" '
    'viewBox="0.00 0.00 62.00 44.00"><g id="graph0" class="graph" transform="scale(1 1) rotate(0) translate(4 40)">'
    '<!-- a&#45;&gt;b --><g id="node1" class="node"><title>x</title><ellipse fill="none" stroke="black" cx="27" '
    'cy="-18" rx="27" ry="18"/><text text-anchor="middle" x="27" y="-14.3" font-family="Times,serif" '
    'font-size="14.00">x</text></g></g></svg>',
    '<div class="bvl-static" data-bvl-static="0f0e"><style>.jp-OutputArea-child:has([data-bvl-static="0f0e"]) + '
    '.jp-OutputArea-child > .jp-OutputArea-output:not(:has(*)) { display: none; }</style><details open '
    'class="bvl-tab" data-tab="a"><summary>a</summary><p style="color: #333">x</p></details></div>',
    '<a href="#section-2">down</a> <a href="mailto:someone@example.com">mail</a> <a href="other.html">page</a>',
]


@pytest.mark.parametrize("markup", HARMLESS)
def test_harmless_markup_keeps_every_element_attribute_and_text(markup):
    """nh3 writes what it read in its own form (`<rect/>` as `<rect></rect>`, `&#x27;` as `'`): the same document."""
    clean = sanitize_html(markup)
    assert fragment_dom(clean) == fragment_dom(markup)
    assert clean.count("<!--") == markup.count("<!--")  # Graphviz's comments stay


def test_a_page_keeps_its_head_and_doctype_but_not_a_refresh():
    page = ('<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8"/>\n<meta content="width=device-width" '
            'name="viewport"/>\n<title>t</title>\n<style type="text/css">p { margin: 0 }</style>\n</head>\n'
            '<body class="jp-Notebook">\n<main><p>x</p></main>\n</body>\n</html>')
    assert document_dom(sanitize_html(page, page=True)) == document_dom(page)
    assert sanitize_html(page, page=True).startswith("<!DOCTYPE html>\n<html lang=\"en\">\n<head>")
    refreshed = page.replace("<title>", '<meta http-equiv="refresh" content="0; url=https://evil.example"><title>')
    assert document_dom(sanitize_html(refreshed, page=True)) == document_dom(page)
    assert "<html" not in sanitize_html(page) and "<meta" not in sanitize_html(page)  # a fragment is no page


def test_a_fragment_closes_what_it_opens_and_nothing_around_it():
    assert sanitize_html("<div><span>open") == "<div><span>open</span></div>"
    assert sanitize_html("</div></div></main></body><p>x") == "<p>x</p>"
    assert sanitize_html('<div style="display:none">') == '<div style="display:none"></div>'
    assert sanitize_html("<textarea>swallow the rest") == "<textarea>swallow the rest</textarea>"


def test_an_svg_document_stays_well_formed_xml():
    import xml.etree.ElementTree as ET

    document = ('<?xml version="1.0" encoding="utf-8"?>\n<!DOCTYPE svg PUBLIC "-//W3C//DTD SVG 1.1//EN" '
                '"http://www.w3.org/Graphics/SVG/1.1/DTD/svg11.dtd">\n<svg xmlns="http://www.w3.org/2000/svg" '
                'xmlns:xlink="http://www.w3.org/1999/xlink" viewBox="0 0 20 20" onload="alert(1)"><defs><style '
                'type="text/css"><![CDATA[ .a > b { fill: red } ]]></style></defs><script><![CDATA[ alert(1) ]]>'
                '</script><foreignObject><div>x</div></foreignObject><linearGradient id="g"/>'
                '<path d="M0 0L1 1" style="fill: url(#g)"/><image xlink:href="https://evil.example/x.png"/></svg>')
    clean = sanitize_svg(document)
    root = ET.fromstring(clean)
    assert root.get("viewBox") == "0 0 20 20" and root.get("onload") is None
    assert root.find("{http://www.w3.org/2000/svg}linearGradient") is not None  # case kept: SVG needs it
    assert "alert" not in clean and "foreignObject" not in clean and "evil" not in clean
    assert ".a &gt; b { fill: red }" in clean


@pytest.mark.parametrize("url, link, resource", [
    ("https://example.com/a.png", True, False), ("//example.com/a.png", True, False),
    ("javascript:alert(1)", False, False), ("  jav\nascript:alert(1)", False, False), ("vbscript:x", False, False),
    ("data:text/html,<b>", False, False), ("data:image/png;base64,AAAA", False, True),
    ("data:image/svg+xml,<svg/>", False, True), ("figures/a.png", True, True), ("a.png?x=1#y", True, True),
    ("../a.png", True, False), ("%2e%2e/a.png", True, False), ("..\\a.png", True, False), ("/abs.png", True, False),
    ("file:///etc/passwd", False, False), ("#frag", True, True), ("mailto:a@b.c", True, False),
])
def test_which_urls_may_stay(url, link, resource):
    assert (link_url_ok(url), resource_url_ok(url)) == (link, resource)


def test_css_is_cleaned_surgically_or_dropped_when_unsure():
    assert clean_css("a { color: red }") == "a { color: red }"
    assert clean_css("a { background: url(#grad) } b { background: url(data:image/png;base64,AA) }").count("url(") == 2
    assert clean_css("@import 'https://evil.example/x.css'; a { color: red }") == " a { color: red }"
    assert clean_css("a { background: url( \"https://evil.example/x\" ) }") == "a { background: none }"
    assert clean_css(r"a { background: u\rl(https://evil.example/x) }") == ""  # escapes: no surgery, all goes
    assert clean_css("a { behavior: url(x.htc) ; -moz-binding: url(y) }") == ""
    assert clean_css("a { scroll-behavior: smooth }") == "a { scroll-behavior: smooth }"


# Property: whatever is fed in, every "<" of the output opens a plainly written tag (or a plain comment) without a
# handler, script, frame or remote source; and a second pass changes nothing.
PIECES = ["<", ">", "/", "=", '"', "'", "`", " ", "\n", "\x00", "&", "&lt;", "&#x6a;", "-->", "<!--", "<!", "]]>",
          "<![CDATA[", "<?", "script", "style", "svg", "img", "a", "iframe", "noscript", "textarea", "title", "math",
          "foreignObject", "onerror", "onload", "src", "href", "xlink:href", "javascript:", "https://evil.example/x",
          "alert(1)", "url(", ")", "@import", "\\75 rl(", "p", "div", "</", "x"]
WS = r"[ \t\n\r\f]"
TAG = re.compile(rf"""<(/?)([A-Za-z][A-Za-z0-9._:-]*)((?:{WS}+[A-Za-z_:][-A-Za-z0-9_:.]*(?:{WS}*={WS}*"""
                 r"""(?:"[^"<>]*"|'[^'<>]*'))?)*)""" + WS + "*/?>")
COMMENT = re.compile(r"<!--[^<>!-]*-->")
URL_ATTRIBUTES = {"src", "srcset", "poster", "background", "href", "action", "formaction"}
ATTRIBUTE = re.compile(r"""([A-Za-z_:][-A-Za-z0-9_:.]*)(?:\s*=\s*(?:"([^"]*)"|'([^']*)'))?""")


def assert_inert(clean: str) -> None:
    """Every '<' begins a plainly written tag or comment; no handler, script, frame or network source among them."""
    import html

    for index in [m.start() for m in re.finditer("<", clean)]:
        tag = TAG.match(clean, index)
        if tag is None:
            assert COMMENT.match(clean, index), f"a '<' that opens no plain tag: {clean[index:index + 80]!r}"
            continue
        name = tag.group(2).lower().rsplit(":", 1)[-1]
        assert name not in {"script", "iframe", "object", "embed", "frame", "base", "meta", "link",
                            "foreignobject", "set", "animate"}, tag.group(0)
        for found in ATTRIBUTE.finditer(tag.group(3)):
            attribute = found.group(1).lower().rsplit(":", 1)[-1]
            value = html.unescape(found.group(2) or found.group(3) or "")
            assert not attribute.startswith("on"), tag.group(0)
            compact = re.sub(r"[\x00-\x20]", "", value).lower()
            if attribute in URL_ATTRIBUTES:
                assert not compact.startswith(("javascript:", "vbscript:", "data:text")), tag.group(0)
            if attribute in {"src", "srcset", "poster", "background"} or (attribute == "href" and name != "a"):
                assert not compact.startswith(("http:", "https:", "//", "/", "..")), tag.group(0)
            if attribute not in URL_ATTRIBUTES:  # CSS: style, SVG presentation attributes
                assert not re.search(r"(?:url\(|@import)[^)]*evil", compact), tag.group(0)


NAMES = ["img", "a", "svg", "image", "style", "script", "iframe", "div", "math", "use", "form", "noscript", "title"]
ATTRIBUTES = ["src", "href", "xlink:href", "onerror", "onload", "style", "srcset", "fill", "action", "title"]
VALUES = ["x", "javascript:alert(1)", "https://evil.example/x", "url(https://evil.example/y)", "</noscript><img>",
          "a&quot;b", "ok.png", "../up.png", "data:text/html,x", "data:image/png;base64,AA"]
QUOTES = ['"{}"', "'{}'", "{}", "`{}`"]
TAGS = st.builds(lambda name, attributes, end: f"<{name}{''.join(attributes)}{end}", st.sampled_from(NAMES),
                 st.lists(st.builds(lambda a, v, q: f" {a}=" + q.format(v), st.sampled_from(ATTRIBUTES),
                                    st.sampled_from(VALUES), st.sampled_from(QUOTES)), max_size=3),
                 st.sampled_from([">", "/>", " >", ""]))


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(st.lists(st.one_of(st.sampled_from(PIECES), TAGS), max_size=30).map("".join))
def test_any_markup_comes_out_inert_and_stable(markup):
    clean = sanitize_html(markup)
    assert_inert(clean)
    assert sanitize_html(clean) == clean


# Input parsers handle badly: unterminated comments and tags, malformed declarations (html.parser raised on some and
# was quadratic on others), deep nesting (html5ever's time grows with depth times tags: it is left out with a note).
# In a child with a memory limit and a timeout, so that a regression fails instead of hanging the suite.
PATHOLOGICAL = {"unterminated comments": "<!--" * 100_000, "unterminated tags": "<a" * 200_000,
                "unterminated end tags": "</" * 200_000, "marked sections": "<![" * 100_000,
                "bogus declarations": "<!x" * 100_000, "processing instructions": "<?" * 200_000,
                "deep nesting": "<div>" * 50_000 + "<svg>" + "<g>" * 50_000 + "</p>" * 50_000}
CHILD = """
import importlib.util, json, resource, sys, time
resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))
# the module alone (it imports the standard library and nh3): the package would import torch and the widgets first
spec = importlib.util.spec_from_file_location("page_sanitizer", sys.argv[1])
module = sys.modules["page_sanitizer"] = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
sanitize_html = module.sanitize_html
for name, markup in json.loads(sys.stdin.read()).items():
    start = time.monotonic()
    clean = sanitize_html(markup)
    print(json.dumps({"case": name, "seconds": time.monotonic() - start, "lt": clean.count("<"),
                      "escaped": clean.count("&lt;")}), flush=True)
"""


def test_pathological_markup_is_read_in_linear_time_and_never_raises():
    import json
    import subprocess
    import sys

    from bertviz_lab.widgets import page_sanitizer

    done = subprocess.run([sys.executable, "-c", CHILD, page_sanitizer.__file__], input=json.dumps(PATHOLOGICAL),
                          capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-2000:]
    results = {row["case"]: row for row in map(json.loads, done.stdout.splitlines())}
    assert set(results) == set(PATHOLOGICAL)
    assert results["unterminated comments"]["lt"] == 0  # one comment to the end, as a browser reads it: dropped
    assert results["marked sections"]["lt"] == 0
    assert results["deep nesting"]["lt"] == 2  # <span>, </span>: the note that it was left out
    assert max(row["seconds"] for row in results.values()) < 20


def test_nested_url_calls_are_read_one_short_argument_each():
    """`url(` repeated 40,000 times in a style: each argument read stops at the next `(` or quote, so the reading is
    linear in the text (it was quadratic: each argument ran to the text's end); what loads is judged as before."""
    from bertviz_lab.widgets import page_sanitizer
    from bertviz_lab.widgets.page_sanitizer import CSS_URL, _url_argument

    for css in ("url(" * 40_000, "src(" * 40_000, "url('" * 40_000, 'background: url( "' * 40_000):
        assert max(len(_url_argument(css, match.end())) for match in CSS_URL.finditer(css)) <= 20
    assert _url_argument("url(  a.png  ) b", 4) == "a.png" and _url_argument("url('a b.png')", 4) == "a b.png"
    assert page_sanitizer.css_safe("url(" * 40_000 + "x.png)")
    assert not page_sanitizer.css_safe("url(" * 40_000 + "https://tracker.example/x.png)")
    cleaned = page_sanitizer.clean_css("a { b: url(" * 2_000 + "https://tracker.example/x.png) }")
    assert "tracker" not in cleaned and page_sanitizer.css_safe(cleaned)


def test_nesting_deeper_than_a_browser_shows_is_left_out_with_a_note():
    """html5ever's time grows with depth times tags; a browser builds at most 512 levels. Deeper goes, with a note;
    what closes itself (void HTML, <rect/> in SVG) or is closed by the next of its kind (<p>, <li>) does not nest."""
    assert sanitize_html("<div>" * 1000 + "x") == "<div>" * 1000 + "x" + "</div>" * 1000
    assert sanitize_html("<div>" * 1100) == '<span class="bvl-removed">content nested more than 1024 elements deep ' \
                                            'removed</span>'
    assert sanitize_html("<svg>" + '<rect width="1"/>' * 3000 + "</svg>").count("<rect") == 3000
    assert sanitize_html("<ul>" + "<li><p>item<br>" * 3000 + "</ul>").count("<li>") == 3000
