"""Make a notebook's HTML inert for an offline page: nothing in it runs and nothing in it loads from elsewhere.

A notebook received from someone else may carry active content in its outputs and markdown: scripts, event-handler
attributes, `javascript:` links, frames, and images, style sheets or CSS that fetch from the network the moment the
page is opened. `sanitize_html` removes all of it and keeps what the page shows, so the panels' static copies (plain
HTML, inline SVG with `<style>`, embedded `data:image/png` images) come through as the same elements and text:

- kept: the HTML, SVG and MathML elements and attributes a page shows (allow-lists below; `data-*` and `aria-*`);
- removed: `<script>` (with its content), `on*` attributes, `<iframe>`/`<frame>`/`<object>`/`<embed>`/`<applet>`,
  `<base>`, `<link>`, `<meta>` (a page keeps its charset, viewport and generator), `<form>` (its fields stay, so
  nothing can be submitted anywhere) and `action`/`formaction`, SVG `<foreignObject>` and animation elements (they
  can rewrite links), processing instructions, and comments other than plain ones (such as Graphviz writes);
- URLs: links may go to http(s) and mailto addresses; everything the page would load by itself (`src`, `srcset`,
  `poster`, SVG `href`, CSS `url()`) must be an inline `data:` image (or font, in CSS), a `#fragment`, or a
  relative path inside the page's folder; `javascript:`, `vbscript:`, `data:text/html` and the like are dropped;
- CSS: `@import` and remote `url()` are dropped from `<style>` and `style` attributes (and from SVG presentation
  attributes);
- a removed image, frame or style sheet leaves a short visible note naming where it pointed
  ("remote image removed: example.com").

The markup is read and written by nh3, the Python binding of the Rust `ammonia` sanitiser (html5ever, the HTML
parser of Servo, reads it as a browser does): maintained and fast, where `bleach` is deprecated. This module only
states the policy: the allow-lists, an attribute filter for what nh3 cannot say (which URLs load, CSS), and one pass
over nh3's output, which html5ever writes in one canonical form, to clean `<style>` sheets, put notes where frames
and images were, and keep only plain comments. A fragment (one output, one markdown cell) is closed: what it opens
it closes, and it cannot close what surrounds it; a page (`page=True`) keeps its doctype, html, head and body.
"""

from __future__ import annotations

import html
import re
from functools import partial
from typing import Callable
from urllib.parse import unquote, urlsplit

import nh3

NOTE_CLASS = "bvl-removed"

