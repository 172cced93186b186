"""Make a notebook's HTML inert for an offline page: nothing in it runs and nothing in it loads from elsewhere.

A notebook received from someone else may carry active content in its outputs and markdown: scripts, event-handler
attributes, `javascript:` links, frames, and images, style sheets or CSS that fetch from the network the moment the
page is opened. `sanitize_html` removes all of it and keeps everything else byte for byte, so the panels' static
copies (plain HTML, inline SVG with `<style>`, embedded `data:image/png` images) pass through unchanged:

- removed: `<script>` (with its content), `on*` attributes, `<iframe>`/`<frame>`/`<object>`/`<embed>`/`<applet>`,
  `<base>`, `<link>`, `<meta>` (a page keeps its charset, viewport and generator), `<form>` (its fields stay, so
  nothing can be submitted anywhere) and `action`/`formaction`,
  SVG `<foreignObject>` and animation elements (they can rewrite links), processing instructions, and comments
  other than plain ones (such as Graphviz writes);
- URLs: links may go to http(s) and mailto addresses; everything the page would load by itself (`src`, `srcset`,
  `poster`, SVG `href`, CSS `url()`) must be an inline `data:` image (or font, in CSS), a `#fragment`, or a
  relative path inside the page's folder; `javascript:`, `vbscript:`, `data:text/html` and the like are dropped;
- CSS: `@import` and remote `url()` are dropped from `<style>` and `style` attributes (and from SVG presentation
  attributes);
- a removed image, frame or style sheet leaves a short visible note naming where it pointed
  ("remote image removed: example.com").

It reads the markup with the standard library's `html.parser` and never trusts its reading where a browser could read
the same bytes differently: a tag is copied verbatim only when it is plainly written (quoted attributes, no `<` inside),
otherwise written afresh from the checked values; text and style content never carry a raw `<`; comments are dropped.
So every `<` of the result starts a tag that was checked. A fragment (one output, one markdown cell) is also closed:
what it opens it closes, and it cannot close what surrounds it.
"""

from __future__ import annotations

import html
import re
from collections import Counter
from dataclasses import dataclass, field
from html.parser import HTMLParser
from urllib.parse import unquote, urlsplit

NOTE_CLASS = "bvl-removed"

# Elements whose tags are dropped and whose content, checked like the rest, stays. (<script> goes with its content,
# and so does <foreignObject> in a fragment; in a page only its tags go.)
DROP_TAG = frozenset({
    "base", "link", "meta", "param", "form", "iframe", "frame", "frameset", "object", "embed", "applet", "portal",
    "fencedframe", "noscript", "noembed", "noframes", "xmp", "plaintext", "set", "animate", "animatemotion",
    "animatetransform", "animatecolor", "handler", "listener",
})
EMBEDDING = frozenset({"iframe", "frame", "frameset", "object", "embed", "applet", "portal", "fencedframe"})
PAGE_ONLY = frozenset({"html", "head", "body"})  # a fragment cannot open or close the page around it
VOID = frozenset({"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "param", "source",
                  "track", "wbr", "frame", "keygen", "basefont", "bgsound", "image"})
FOREIGN_ROOTS = frozenset({"svg", "math"})

DROP_ATTRIBUTES = frozenset({"srcdoc", "action", "formaction", "ping", "manifest", "codebase", "classid", "archive",
                             "lowsrc", "dynsrc", "http-equiv", "profile"})
NAVIGATION_ELEMENTS = frozenset({"a", "area"})  # their href is followed on a click only
RESOURCE_ATTRIBUTES = frozenset({"src", "href", "poster", "background", "data", "longdesc", "icon"})
SRCSET_ATTRIBUTES = frozenset({"srcset", "imagesrcset"})
LINK_SCHEMES = frozenset({"http", "https", "mailto"})

DATA_IMAGE = re.compile(r"data:\s*image/(?:png|gif|jpe?g|webp|bmp|avif|x-icon|vnd\.microsoft\.icon|svg\+xml)\s*[;,]")
DATA_FONT = re.compile(r"data:\s*(?:font/[\w.+-]+|application/(?:x-)?font-[\w.+-]+|application/vnd\.ms-fontobject"
                       r"|application/octet-stream)\s*[;,]")
SCHEME = re.compile(r"([a-z][a-z0-9+.\-]*):")

