"""Schemathesis hooks for Ferry's API (used by scripts/schemathesis and the test suite).

Push bodies are NDJSON, one change set per line, which Schemathesis cannot
generate from a schema. This registers a generator for them: real change sets
of the store under test (read from the file FERRY_CHANGESETS names), several at
once, cut-off and mangled ones, and random bytes.
"""
import os

import schemathesis
from hypothesis import strategies as st

_path = os.environ.get("FERRY_CHANGESETS")
_lines = []
if _path and os.path.exists(_path):
    with open(_path, encoding="utf-8") as handle:
        _lines = [line for line in handle.read().splitlines() if line]
_real = st.sampled_from(_lines) if _lines else st.just('{"format":1}')

ndjson = st.one_of(
    _real.map(lambda line: (line + "\n").encode()),
    st.lists(_real, min_size=1, max_size=4).map(lambda lines: ("\n".join(lines) + "\n").encode()),
    st.tuples(_real, st.integers(min_value=0, max_value=400)).map(lambda pair: pair[0][: pair[1]].encode()),
    st.tuples(_real, st.text(max_size=8), st.integers(min_value=0, max_value=400)).map(
        lambda triple: (triple[0][: triple[2]] + triple[1] + triple[0][triple[2]:]).encode()
    ),
    st.binary(max_size=300),
)

schemathesis.openapi.media_type("application/x-ndjson", ndjson)