# What nh3 keeps. SVG names are written as html5ever adjusts them (linearGradient, viewBox).
HTML_TAGS = frozenset({
    "a", "abbr", "acronym", "address", "area", "article", "aside", "audio", "b", "bdi", "bdo", "big", "blockquote",
    "br", "button", "canvas", "caption", "center", "cite", "code", "col", "colgroup", "data", "datalist", "dd", "del",
    "details", "dfn", "dialog", "dir", "div", "dl", "dt", "em", "fieldset", "figcaption", "figure", "font", "footer",
    "h1", "h2", "h3", "h4", "h5", "h6", "header", "hgroup", "hr", "i", "img", "input", "ins", "kbd", "label",
    "legend", "li", "main", "map", "mark", "menu", "meter", "nav", "nobr", "ol", "optgroup", "option", "output", "p",
    "picture", "pre", "progress", "q", "rb", "rp", "rt", "rtc", "ruby", "s", "samp", "search", "section", "select",
    "small", "source", "span", "strike", "strong", "style", "sub", "summary", "sup", "table", "tbody", "td",
    "textarea", "tfoot", "th", "thead", "time", "title", "tr", "track", "tt", "u", "ul", "var", "video", "wbr",
})
SVG_TAGS = frozenset({
    "svg", "circle", "clipPath", "defs", "desc", "ellipse", "feBlend", "feColorMatrix", "feComponentTransfer",
    "feComposite", "feConvolveMatrix", "feDiffuseLighting", "feDisplacementMap", "feDistantLight", "feDropShadow",
    "feFlood", "feFuncA", "feFuncB", "feFuncG", "feFuncR", "feGaussianBlur", "feImage", "feMerge", "feMergeNode",
    "feMorphology", "feOffset", "fePointLight", "feSpecularLighting", "feSpotLight", "feTile", "feTurbulence",
    "filter", "g", "image", "line", "linearGradient", "marker", "mask", "metadata", "path", "pattern", "polygon",
    "polyline", "radialGradient", "rect", "stop", "switch", "symbol", "text", "textPath", "tspan", "use", "view",
})
MATHML_TAGS = frozenset({
    "math", "maction", "annotation", "menclose", "merror", "mfenced", "mfrac", "mi", "mmultiscripts", "mn", "mo",
    "mover", "mpadded", "mphantom", "mprescripts", "mroot", "mrow", "ms", "mspace", "msqrt", "mstyle", "msub",
    "msubsup", "msup", "mtable", "mtd", "mtext", "mtr", "munder", "munderover", "none", "semantics",
})
# Kept by nh3 only to be named in a note, then replaced by it (their end tags go, an object's fallback content stays).
NOTED = frozenset({"iframe", "frame", "object", "embed", "applet", "portal", "fencedframe", "link"})
EMBEDDING = NOTED - {"link"}
NOTE_SOURCES = frozenset({"src", "data", "href", "rel"})
# Dropped with their content (the rest that is not kept loses its tags only): what they hold never shows, or runs.
CLEAN_CONTENT = frozenset({"script", "foreignObject", "noscript", "noembed", "noframes", "template"})
PAGE_TAGS = frozenset({"meta"})  # a page keeps some of its metas (`_page_meta`); a fragment none

