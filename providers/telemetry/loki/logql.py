"""LogQL selector templates: one placeholder, filled with values no caller can use to bend the query.

A template such as `{host=~"{hosts}"}` or `{job="{workload_id}", stream="stdout"}` names one placeholder that must
be the whole quoted value of a positive label matcher (`=` or `=~`) inside the stream selector. It is parsed once
(at boot) and every value put in its place is escaped for where it sits:

- in a regex matcher (`=~`), RE2's metacharacters are escaped first, so the value matches itself only;
- then for the string around it: in a `"..."` string (Go's escaping, which LogQL uses) backslash, quote and
  control characters are escaped; a `` `...` `` raw string holds its characters as they are, so only a value of
  printable characters without a backtick is written raw (Loki's lexer refuses a NUL or a byte order mark anywhere
  in a query, Go drops carriage returns from raw strings, and a backtick would end the string); any other value is
  written in a `"..."` string instead, whatever the template's quoting (the quoting changes, the meaning does not).

`render_any` puts several values into one matcher that matches exactly those values: an anchored RE2 alternation
(`host=~"a|b|c"`; an `=` matcher becomes `=~` for it). A value that no LogQL string can carry (a lone UTF-16
surrogate) is refused with ValueError; `representable` tells beforehand.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

#: RE2's metacharacters outside a character class; escaping these makes any text match only itself
_RE2_ESCAPES = str.maketrans({ch: "\\" + ch for ch in "\\.+*?()|[]{}^$"})
_GO_ESCAPES = str.maketrans({"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t"})
_SURROGATE = re.compile("[\ud800-\udfff]")
_LABEL_BEFORE = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*$")
DOUBLE = '"'
BACKTICK = "`"
SEPARATOR = "|"
GROUP_OPEN = "(?:"
GROUP_CLOSE = ")"


class TemplateError(ValueError):
    """The template cannot be used; the message says why and how a usable one looks."""


def regex_escape(value: str) -> str:
    """`value` as an RE2 pattern that matches exactly `value` (Loki anchors label regexes at both ends)."""
    return value.translate(_RE2_ESCAPES)


def go_escape(value: str) -> str:
    """The body of a Go (and so LogQL) double-quoted string literal whose value is `value`."""
    escaped = value.translate(_GO_ESCAPES)
    if escaped.isprintable():
        return escaped
    out: list[str] = []
    for ch in escaped:
        if ch.isprintable():
            out.append(ch)
        elif ord(ch) < 0x80:  # Go's \x escapes a byte: only an ASCII one is a whole character
            out.append(f"\\x{ord(ch):02x}")
        elif ord(ch) <= 0xFFFF:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(f"\\U{ord(ch):08x}")
    return "".join(out)


def representable(value: str) -> bool:
    """Whether a LogQL string can carry `value` at all (it must be valid Unicode: no lone surrogate)."""
    return _SURROGATE.search(value) is None


def fits_raw(value: str) -> bool:
    """Whether `value` can stand as it is in a Go raw (backtick) string of a query Loki accepts: printable
    characters only (no NUL, carriage return or other control character, no byte order mark) and no backtick."""
    return value.isprintable() and BACKTICK not in value


def quote(value: str, preferred: str) -> str:
    """`value` as a LogQL string literal: backticks when preferred and possible, else double quotes."""
    if not representable(value):
        raise ValueError("the value holds a lone surrogate, which no LogQL string can carry")
    if preferred == BACKTICK and fits_raw(value):
        return BACKTICK + value + BACKTICK
    return DOUBLE + go_escape(value) + DOUBLE


def _string_end(text: str, start: int, where: str) -> int:
    """The index of the quote closing the string literal opened at `start`."""
    opener = text[start]
    i = start + 1
    while i < len(text):
        ch = text[i]
        if opener == DOUBLE and ch == "\\":
            i += 2
            continue
        if ch == opener:
            return i
        if opener == DOUBLE and ch == "\n":
            break
        i += 1
    raise TemplateError(f"{where}; the string opened at character {start + 1} is never closed")


class SelectorTemplate:
    """A LogQL query template with one placeholder standing for the whole quoted value of a label matcher.

    Parsed once; raises TemplateError (a message fit for a settings error) when the placeholder is missing, stands
    outside quotes or beside other text in its string, appears twice, sits outside the stream selector, or follows
    a negative matcher (`!=`, `!~`). The matcher's label is `label`, its operator `operator` (`=` or `=~`).
    """

    def __init__(self, template: str, placeholder: str) -> None:
        self.template = template
        self.placeholder = placeholder
        example = '{host=~"' + placeholder + '"}'
        where = f"the placeholder {placeholder} must be the whole quoted value of a label matcher, e.g. {example}"
        found: tuple[int, int, int, str, str] | None = None  # (op start, quote start, quote end, op, label)
        depth = 0
        selector_closed = False
        i = 0
        while i < len(template):
            if template.startswith(placeholder, i):
                raise TemplateError(f"{where}; it stands outside quotes at character {i + 1}")
            ch = template[i]
            if ch in (DOUBLE, BACKTICK):
                end = _string_end(template, i, where)
                content = template[i + 1 : end]
                if placeholder in content:
                    if content != placeholder:
                        raise TemplateError(f"{where}; here it shares its string with other text: {content!r}")
                    if found is not None:
                        raise TemplateError(f"{where}; it appears more than once")
                    if depth != 1 or selector_closed:
                        raise TemplateError(f"{where}, inside the stream selector (the first {{...}})")
                    found = self._matcher(template[:i], i, end, where)
                i = end + 1
                continue
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
                if depth == 0:
                    selector_closed = True
            i += 1
        if found is None:
            raise TemplateError(f"{where}; the template does not contain it")
        op_start, self._quote_start, self._quote_end, self.operator, self.label = found
        #: the quoting the template chose for the value
        self.quoting = template[self._quote_start]
        self._head = template[:op_start]
        self._gap = template[op_start + len(self.operator) : self._quote_start]
        self._tail = template[self._quote_end + 1 :]

    @staticmethod
    def _matcher(before: str, quote_start: int, quote_end: int, where: str) -> tuple[int, int, int, str, str]:
        stripped = before.rstrip()
        for op in ("=~", "!~", "!=", "="):
            if stripped.endswith(op):
                break
        else:
            raise TemplateError(f"{where}; here no label name and = or =~ precede it")
        if op.startswith("!"):
            raise TemplateError(f"{where}; a negative matcher ({op}) would select every other stream")
        label = _LABEL_BEFORE.search(stripped[: -len(op)])
        if label is None:
            raise TemplateError(f"{where}; here no label name precedes {op}")
        return len(stripped) - len(op), quote_start, quote_end, op, label.group(1)

    def __repr__(self) -> str:
        return f"SelectorTemplate({self.template!r}, {self.placeholder!r})"

    def _fill(self, operator: str, literal: str) -> str:
        return self._head + operator + self._gap + literal + self._tail

    def render(self, value: str) -> str:
        """The query for one value, with the matcher's operator as written: it selects exactly `value`."""
        content = regex_escape(value) if self.operator == "=~" else value
        return self._fill(self.operator, quote(content, self.quoting))

    # The pieces of render_any, for callers that size queries before building them (URL length, see loki.py):
    # render_any(values) == prefix(q) + alternation(values, q) + suffix(q), with q = quoting_for(values). The
    # alternation is made of alternative(v, q) joined by SEPARATOR, except that a run of consecutive values sharing
    # one domain (the text from their first dot) is written once as GROUP_OPEN + heads joined + GROUP_CLOSE +
    # domain: `(?:gpu-1|gpu-2)\.dc` for gpu-1.dc and gpu-2.dc, which matches exactly those two names and is
    # shorter for the usual cluster of FQDNs.

    def quoting_for(self, values: Sequence[str]) -> str:
        """The quoting `render_any` uses for `values`: the template's, unless a value does not fit a raw string."""
        if self.quoting == BACKTICK and all(fits_raw(v) for v in values):
            return BACKTICK
        return DOUBLE

    def alternative(self, value: str, quoting: str) -> str:
        """`value` as one alternative of the alternation, escaped for RE2 and then for the `quoting` string."""
        if not representable(value):
            raise ValueError("the value holds a lone surrogate, which no LogQL string can carry")
        pattern = regex_escape(value)
        return pattern if quoting == BACKTICK else go_escape(pattern)

    def alternation(self, values: Sequence[str], quoting: str) -> str:
        """The escaped RE2 alternation matching exactly `values` (see above for the shared-domain runs)."""
        out: list[str] = []
        i = 0
        while i < len(values):
            head, domain = split_domain(values[i])
            j = i + 1
            while domain and j < len(values) and split_domain(values[j])[1] == domain:
                j += 1
            if j - i == 1 or not domain:
                out.append(self.alternative(values[i], quoting))
            else:
                heads = SEPARATOR.join(self.alternative(split_domain(v)[0], quoting) for v in values[i:j])
                out.append(GROUP_OPEN + heads + GROUP_CLOSE + self.alternative(domain, quoting))
            i = j
        return SEPARATOR.join(out)

    def prefix(self, quoting: str) -> str:
        return self._head + "=~" + self._gap + quoting

    def suffix(self, quoting: str) -> str:
        return quoting + self._tail

    def render_any(self, values: Sequence[str]) -> str:
        """The query whose matcher selects exactly the streams whose label is one of `values` (an `=~` matcher)."""
        if not values:
            raise ValueError("render_any needs at least one value")
        q = self.quoting_for(values)
        return self.prefix(q) + self.alternation(values, q) + self.suffix(q)