# What a plainly written tag looks like: such a tag reads the same in every parser, so it may be copied as it is.
# Whitespace is HTML's (a browser splits attributes at these five characters only).
WS = r"[ \t\n\r\f]"
NAME = r"[A-Za-z][A-Za-z0-9._:-]*"
ATTRIBUTE = rf"""[A-Za-z_:][-A-Za-z0-9_:.]*(?:{WS}*={WS}*(?:"[^"<>]*"|'[^'<>]*'))?"""
PLAIN_START_TAG = re.compile(rf"<({NAME})((?:{WS}+{ATTRIBUTE})*){WS}*/?>")
PLAIN_END_TAG = re.compile(rf"</({NAME}){WS}*>")
PLAIN_ATTRIBUTE = re.compile(rf"{WS}+({ATTRIBUTE})")
ANY_ATTRIBUTE = re.compile(r"""([^\s"'>/=]+)(?:\s*=\s*(?:"[^"]*"|'[^']*'|[^\s>]*))?""")
ATTRIBUTE_NAME = re.compile(r"[A-Za-z_:][-A-Za-z0-9_:.]*")
# A comment that ends at its first "-->" in every parser (no "-", "!", "<" or ">" inside): kept, as Graphviz writes
# them into its SVG; any other comment goes.
PLAIN_COMMENT = re.compile(r"<!--[^<>!-]*-->")
REFERENCE = re.compile(r"&(?:#[0-9]+|#[xX][0-9a-fA-F]+|[A-Za-z][A-Za-z0-9]*);")

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
        return (urlsplit(url).hostname or "an unnamed host")[:80]
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
    first = _SPACES.match(text, start).end()
    quote = text[first:first + 1]
    if quote in ("'", '"'):
        end = text.find(quote, first + 1)
        return text[first + 1:end if end > 0 else len(text)]
    end = _BARE_URL_END.search(text, first)
    return text[first:end.start() if end else len(text)]


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
# Reading: html.parser's tokens, each with the exact text it was read from


@dataclass
class Token:
    """One thing html.parser read: kind is start, end, text, comment, decl or pi; `raw` the source text it covers."""

    kind: str
    name: str = ""
    attrs: list[tuple[str, str | None]] = field(default_factory=list)
    closed: bool = False  # <tag ... />
    raw: str = ""
    tag_text: str = ""  # what html.parser took as the start tag


class _Reader(HTMLParser):
    def __init__(self, source: str) -> None:
        super().__init__(convert_charrefs=False)
        self.source = source
        self.line_starts = [0] + [match.end() for match in re.finditer("\n", source)]
        self.found: list[tuple[int, Token]] = []

    def _add(self, token: Token) -> None:
        self.found.append((self.position(), token))

    def handle_starttag(self, tag, attrs):
        self._add(Token("start", tag, attrs, tag_text=self.get_starttag_text() or ""))

    def handle_startendtag(self, tag, attrs):
        self._add(Token("start", tag, attrs, closed=True, tag_text=self.get_starttag_text() or ""))

    def handle_endtag(self, tag):
        self._add(Token("end", tag))

    def handle_data(self, data):
        self._add(Token("text"))

    def handle_entityref(self, name):
        self._add(Token("text"))

    def handle_charref(self, name):
        self._add(Token("text"))

    def handle_comment(self, data):
        self._add(Token("comment"))

    def handle_decl(self, decl):
        self._add(Token("decl", decl))

    def unknown_decl(self, data):
        self._add(Token("comment"))

    def handle_pi(self, data):
        self._add(Token("pi"))

    def parse_marked_section(self, i, report=1):
        """`<![` that opens no CDATA section: a bogus comment, as a browser reads it (older html.parser raises)."""
        try:
            return super().parse_marked_section(i, report)
        except AssertionError:
            return self.parse_bogus_comment(i, report)

    def position(self) -> int:
        line, column = self.getpos()
        return self.line_starts[line - 1] + column


COMMENT_END = re.compile(r"--\s*>")


def _defuse_unterminated(source: str) -> str:
    """`source` with the `<` that cannot begin a complete tag or comment written as `&lt;`: after the last `>` no
    tag ends, after the last `-->` no comment does. html.parser would take them as text all the same, but only after
    searching the rest of the input for each one (minutes for a few hundred kB of `<!--`)."""
    comment_end = max((match.start() for match in COMMENT_END.finditer(source)), default=-1)
    if comment_end >= 0:
        head, tail = source[:comment_end], source[comment_end:]
        source = head + tail.replace("<!--", "&lt;!--")
    else:
        source = source.replace("<!--", "&lt;!--")
    last_gt = source.rfind(">")
    return source[:last_gt + 1] + source[last_gt + 1:].replace("<", "&lt;")


def read_tokens(source: str) -> list[Token]:
    """The tokens of `source` in order; bytes html.parser passed over silently belong to the token before them.
    Where html.parser gives up (it raises on some malformed declarations), the rest is one text token."""
    source = _defuse_unterminated(source)
    reader = _Reader(source)
    try:
        reader.feed(source)
        reader.close()
    except AssertionError:
        reader.found.append((reader.position(), Token("text")))
    starts = [start for start, _ in reader.found] + [len(source)]
    tokens = []
    if starts[0] > 0:
        tokens.append(Token("text", raw=source[:starts[0]]))
    for index, (start, token) in enumerate(reader.found):
        token.raw = source[start:starts[index + 1]]
        tokens.append(token)
    return tokens