ATTRIBUTES = frozenset({
    # HTML
    "abbr", "accesskey", "align", "alink", "alt", "autocapitalize", "autocomplete", "axis", "background", "bgcolor",
    "border", "cellpadding", "cellspacing", "char", "charoff", "charset", "checked", "cite", "class", "clear", "color",
    "cols", "colspan", "compact", "content", "contenteditable", "controls", "coords", "datetime", "decoding",
    "default", "dir", "dirname", "disabled", "download", "draggable", "enterkeyhint", "face", "for", "frame",
    "headers", "height", "hidden", "high", "href", "hreflang", "hspace", "id", "inert", "inputmode", "ismap",
    "itemid", "itemprop", "itemref", "itemscope", "itemtype", "kind", "label", "lang", "list", "loading", "loop",
    "low", "max", "maxlength", "media", "min", "minlength", "multiple", "muted", "name", "noshade", "nowrap", "open",
    "optimum", "pattern", "placeholder", "playsinline", "popover", "poster", "preload", "readonly", "referrerpolicy",
    "rel", "required", "rev", "reversed", "role", "rows", "rowspan", "rules", "scope", "selected", "shape", "size",
    "sizes", "span", "spellcheck", "src", "srclang", "srcset", "start", "step", "style", "summary", "tabindex",
    "target", "text", "title", "translate", "type", "usemap", "valign", "value", "vlink", "vspace", "width", "wrap",
    # SVG (xlink:href is read as href, xmlns:xlink as xlink, xml:space as space)
    "alignment-baseline", "baseFrequency", "baseline-shift", "bias", "clip", "clip-path", "clip-rule",
    "clipPathUnits", "color-interpolation", "color-interpolation-filters", "color-rendering", "cx", "cy", "d",
    "diffuseConstant", "direction", "display", "divisor", "dominant-baseline", "dx", "dy", "edgeMode", "elevation",
    "exponent", "fill", "fill-opacity", "fill-rule", "filter", "filterUnits", "flood-color", "flood-opacity",
    "font-family", "font-size", "font-size-adjust", "font-stretch", "font-style", "font-variant", "font-weight", "fr",
    "fx", "fy", "gradientTransform", "gradientUnits", "image-rendering", "in", "in2", "intercept", "k", "k1", "k2",
    "k3", "k4", "kernelMatrix", "kernelUnitLength", "kerning", "lengthAdjust", "letter-spacing", "lighting-color",
    "limitingConeAngle", "marker-end", "marker-mid", "marker-start", "markerHeight", "markerUnits", "markerWidth",
    "mask", "maskContentUnits", "maskUnits", "mode", "numOctaves", "offset", "opacity", "operator", "order", "orient",
    "overflow", "paint-order", "pathLength", "patternContentUnits", "patternTransform", "patternUnits",
    "pointer-events", "points", "pointsAtX", "pointsAtY", "pointsAtZ", "preserveAlpha", "preserveAspectRatio",
    "primitiveUnits", "r", "radius", "refX", "refY", "result", "rotate", "rx", "ry", "scale", "seed",
    "shape-rendering", "side", "slope", "space", "spacing", "specularConstant", "specularExponent", "spreadMethod",
    "startOffset", "stdDeviation", "stitchTiles", "stop-color", "stop-opacity", "stroke", "stroke-dasharray",
    "stroke-dashoffset", "stroke-linecap", "stroke-linejoin", "stroke-miterlimit", "stroke-opacity", "stroke-width",
    "surfaceScale", "systemLanguage", "tableValues", "targetX", "targetY", "text-anchor", "text-decoration",
    "text-rendering", "textLength", "transform", "transform-origin", "unicode-bidi", "vector-effect", "version",
    "viewBox", "visibility", "word-spacing", "writing-mode", "x", "x1", "x2", "xChannelSelector", "xlink", "xmlns",
    "y", "y1", "y2", "yChannelSelector", "z",
    # MathML
    "accent", "accentunder", "bevelled", "close", "columnalign", "columnlines", "columnspacing", "columnspan",
    "denomalign", "depth", "displaystyle", "encoding", "fence", "largeop", "linebreak", "linethickness", "lspace",
    "mathbackground", "mathcolor", "mathsize", "mathvariant", "maxsize", "minsize", "movablelimits", "notation",
    "numalign", "rowalign", "rowlines", "rowspacing", "rspace", "scriptlevel", "separator", "separators", "stretchy",
    "subscriptshift", "superscriptshift", "symmetric", "voffset",
})
ATTRIBUTE_PREFIXES = frozenset({"data-", "aria-"})
URL_SCHEMES = frozenset({"http", "https", "mailto", "data"})  # nh3 drops every other scheme; the filter narrows on

NAVIGATION_ELEMENTS = frozenset({"a", "area"})  # their href is followed on a click only
RESOURCE_ATTRIBUTES = frozenset({"src", "href", "poster", "background", "data", "longdesc", "icon"})
SRCSET_ATTRIBUTES = frozenset({"srcset", "imagesrcset"})
LINK_SCHEMES = frozenset({"http", "https", "mailto"})

DATA_IMAGE = re.compile(r"data:\s*image/(?:png|gif|jpe?g|webp|bmp|avif|x-icon|vnd\.microsoft\.icon|svg\+xml)\s*[;,]")
DATA_FONT = re.compile(r"data:\s*(?:font/[\w.+-]+|application/(?:x-)?font-[\w.+-]+|application/vnd\.ms-fontobject"
                       r"|application/octet-stream)\s*[;,]")
SCHEME = re.compile(r"([a-z][a-z0-9+.\-]*):")
ATTRIBUTE_NAME = re.compile(r"[A-Za-z_:][-A-Za-z0-9_:.]*")

