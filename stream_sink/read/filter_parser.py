"""The string form of row filters: a small SQL-like WHERE clause.

Grammar (keywords case-insensitive)::

    expr      := term ("or" term)*
    term      := factor ("and" factor)*
    factor    := "not" factor | "(" expr ")" | "true" | "false" | predicate
    predicate := column (cmp literal | ["not"] "in" "(" literal ("," literal)* ")"
                          | "is" ["not"] "null")
    cmp       := "=" | "==" | "!=" | "<>" | "<" | "<=" | ">" | ">="
    column    := name ("." name)* | "quoted name" | `quoted name`
    literal   := 'text' ('' escapes a quote) | number | true | false

Literals stay Python values (``'2024-01-01'`` is a string); binding converts them
to the column's type.
"""

from __future__ import annotations

import re
from typing import Any

from stream_sink.exceptions import ValidationError
from stream_sink.read.expressions import (
    AlwaysFalse,
    AlwaysTrue,
    Expression,
    Predicate,
    and_,
    not_,
    or_,
)

_TOKEN = re.compile(
    r"""\s*(?:
        (?P<str>'(?:[^']|'')*')
      | (?P<qname>"[^"]+"|`[^`]+`)
      | (?P<num>[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?)
      | (?P<op><=|>=|<>|!=|==|=|<|>|\(|\)|,)
      | (?P<name>[A-Za-z_][A-Za-z0-9_.$]*)
    )""",
    re.VERBOSE,
)
_CMP = {"=": "==", "==": "==", "!=": "!=", "<>": "!=", "<": "<", "<=": "<=", ">": ">", ">=": ">="}


def parse_filter(text: str) -> Expression:
    """Parse ``text``; a syntax error raises ValidationError naming the position."""
    parser = _Parser(text)
    expr = parser.expr()
    if parser.peek() is not None:
        parser.fail("unexpected text")
    return expr


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = _tokenize(text)
        self.i = 0

    # --- token access -------------------------------------------------------------

    def peek(self) -> tuple[str, str, int] | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def take(self) -> tuple[str, str, int]:
        tok = self.peek()
        if tok is None:
            self.fail("unexpected end of filter")
        self.i += 1
        return tok  # type: ignore[return-value]

    def keyword(self, *words: str) -> bool:
        tok = self.peek()
        if tok is not None and tok[0] == "name" and tok[1].lower() in words:
            self.i += 1
            return True
        return False

    def symbol(self, sym: str) -> bool:
        tok = self.peek()
        if tok is not None and tok[0] == "op" and tok[1] == sym:
            self.i += 1
            return True
        return False

    def expect(self, sym: str) -> None:
        if not self.symbol(sym):
            self.fail(f"expected {sym!r}")

    def fail(self, why: str) -> None:
        tok = self.peek()
        pos = tok[2] if tok else len(self.text)
        raise ValidationError(f"cannot parse filter {self.text!r} at position {pos}: {why}")

    # --- grammar ----------------------------------------------------------------------

    def expr(self) -> Expression:
        left = self.term()
        while self.keyword("or"):
            left = or_(left, self.term())
        return left

    def term(self) -> Expression:
        left = self.factor()
        while self.keyword("and"):
            left = and_(left, self.factor())
        return left

    def factor(self) -> Expression:
        if self.keyword("not"):
            return not_(self.factor())
        if self.symbol("("):
            inner = self.expr()
            self.expect(")")
            return inner
        if self.keyword("true"):
            return AlwaysTrue()
        if self.keyword("false"):
            return AlwaysFalse()
        return self.predicate()

    def predicate(self) -> Expression:
        kind, value, _ = self.take()
        if kind == "qname":
            name = value[1:-1]
        elif kind == "name":
            name = value
        else:
            self.i -= 1
            self.fail("expected a column name")
        if self.keyword("is"):
            negated = self.keyword("not")
            if not self.keyword("null"):
                self.fail("expected NULL")
            return Predicate("not_null" if negated else "is_null", name)
        negated = self.keyword("not")
        if self.keyword("in"):
            return Predicate("not_in" if negated else "in", name, self.literal_list())
        if negated:
            self.fail("expected IN after NOT")
        kind, op, _ = self.take()
        if kind != "op" or op not in _CMP:
            self.i -= 1
            self.fail("expected a comparison operator")
        return Predicate(_CMP[op], name, (self.literal(),))

    def literal_list(self) -> tuple[Any, ...]:
        self.expect("(")
        values = [self.literal()]
        while self.symbol(","):
            values.append(self.literal())
        self.expect(")")
        return tuple(values)

    def literal(self) -> Any:
        kind, value, _ = self.take()
        if kind == "str":
            return value[1:-1].replace("''", "'")
        if kind == "num":
            return float(value) if any(c in value for c in ".eE") else int(value)
        if kind == "name" and value.lower() in ("true", "false"):
            return value.lower() == "true"
        if kind == "name" and value.lower() == "null":
            self.i -= 1
            self.fail("compare with NULL using IS NULL / IS NOT NULL")
        self.i -= 1
        self.fail("expected a literal")
        return None


def _tokenize(text: str) -> list[tuple[str, str, int]]:
    tokens: list[tuple[str, str, int]] = []
    pos = 0
    while pos < len(text):
        if text[pos:].strip() == "":
            break
        m = _TOKEN.match(text, pos)
        if m is None or m.lastgroup is None:
            start = len(text) - len(text[pos:].lstrip())
            raise ValidationError(f"cannot parse filter {text!r} at position {start}")
        tokens.append((m.lastgroup, m.group(m.lastgroup), m.start(m.lastgroup)))
        pos = m.end()
    return tokens