# ------------------------------------------------------------------------------------------------------------
# Writing


def _local(name: str) -> str:
    return name.lower().rsplit(":", 1)[-1]


def _original_names(tag_text: str) -> dict[str, str]:
    """Lower-case name -> name as written in the tag (an SVG document needs viewBox, linearGradient as they are)."""
    match = re.match(rf"<({NAME})", tag_text)
    if not match:
        return {}
    names = {match.group(1).lower(): match.group(1)}
    for found in ANY_ATTRIBUTE.finditer(tag_text, match.end()):
        names.setdefault(found.group(1).lower(), found.group(1))
    return names


def _plain_values(tag_text: str) -> bool:
    """Every `&` in the tag begins a complete character reference (so every parser decodes the values alike)."""
    return all(REFERENCE.match(tag_text, match.start()) for match in re.finditer("&", tag_text))


def _note(text: str) -> str:
    return f'<span class="{NOTE_CLASS}">{html.escape(text)}</span>'


def _image_note(source: str) -> str:
    where = url_origin(source)
    return _note(f"remote image removed: {where}" if url_host(source) else f"image removed: it pointed to {where}")


@dataclass
class _Writer:
    """Writes the checked tokens; in a fragment (not `page`) it also keeps the open elements to close them."""

    page: bool
    xml: bool
    out: list[str] = field(default_factory=list)
    open: list[str] = field(default_factory=list)
    counts: Counter = field(default_factory=Counter)  # of the names in `open`
    dropping: list[str] = field(default_factory=list)  # inside an element dropped with its content
    style: list[str] | None = None  # the text of the <style> element being read

    def foreign(self) -> bool:
        """Inside SVG or MathML, where <tag/> closes the tag and no element is void."""
        return self.xml or any(self.counts[name] for name in FOREIGN_ROOTS)

    def _push(self, name: str) -> None:
        self.open.append(name)
        self.counts[name] += 1

    def _pop(self) -> str:
        name = self.open.pop()
        self.counts[name] -= 1
        return name

    def start(self, token: Token) -> None:
        local = _local(token.name)
        if self.dropping:
            if local == self.dropping[-1] and not token.closed:
                self.dropping.append(local)
            return
        if not re.fullmatch(NAME, token.name):
            return
        void = local in VOID and not self.foreign()
        if local == "script" or (local == "foreignobject" and not self.page):
            if not token.closed and not void:
                self.dropping.append(local)
            return
        if local == "meta" and self.page and _page_meta(token.attrs):
            self._write_start(token, token.attrs)
            return
        if local in DROP_TAG or local == "foreignobject" or (local in PAGE_ONLY and not self.page):
            self.out.append(_dropped_note(local, token.attrs))
            return
        if local == "style" and token.closed and not self.foreign():
            return  # in HTML <style/> opens a style sheet that html.parser would not read as one
        attrs = _checked_attributes(local, token.attrs)
        if attrs is None:
            self.out.append(_image_note(dict(token.attrs).get("src") or ""))
            return
        self._write_start(token, attrs)
        if local == "style" and not token.closed:
            self.style = []
        closes_itself = token.closed and (self.foreign() or local in FOREIGN_ROOTS)
        if not self.page and not void and not closes_itself:
            self._push(token.name.lower())

    def _write_start(self, token: Token, attrs: list[tuple[str, str | None]]) -> None:
        plain = PLAIN_START_TAG.fullmatch(token.raw)
        if (plain and token.raw == token.tag_text and attrs == token.attrs and _plain_values(token.raw)
                and len(PLAIN_ATTRIBUTE.findall(plain.group(2))) == len(token.attrs)):
            self.out.append(token.raw)
            return
        names = _original_names(token.tag_text)
        parts = [f"<{names.get(token.name, token.name)}"]
        for key, value in attrs:
            written = names.get(key, key)
            parts.append(f" {written}" if value is None else f' {written}="{html.escape(value, quote=True)}"')
        parts.append(" />" if token.closed else ">")
        self.out.append("".join(parts))

    def end(self, token: Token) -> None:
        name, local = token.name.lower(), _local(token.name)
        if self.dropping:
            if local == self.dropping[-1]:
                self.dropping.pop()
            return
        if local == "style":
            self._flush_style()
        if local in DROP_TAG or local in ("script", "foreignobject") or (local in PAGE_ONLY and not self.page):
            return
        written = token.raw if PLAIN_END_TAG.fullmatch(token.raw) else f"</{token.name}>"
        if self.page:
            self.out.append(written)
            return
        if not self.counts[name]:  # a fragment does not close what surrounds it
            return
        while self.open:
            top = self._pop()
            if top == name:
                self.out.append(written)
                return
            self.out.append(f"</{top}>")

    def text(self, token: Token) -> None:
        if self.dropping:
            return
        if self.style is not None:
            self.style.append(token.raw)
        else:
            self.out.append(token.raw.replace("<", "&lt;"))

    def _flush_style(self) -> None:
        """The style element's text, whole: no raw < (it could end the element early), and CSS that loads nothing."""
        if self.style is None:
            return
        css, self.style = "".join(self.style), None
        if self.xml:  # CDATA sections become escaped text, as XML needs without them
            css = re.sub(r"<!\[CDATA\[(.*?)(?:\]\]>|$)", lambda m: html.escape(m.group(1), quote=False), css,
                         flags=re.S)
            css = css.replace("<", "&lt;")
        else:
            css = css.replace("<", "\\3c ")
        self.out.append(clean_css(css, entities=True))

    def comment(self, token: Token) -> None:
        if not self.dropping and self.style is None and PLAIN_COMMENT.fullmatch(token.raw):
            self.out.append(token.raw)

    def declaration(self, token: Token) -> None:
        """A page keeps its <!DOCTYPE html>; nothing else declared survives."""
        if self.page and not self.dropping and token.name.strip().lower() == "doctype html":
            self.out.append(token.raw if re.fullmatch(r"<!doctype html>", token.raw, re.I) else "<!DOCTYPE html>")

    def finish(self) -> str:
        self._flush_style()
        if not self.page:
            self.out.extend(f"</{name}>" for name in reversed(self.open))
            self.open.clear()
            self.counts.clear()
        return "".join(self.out)