CSS_COMMENT = re.compile(r"/\*.*?(?:\*/|$)", re.S)
CSS_ESCAPE = re.compile(r"\\(?:([0-9a-fA-F]{1,6})\s?|\n|(.))", re.S)
CSS_FORBIDDEN = re.compile(r"@import|expression\s*\(|-moz-binding|(?<![-\w])behaviou?r\s*:|image-set\s*\(", re.I)
CSS_URL = re.compile(r"(?<![-\w])(?:url|src)\(", re.I)
CSS_URL_TOKEN = re.compile(r"""(?<![-\w])url\(\s*(?:"[^"]*"|'[^']*'|[^)"'\s]*)\s*\)""", re.I)
CSS_IMPORT_RULE = re.compile(r"@import[^;{}]*(?:;|$)", re.I)


# ------------------------------------------------------------------------------------------------------------
# URLs


def _clean_url(value: str) -> str:
    """The URL as a browser reads it: outer spaces and control characters gone, tabs and newlines removed inside."""
    return re.sub(r"[\t\n\r]", "", value).strip("".join(map(chr, range(0x21))))


def _scheme(url: str) -> str | None:
    match = SCHEME.match(url.lower())
    return match.group(1) if match else None


def _inside_folder(url: str) -> bool:
    """A relative path that stays in the page's folder: no scheme, no leading slash, no `..` step."""
    if url.startswith(("/", "\\")) or _scheme(url) is not None:
        return False
    path = re.split(r"[?#]", url, maxsplit=1)[0]
    return ".." not in re.split(r"[/\\]", unquote(path))


def link_url_ok(value: str) -> bool:
    """Whether a link (followed only when clicked) may stay: http(s), mailto, a fragment or a relative path."""
    url = _clean_url(value)
    scheme = _scheme(url)
    return scheme in LINK_SCHEMES if scheme is not None else True


def resource_url_ok(value: str, fonts: bool = False) -> bool:
    """Whether something the page loads by itself may stay: an inline image (or font), a fragment, or a file in
    the page's own folder; never the network."""
    url = _clean_url(value)
    lowered = url.lower()
    if url == "" or url.startswith("#"):
        return True
    if lowered.startswith("data:"):
        return bool(DATA_IMAGE.match(lowered) or (fonts and DATA_FONT.match(lowered)))
    return _inside_folder(url)


def srcset_ok(value: str) -> bool:
    """Whether every candidate of a srcset may load."""
    candidates = [part.strip().split()[0] for part in value.split(",") if part.strip()]
    return all(resource_url_ok(candidate) for candidate in candidates)


def url_host(value: str) -> str | None:
    """The host a network URL names (also `//host/...`), else None."""
    url = _clean_url(value).replace("\\", "/")
    if _scheme(url) in ("http", "https", "ftp", "ws", "wss") or url.startswith("//"):
        try:
            return (urlsplit(url).hostname or "an unnamed host")[:80]
        except ValueError:  # such as an unclosed [IPv6 address
            return "an unnamed host"
    return None


def url_origin(value: str) -> str:
    """Where a URL points, for a note: its host, its scheme, or that it leaves the page's folder."""
    scheme = _scheme(_clean_url(value))
    return url_host(value) or (f"a {scheme[:20]}: address" if scheme else "a file outside the page's folder")


# ------------------------------------------------------------------------------------------------------------
# CSS


def _unescape_css(css: str) -> str:
    def one(match: re.Match) -> str:
        if match.group(1):
            code = int(match.group(1), 16)
            return chr(code) if 0 < code <= 0x10FFFF and not 0xD800 <= code <= 0xDFFF else "\ufffd"
        return match.group(2) or ""

    return CSS_ESCAPE.sub(one, css)


_SPACES = re.compile(r"\s*")
_BARE_URL_END = re.compile(r"""[()\s'"]""")  # CSS ends a bare url( argument at any of these (or it is a bad url)


def _url_argument(text: str, start: int) -> str:
    """The argument of a url( or src( that starts at `start`: quoted (to its closing quote) or bare (to the first
    character a bare one cannot hold), else to the text's end. Read in place, never past the next `(`: a thousand
    nested `url(` cost a thousand short reads, not a thousand reads of the rest of the text."""
    spaces = _SPACES.match(text, start)
    assert spaces is not None  # \s* matches, if only the empty string, wherever it starts
    first = spaces.end()
    quote = text[first:first + 1]
    if quote in ("'", '"'):
        end = text.find(quote, first + 1)
        return text[first + 1:end if end > 0 else len(text)]
    bare_end = _BARE_URL_END.search(text, first)
    return text[first:bare_end.start() if bare_end else len(text)]


