"""Decoded views (issue 29 item 1): detect on what a reader sees, replace raw."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from ctxledger.pipelines.redact.decode import decode_value, decoded_view


def test_json_unicode_escapes_decode_and_map_back():
    raw = json.dumps({"full_name": "Magdalena Szymańska", "e": "😀 x"})
    view = decoded_view(raw)
    assert view is not None and "Magdalena Szymańska" in view.text
    start = view.text.index("Magdalena")
    end = start + len("Magdalena Szymańska")
    assert raw[slice(*view.to_raw(start, end))] == "Magdalena Szyma\\u0144ska"
    smiley = view.text.index("😀")
    assert raw[slice(*view.to_raw(smiley, smiley + 1))] == "\\ud83d\\ude00"


def test_structure_escapes_stay_escaped():
    raw = json.dumps({"q": 'a"b\\c\nd', "lone": "\udc80"}, ensure_ascii=True)
    view = decoded_view(raw)
    assert view is None or json.loads(view.text) == json.loads(raw)


def test_nested_json_string_decodes_one_level_down():
    raw = json.dumps({"body": json.dumps({"n": "Szymańska"})})
    view = decoded_view(raw)
    assert view is not None and "Szymańska" in view.text
    assert json.loads(json.loads(view.text)["body"]) == {"n": "Szymańska"}


def test_html_entities_and_percent_encoding():
    assert decode_value("Szyma&#324;ska &amp; Co") == "Szymańska & Co"
    assert decode_value("mailto:jane%40example.com") == "mailto:jane@example.com"
    assert decode_value("100% sure, %zz, %C3") == "100% sure, %zz, %C3"
    assert decode_value("&notanentity; &quot;") == "&notanentity; &quot;"


def test_python_ascii_escapes_of_letters():
    assert decode_value(ascii("José Peña")) == "'José Peña'"
    assert decode_value("\\x41 \\x0a") == "\\x41 \\x0a"  # ASCII, controls stay


def test_plain_text_has_no_view():
    assert decoded_view("nothing encoded here") is None
    assert decode_value("") == ""


@given(st.dictionaries(st.text(max_size=8), st.text(max_size=30), max_size=4))
def test_decoded_json_parses_to_the_same_document(doc):
    raw = json.dumps(doc)  # ensure_ascii: every non-ASCII char escaped
    view = decoded_view(raw)
    text = raw if view is None else view.text
    assert json.loads(text) == json.loads(raw)


@given(st.text(max_size=60), st.integers(0, 60), st.integers(0, 60))
def test_raw_spans_are_ordered_and_within_bounds(value, a, b):
    raw = json.dumps(value)
    view = decoded_view(raw)
    if view is None:
        return
    a, b = sorted((min(a, len(view.text)), min(b, len(view.text))))
    start, end = view.to_raw(a, b)
    assert 0 <= start <= end <= len(raw)
    assert view.to_raw(0, len(view.text)) == (0, len(raw))
    # longer decoded spans never map to shorter raw ones (monotonic)
    wider = view.to_raw(max(a - 1, 0), min(b + 1, len(view.text)))
    assert wider[0] <= start and end <= wider[1]