def _page_meta(attrs: list[tuple[str, str | None]]) -> bool:
    """The metas a page keeps: its charset, viewport and generator."""
    values = {key.lower(): value for key, value in attrs}
    if set(values) == {"charset"}:
        return True
    return set(values) == {"name", "content"} and (values["name"] or "").lower() in ("viewport", "generator")


def _dropped_note(local: str, attrs: list[tuple[str, str | None]]) -> str:
    """What shows where a frame, embedded object or remote style sheet was; nothing for the rest."""
    values = {key.lower(): value or "" for key, value in attrs}
    if local in EMBEDDING and local != "frameset":
        target = values.get("src") or values.get("data") or ""
        return _note(f"embedded content removed: {url_origin(target)}" if target else "embedded content removed")
    if local == "link" and "stylesheet" in values.get("rel", "").lower() and url_host(values.get("href", "")):
        return _note(f"remote style sheet removed: {url_origin(values['href'])}")
    return ""


def _checked_attributes(local: str, attrs: list[tuple[str, str | None]]) -> list[tuple[str, str | None]] | None:
    """The attributes of element `local` that may stay; None for an <img> whose source may not load."""
    kept = []
    for key, value in attrs:
        name, text = _local(key), value or ""
        if (not ATTRIBUTE_NAME.fullmatch(key) or name.startswith("on") or name in DROP_ATTRIBUTES
                or key.lower() == "xml:base"):
            continue
        if name in RESOURCE_ATTRIBUTES:
            follows = link_url_ok if local in NAVIGATION_ELEMENTS and name == "href" else resource_url_ok
            if not follows(text):
                if local == "img" and name == "src":
                    return None
                continue
        elif name in SRCSET_ATTRIBUTES:
            if not srcset_ok(text):
                continue
        elif name == "style":
            cleaned = clean_css(text)
            if not cleaned.strip():
                continue
            value = cleaned
        elif CSS_URL.search(_unescape_css(text)) or CSS_FORBIDDEN.search(_unescape_css(text)):
            if not css_safe(text):  # an SVG presentation attribute such as fill="url(...)"
                continue
        kept.append((key, value))
    return kept


def sanitize_html(source: str, page: bool = False, xml: bool = False) -> str:
    """`source` without anything that runs or loads from elsewhere (see the module docstring); `page` for a whole
    page (keeps its doctype, html/head/body, charset and viewport), `xml` for an SVG document."""
    writer = _Writer(page=page, xml=xml)
    for token in read_tokens(source):
        if token.kind == "start":
            writer.start(token)
        elif token.kind == "end":
            writer.end(token)
        elif token.kind == "text":
            writer.text(token)
        elif token.kind == "decl":
            writer.declaration(token)
        elif token.kind == "comment":
            writer.comment(token)
    return writer.finish()


def sanitize_svg(source: str) -> str:
    """An SVG document (an image/svg+xml output) without scripts, handlers, foreignObject or external references."""
    return sanitize_html(source, xml=True)