def _css_reading_safe(css: str) -> bool:
    text = CSS_COMMENT.sub("", css)
    if CSS_FORBIDDEN.search(text):
        return False
    return all(resource_url_ok(_url_argument(text, match.end()), fonts=True) for match in CSS_URL.finditer(text))


def css_safe(css: str, entities: bool = False) -> bool:
    """Whether CSS loads nothing from elsewhere and runs nothing, read as written, with its escapes decoded, and
    (`entities`: inside SVG a browser decodes `&...;` in a style element) with character references decoded."""
    readings = {css, _unescape_css(css)}
    if entities:
        readings |= {html.unescape(reading) for reading in list(readings)}
        readings |= {_unescape_css(reading) for reading in list(readings)}
    return all(_css_reading_safe(reading) for reading in readings)


def clean_css(css: str, entities: bool = False) -> str:
    """`css` itself when safe; else without its @import rules and unsafe url()s (`none` instead); "" when escapes or
    references make a surgical fix unsure."""
    if css_safe(css, entities):
        return css
    if "\\" in css or (entities and "&" in css):
        return ""

    def url_or_none(match: re.Match) -> str:
        argument = _url_argument(match.group(0), match.group(0).index("(") + 1)
        return match.group(0) if resource_url_ok(argument, fonts=True) else "none"

    fixed = CSS_URL_TOKEN.sub(url_or_none, CSS_IMPORT_RULE.sub("", CSS_COMMENT.sub("", css)))
    return fixed if css_safe(fixed, entities) else ""


# ------------------------------------------------------------------------------------------------------------
# The policy nh3 applies


REMOVED_IMAGE = "bvl-removed-image:"  # an <img> src the filter refused; no source can carry it (nh3 drops the scheme)


def _filter_attribute(tag: str, name: str, value: str) -> str | None:
    """What nh3 writes for attribute `name` of element `tag` (names as html5ever reads them, without a prefix):
    `value`, a cleaned value, or None to drop it. It must not raise (nh3 would drop the attribute and print)."""
    tag = tag.lower()
    if not ATTRIBUTE_NAME.fullmatch(name):
        return None
    if tag in NOTED:
        return value if name in NOTE_SOURCES else None
    if name in RESOURCE_ATTRIBUTES:
        if link_url_ok(value) if tag in NAVIGATION_ELEMENTS and name == "href" else resource_url_ok(value):
            return value
        return REMOVED_IMAGE + value if (tag, name) == ("img", "src") else None
    if name in SRCSET_ATTRIBUTES:
        return value if srcset_ok(value) else None
    if name == "style":
        cleaned = clean_css(value)
        return cleaned if cleaned.strip() else None
    unescaped = _unescape_css(value)
    if (CSS_URL.search(unescaped) or CSS_FORBIDDEN.search(unescaped)) and not css_safe(value):
        return None  # an SVG presentation attribute such as fill="url(...)"
    return value


def _cleaner(page: bool) -> Callable[[str], str]:
    tags = HTML_TAGS | SVG_TAGS | MATHML_TAGS | NOTED | (PAGE_TAGS if page else frozenset())
    return partial(nh3.clean, tags=set(tags), clean_content_tags=set(CLEAN_CONTENT),
                   attributes={"*": set(ATTRIBUTES)}, generic_attribute_prefixes=set(ATTRIBUTE_PREFIXES),
                   attribute_filter=_filter_attribute, url_schemes=set(URL_SCHEMES), strip_comments=False,
                   link_rel=None)


clean_fragment = _cleaner(page=False)
clean_page_part = _cleaner(page=True)


