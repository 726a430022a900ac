"""Any text pasted as a dashboard link, or as the mask text in its address bar, is read or refused with a
:class:`HeadpruneError` that names the link and says what to do: never urllib's or int()'s own error."""
from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from bad_inputs import FUZZ, assert_clear, mutated_text
from pruning_core.core.heads import HeadLayout
from pruning_core.core.io.share_link import decode_mask, encode_mask, mask_from_link, parse_link
from pruning_core.core.heads import HeadMask

LAYOUTS = [HeadLayout({"encoder_self": (4, 4)}),
           HeadLayout({"encoder_self": (6, 6), "decoder_self": (6, 6), "cross": (6, 6)}),
           HeadLayout({"decoder_self": (9, 0, 3)})]
MASKS = [encode_mask(HeadMask.from_removed(layout, layout.heads()[1::3])) for layout in LAYOUTS]

hosts = st.sampled_from(["localhost:8501", "localhost[]:8501", "[::1]:8501", "[::1", "::1]", "[", "]",
                         "localhost:99999", "localhost:port", "user@host", "", "héllo.local"]) | st.text(max_size=12)
values = st.sampled_from(["", "default", "128", "-3", "0", "1e3", "9" * 5000, "%zz", "%00", "a&b", "\ud800"]) \
    | st.text(max_size=12)
params = st.sampled_from(["model", "task", "scorer", "n", "mask", "n", "mask", "", "x"])


@st.composite
def links(draw) -> str:
    """A dashboard link assembled from parts of which any may be odd, then maybe broken as text."""
    scheme = draw(st.sampled_from(["http://", "https://", "", "//", "http:///", "ftp://", "http:"]))
    path = draw(st.sampled_from(["/head_map", "/", "", "/head_map/", "/a?b"]))
    pairs = [(draw(params), draw(values | st.sampled_from(MASKS) | mutated_text(draw(st.sampled_from(MASKS)))))
             for _ in range(draw(st.integers(0, 6)))]
    query = "&".join(f"{k}={v}" for k, v in pairs)
    link = f"{scheme}{draw(hosts)}{path}?{query}" if draw(st.booleans()) else query
    return draw(st.just(link) | mutated_text(link))


@FUZZ
@given(links())
def test_any_link_is_read_or_refused_clearly(link):
    assert_clear(lambda: parse_link(link), "link")


@FUZZ
@given(links(), st.sampled_from(LAYOUTS))
def test_the_mask_of_any_link_is_read_or_refused_clearly(link, layout):
    assert_clear(lambda: mask_from_link(link, layout), "link")


@FUZZ
@given(st.sampled_from(MASKS).flatmap(mutated_text) | st.text(max_size=40), st.sampled_from(LAYOUTS))
def test_any_mask_text_is_read_or_refused_clearly(text, layout):
    assert_clear(lambda: decode_mask(text, layout), "link")


def test_brackets_in_the_host_are_a_clear_error():
    message = assert_clear(lambda: parse_link("http://localhost[]:8501/head_map?mask=e:f.f"), "link")
    assert message is not None and "localhost[]:8501" in message
