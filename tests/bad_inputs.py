"""Property-based bad inputs for the readers a user feeds from outside (``hypothesis``).

:func:`mutated_json` turns a valid document into a broken one (a key dropped, a value swapped for another
type, a huge, NaN or infinite number, unicode, deep nesting) and :func:`mutated_text` breaks its text (cut
short, bytes spliced in, numbers past what Python reads); :func:`assert_clear` runs a reader on one input
and fails on anything but a :class:`HeadpruneError` whose one-line message names the input and says what to
do. :data:`FUZZ` keeps every property fast and the same on every run (CI is deterministic).
"""
from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from pruning_core.core.errors import HeadpruneError

EXAMPLES = 200
FUZZ = settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])

# the edges of what JSON can say: past float range (inf), the smallest denormal, past int64, NaN
EDGE_NUMBERS = [0, 1, -1, 2, 0.5, -0.0, 1e308, -1e308, 1.7976931348623157e308, 5e-324, 2 ** 63, -(2 ** 63) - 1,
                10 ** 30, float("inf"), float("-inf"), float("nan")]
EDGE_TEXT = ["", " ", "0", "1", "true", "null", "\u0000", "\ud800", "e:f.f", "😀" * 3, "a" * 300, "[]", "{}"]

scalars = (st.none() | st.booleans() | st.sampled_from(EDGE_NUMBERS) | st.integers()
           | st.floats(allow_nan=True, allow_infinity=True) | st.sampled_from(EDGE_TEXT) | st.text(max_size=12))
json_values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4)
                           | st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=12)


def _paths(doc: Any, prefix: tuple = ()) -> list[tuple]:
    """Every key/index path in ``doc``, the root ``()`` first."""
    out = [prefix]
    if isinstance(doc, dict):
        for k, v in doc.items():
            out += _paths(v, prefix + (k,))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            out += _paths(v, prefix + (i,))
    return out


def _nested(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


@st.composite
def _mutation(draw, doc: Any) -> Any:
    path = draw(st.sampled_from(_paths(doc)))
    how = draw(st.sampled_from(["drop", "swap", "swap", "number", "nest", "wrap"]))
    if how == "drop" and path:
        parent = doc
        for key in path[:-1]:
            parent = parent[key]
        del parent[path[-1]]
        return doc
    new = {"drop": lambda: None, "swap": lambda: draw(json_values),
           "number": lambda: draw(st.sampled_from(EDGE_NUMBERS)),
           "nest": lambda: _nested(draw(st.integers(1, 50))), "wrap": lambda: [_at(doc, path)]}[how]()
    if not path:
        return new
    parent = doc
    for key in path[:-1]:
        parent = parent[key]
    parent[path[-1]] = new
    return doc


def _at(doc: Any, path: tuple) -> Any:
    for key in path:
        doc = doc[key]
    return doc


@st.composite
def mutated_json(draw, valid: Any) -> Any:
    """A copy of the JSON value ``valid`` with one to three mutations."""
    doc = json.loads(json.dumps(valid))
    for _ in range(draw(st.integers(1, 3))):
        doc = draw(_mutation(doc))
    return doc


def dumps(doc: Any) -> str:
    """``doc`` as JSON text as any tool might write it: NaN and Infinity allowed."""
    return json.dumps(doc, allow_nan=True, ensure_ascii=False)


_NUMBER = re.compile(r"(?<=[\[ ])-?\d+(\.\d+)?(?=[,\]}])")     # a number value in json.dumps' output


@st.composite
def mutated_text(draw, valid: str) -> str:
    """The text ``valid`` broken as text: cut short, a slice replaced, or a number no reader can take."""
    how = draw(st.sampled_from(["cut", "splice", "digits", "exponent", "deep", "random"]))
    at = draw(st.integers(0, len(valid)))
    if how == "cut":
        return valid[:at]
    if how == "splice":
        return valid[:at] + draw(st.text(max_size=8)) + valid[at + draw(st.integers(0, 8)):]
    if how in ("digits", "exponent"):       # past Python's 4300-digit limit for int(); 1e999 reads as infinity
        numbers = list(_NUMBER.finditer(valid))
        big = "9" * 5000 if how == "digits" else "1e999"
        if not numbers:
            return big
        found = numbers[draw(st.integers(0, len(numbers) - 1))]
        return valid[:found.start()] + big + valid[found.end():]
    if how == "deep":              # nesting past Python's recursion limit
        return "[" * 5_000 + "]" * 5_000
    return draw(st.text(max_size=60))


def documents(valid: dict) -> st.SearchStrategy[str]:
    """JSON text of ``valid`` broken as data (mostly) or as text."""
    return st.one_of(mutated_json(valid).map(dumps), mutated_json(valid).map(dumps),
                     mutated_json(valid).map(dumps), mutated_text(dumps(valid)))


FIX_WORDS = re.compile(r"\b(make|write|copy|use|save|fix|check|re-create|recreate|download|give|rename|quote|load|"
                       r"choose|open|run|prepare|delete|edit|re-run|rerun|remove|keep|export|add|fill|number|score)\b", re.I)


def assert_clear(read: Callable[[], Any], names: str) -> str | None:
    """Run ``read()``; a return is fine, a :class:`HeadpruneError` must be one line that contains ``names``
    (the file or what was read) and says what to do; anything else fails. Returns the message, if any."""
    try:
        read()
    except HeadpruneError as exc:
        message = str(exc)
        assert message.strip(), f"an empty {type(exc).__name__}"
        assert "\n" not in message, f"not one line: {message!r}"
        assert names in message, f"the message does not name {names!r}: {message}"
        assert FIX_WORDS.search(message), f"the message does not say what to do: {message}"
        return message
    return None


def write(path, text: str) -> str:
    """Write ``text`` as a user's file would hold it (a lone surrogate becomes bytes that are not UTF-8)."""
    path.write_bytes(text.encode("utf-8", "surrogatepass"))
    return str(path)