# ------------------------------------------------------------------------------------------------------------
# nh3's output, finished: html5ever writes every tag as <name name="value" ...> (values with & and " escaped), text
# with < and > escaped, and only the text of raw-text elements (here <style> and <iframe>) as it is. That text ends at
# the first </style> or </iframe>: the parser ended it there, and ammonia keeps no <iframe> inside SVG or MathML (nor
# HTML inside them but at MathML's text integration points), where one could hold other elements.

CANONICAL = re.compile(r'<!--(.*?)-->|<(/?)([A-Za-z][^\s/>]*)((?: [^\s=>]+="[^"]*")*)>', re.S)
CANONICAL_ATTRIBUTE = re.compile(r' ([^\s=>]+)="([^"]*)"')
PLAIN_COMMENT = re.compile(r"[^<>!?-][^<>!-]*|")  # no -, !, < or > inside: as Graphviz writes them; not <?...?>


def _note(text: str) -> str:
    return f'<span class="{NOTE_CLASS}">{html.escape(text, quote=False)}</span>'


def _note_for(name: str, attributes: dict[str, str]) -> str:
    """What shows where a frame, embedded object, remote style sheet or image that may not load was; else ""."""
    if name in EMBEDDING:
        target = attributes.get("src") or attributes.get("data") or ""
        return _note(f"embedded content removed: {url_origin(target)}" if target else "embedded content removed")
    if name == "link":
        href = attributes.get("href", "")
        stylesheet = "stylesheet" in attributes.get("rel", "").lower() and url_host(href)
        return _note(f"remote style sheet removed: {url_origin(href)}") if stylesheet else ""
    source = attributes["src"][len(REMOVED_IMAGE):]
    where = url_origin(source)
    return _note(f"remote image removed: {where}" if url_host(source) else f"image removed: it pointed to {where}")


def _page_meta(attributes: dict[str, str]) -> bool:
    """The metas a page keeps: its charset, viewport and generator."""
    if set(attributes) == {"charset"}:
        return True
    return set(attributes) == {"name", "content"} and attributes["name"].lower() in ("viewport", "generator")


def _clean_style_sheet(css: str) -> str:
    """A <style> element's text: CSS that loads nothing (read with character references decoded too, as inside SVG),
    and no raw < (nothing can end the element early)."""
    return clean_css(css, entities=True).replace("<", "\\3c ")


def _raw_text_end(canonical: str, start: int, end_tag: str) -> int:
    """Where the raw text from `start` ends: at its end tag (html5ever's reading ends it at the first), or the end."""
    end = canonical.find(end_tag, start)
    return len(canonical) if end < 0 else end


def _finish(canonical: str) -> str:
    """nh3's output with style sheets cleaned, notes in place of what may not load, only plain comments, and < and >
    escaped in attribute values too (as the HTML standard now serialises them), so each < begins a checked tag."""
    out, at = [], 0
    while (match := CANONICAL.search(canonical, at)) is not None:
        out.append(canonical[at:match.start()].replace("<", "&lt;"))
        at = match.end()
        comment, closing, name, attributes_text = match.groups()
        if comment is not None:
            out.append(match.group(0) if PLAIN_COMMENT.fullmatch(comment) else "")
            continue
        local = name.lower()
        if closing:
            out.append("" if local in NOTED else match.group(0))
            continue
        attributes = {key: html.unescape(value) for key, value in CANONICAL_ATTRIBUTE.findall(attributes_text)}
        if local in NOTED or (local == "img" and attributes.get("src", "").startswith(REMOVED_IMAGE)):
            out.append(_note_for(local, attributes))
            if local == "iframe":  # its text is raw and never shown: it goes with the element
                at = _raw_text_end(canonical, at, "</iframe>")
            continue
        if local == "meta" and not _page_meta(attributes):
            continue
        out.append(f"<{name}{attributes_text.replace('<', '&lt;').replace('>', '&gt;')}>")
        if local == "style":
            end = _raw_text_end(canonical, at, "</style>")
            out.append(_clean_style_sheet(canonical[at:end]))
            at = end
    out.append(canonical[at:].replace("<", "&lt;"))
    return "".join(out)