def selector_end(query: str) -> int:
    """The index of the `}` that closes the stream selector (the first `{...}`) of a query; TemplateError if none."""
    depth = 0
    i = 0
    while i < len(query):
        ch = query[i]
        if ch in (DOUBLE, BACKTICK):
            i = _string_end(query, i, "the query's strings must be closed") + 1
            continue
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    raise TemplateError("the query has no stream selector {...}")


def with_matcher(query: str, matcher: str) -> str:
    """`query` with one more label matcher (such as `host=~"a|b"`) in its stream selector, after the others."""
    end = selector_end(query)
    head = query[:end].rstrip()
    return head + ("" if head.endswith("{") else ", ") + matcher + query[end:]


def string(value: str) -> str:
    """`value` as a double-quoted LogQL string (every value can be written so, see `quote`)."""
    return quote(value, DOUBLE)


def literal_alternation(literals: Sequence[str]) -> str:
    """An RE2 pattern matching any of `literals` as a substring: each escaped, joined by `|`.

    Loki evaluates a `|~` whose pattern is an alternation of literals as that many substring searches, without a
    regular expression engine (its line-filter simplification). Go's regexp parser, which reads the pattern first,
    factors a prefix shared by neighbouring alternatives (`CUDA|Cuda` becomes `C(?:UDA|uda)`), a shape the older
    simplification does not take apart: the literals are ordered so that no two neighbours share a first character.
    """
    groups: dict[str, list[str]] = {}
    for literal in dict.fromkeys(literals):
        if literal:
            groups.setdefault(literal[0], []).append(literal)
    ordered: list[str] = []
    last = ""
    while groups:
        # the largest group whose first character differs from the last one placed (ties: the first seen)
        key = max((k for k in groups if k != last), key=lambda k: len(groups[k]), default=None)
        if key is None:
            key = last  # only literals sharing the last first character are left: they must stand side by side
        ordered.append(groups[key].pop(0))
        if not groups[key]:
            del groups[key]
        last = key
    return SEPARATOR.join(regex_escape(literal) for literal in ordered)


def split_domain(value: str) -> tuple[str, str]:
    """(the name before its first dot, the rest from that dot on); the rest is empty for a name with no dot."""
    at = value.find(".")
    return (value, "") if at < 0 else (value[:at], value[at:])


__all__ = [
    "SelectorTemplate",
    "selector_end",
    "with_matcher",
    "string",
    "literal_alternation",
    "split_domain",
    "TemplateError",
    "regex_escape",
    "go_escape",
    "quote",
    "representable",
    "fits_raw",
]
