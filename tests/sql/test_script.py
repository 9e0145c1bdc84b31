"""Scripts are parsed whole first; errors give the line and column in the script."""

from __future__ import annotations

import pytest

from sparkmv.errors import ParseError
from sparkmv.sql.script import parse_script


def test_statements_with_numbers_and_lines() -> None:
    script = "-- nightly\nSELECT 1;\n\n  DROP TABLE IF EXISTS t ;\n;  -- trailing comment\n"
    parsed = parse_script(script)
    assert [(s.number, s.line, s.text) for s in parsed] == [
        (1, 1, "-- nightly\nSELECT 1"),
        (2, 4, "DROP TABLE IF EXISTS t"),
    ]
    assert parse_script("  -- only a comment\n;;") == []


@pytest.mark.parametrize(
    ("script", "message"),
    [
        ("SELECT 1;\n\n  SELECT m FROM t WHERE", "cannot parse SQL at line 3, column 23: "),
        ("SELECT 1;\nSELECT 2;\nDROP TABLE", "cannot parse SQL at line 3, column 11: expected a name"),
        ("SELECT 1;\nSELECT\n  'abc", "cannot parse SQL at line 3, column 3: unterminated string"),
        (
            "SELECT 1;\nALTER MATERIALIZED VIEW m REFRESH ASYNC EVERY (INTERVAL 0 DAY)",
            "EVERY (INTERVAL 0 DAY) is out of range: the interval must be from 1 SECOND to 3650 DAY "
            "(statement 2, line 2)",
        ),
        ("SELECT 1;\nSELEC 1", "cannot parse SQL at line 2, column 7: Invalid expression / Unexpected token"),
    ],
)
def test_first_error_is_located_in_the_script(script: str, message: str) -> None:
    with pytest.raises(ParseError) as info:
        parse_script(script)
    assert str(info.value).startswith(message), str(info.value)