# ------------------------------------------------------------------------------------------------------------
# Nesting: html5ever looks through the open elements for many tags, so its time grows with the nesting depth times the
# number of tags (a minute for 50,000 nested <div>). A browser shows at most 512 levels; deeper input is left out.

MAX_NESTING = 1024
TAG_START = re.compile(r"<(/?)([A-Za-z][A-Za-z0-9:-]*)[^<>]*?(/?)>")
NOT_NESTING = frozenset({  # void, or closed by the next of their kind (so they do not nest by themselves)
    "area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "param", "source", "track", "wbr",
    "frame", "keygen", "basefont", "bgsound", "image", "p", "li", "dt", "dd", "tr", "td", "th", "option",
    "optgroup", "rb", "rt", "rtc", "rp", "thead", "tbody", "tfoot", "colgroup", "html", "head", "body",
})
SELF_CLOSING = frozenset(name.lower() for name in SVG_TAGS | MATHML_TAGS) - HTML_TAGS  # <rect/> closes in SVG


def nesting_depth(source: str) -> int:
    """How deep `source` nests its elements, as its tags say (an estimate read in one pass, without parsing)."""
    depth = deepest = 0
    for closing, name, closed in TAG_START.findall(source):
        name = name.lower()
        if name in NOT_NESTING or (closed and name in SELF_CLOSING):
            continue
        depth = max(depth - 1, 0) if closing else depth + 1
        deepest = max(deepest, depth)
    return deepest


# ------------------------------------------------------------------------------------------------------------
# Pages: html5ever reads a fragment, where <html>, <head> and <body> have no place; a page is cut at them, each part
# sanitised, and they are written afresh around the parts.

PAGE_STRUCTURE = re.compile(r"<!doctype\s+html\s*>|<(/?)(html|head|body)\b([^<>]*)>", re.I)
PAGE_ORDER = ("doctype", "html", "head", "/head", "body", "/body", "/html")


def _structure_tag(match: re.Match) -> str:
    if match.group(2) is None:
        return "<!DOCTYPE html>"
    name = match.group(2).lower()
    if match.group(1):
        return f"</{name}>"
    span = _finish(clean_fragment(f"<span{match.group(3)}>"))  # its attributes, kept as on a span
    kept = re.match(r"<span([^>]*)>", span)
    return f"<{name}{kept.group(1) if kept else ''}>"


def _sanitize_page(source: str) -> str:
    out, at, last = [], 0, -1
    for match in PAGE_STRUCTURE.finditer(source):
        kind = "doctype" if match.group(2) is None else match.group(1) + match.group(2).lower()
        if PAGE_ORDER.index(kind) <= last:
            continue  # a second <body> is no structure: the part it is in drops it
        last = PAGE_ORDER.index(kind)
        out.append(_finish(clean_page_part(source[at:match.start()])))
        out.append(_structure_tag(match))
        at = match.end()
    out.append(_finish(clean_page_part(source[at:])))
    return "".join(out)


def sanitize_html(source: str, page: bool = False, xml: bool = False) -> str:
    """`source` without anything that runs or loads from elsewhere (see the module docstring); `page` for a whole
    page (keeps its doctype, html/head/body, charset and viewport), `xml` for an SVG document."""
    if nesting_depth(source) > MAX_NESTING:
        return _note(f"content nested more than {MAX_NESTING} elements deep removed")
    clean = _sanitize_page(source) if page else _finish(clean_fragment(source))
    return clean.replace("&nbsp;", "&#160;") if xml else clean  # XML knows no &nbsp;


def sanitize_svg(source: str) -> str:
    """An SVG document (an image/svg+xml output) without scripts, handlers, foreignObject or external references."""
    return sanitize_html(source, xml=True)
