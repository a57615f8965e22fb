"""Bad input to ``gateway-kit adopt check`` is said in one line on stderr, with exit status 2,
before any request is sent: a bad file is refused before MODULE is even imported."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from .conftest import Ran, Site

GOOD_LINE = '{"method": "GET", "path": "/me"}'
PREFIX = "gateway-kit adopt check: "
HAR_WITHOUT_URL = {"log": {"entries": [{"request": {"method": "GET", "url": "/relative"}}]}}


@pytest.mark.parametrize(
    ("content", "said"),
    [
        (f"{GOOD_LINE}\n{{not json\n", "line 2: not JSON (Expecting property name enclosed in "
                                       "double quotes)"),
        (f"{GOOD_LINE}\n\n[1, 2]\n", "line 3: a request is a JSON object, not list"),
        ('{"method": "GET", "url": "/me"}\n', "line 1: unknown field 'url' (a request has method,"
                                              " path, headers, body, json)"),
        ('{"method": "GET"}\n', "line 1: 'path' is missing"),
        ('{"method": "GET", "path": "me"}\n', "line 1: path 'me' does not start with / or holds "
                                              "spaces or control characters"),
        ('{"method": "GE T", "path": "/"}\n', "line 1: method 'GE T' is not an HTTP method"),
        ('{"method": "GET", "path": "/", "headers": {"X": 1}}\n',
         'line 1: "headers" is an object of strings or a list of [name, value] pairs'),
        ('{"method": "GET", "path": "/", "headers": {"X": "a\\nb"}}\n',
         "line 1: header 'X' holds a line break or a control character"),
        ('{"method": "POST", "path": "/", "body": "a", "json": 1}\n',
         'line 1: "body" and "json" are both given; a request has one body'),
        (json.dumps({"log": {"pages": []}}), "not a HAR file: log.entries is not a list"),
        (json.dumps(HAR_WITHOUT_URL), "entry 1: request.url is not a URL"),
    ],
)  # fmt: skip
def test_a_bad_recording_is_refused_whole_before_the_app_is_imported(
    site: Site, adopt_check: Callable[..., Ran], tmp_path: Path, content: str, said: str
) -> None:
    recording = tmp_path / "recording"
    recording.write_text(content)
    ran = adopt_check(f"{site.module}:app", "--requests", recording)
    assert (ran.status, ran.out, ran.err) == (2, "", f"{PREFIX}{said}\n")
    assert site.module not in sys.modules  # so nothing was sent to it


def test_a_file_that_cannot_be_read_or_holds_nothing_is_said(
    site: Site, adopt_check: Callable[..., Ran], tmp_path: Path
) -> None:
    missing = tmp_path / "missing.har"
    ran = adopt_check(f"{site.module}:app", "--requests", missing)
    assert (ran.status, ran.err) == (
        2,
        f"{PREFIX}cannot read {missing}: No such file or directory\n",
    )
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n\n")
    ran = adopt_check(f"{site.module}:app", "--requests", empty)
    assert (ran.status, ran.err) == (2, f"{PREFIX}{empty} holds no request to replay\n")
    binary = tmp_path / "binary"
    binary.write_bytes(b"\xff\xfe\x00")
    ran = adopt_check(f"{site.module}:app", "--requests", binary)
    assert (ran.status, ran.err) == (2, f"{PREFIX}cannot read {binary}: it is not UTF-8 text\n")


@pytest.mark.parametrize(
    ("target", "said"),
    [
        ("{site}", "'{site}' is not MODULE:ATTR, such as myapp.web:app"),
        ("no_such_module_here:app", "cannot import 'no_such_module_here': No module named "
                                    "'no_such_module_here'"),
        ("{site}:nothing", "module '{site}' has no attribute 'nothing'"),
        ("{site}:API_TOKEN", "{site}:API_TOKEN is a str, not an app: name a Flask (WSGI) app, "
                             "an ASGI app or a Gateway"),
    ],
)  # fmt: skip
def test_a_bad_module_attr_is_said_in_one_line(
    site: Site, adopt_check: Callable[..., Ran], tmp_path: Path, target: str, said: str
) -> None:
    recording = tmp_path / "one.jsonl"
    recording.write_text(GOOD_LINE + "\n")
    ran = adopt_check(target.format(site=site.module), "--requests", recording)
    assert (ran.status, ran.out) == (2, "")
    assert ran.err == f"{PREFIX}{said.format(site=site.module)}\n"


def test_a_module_that_raises_on_import_is_said_in_one_line(
    site: Site, adopt_check: Callable[..., Ran], tmp_path: Path
) -> None:
    broken = site.add_module("raise RuntimeError('no config file')\n")
    recording = tmp_path / "one.jsonl"
    recording.write_text(GOOD_LINE + "\n")
    ran = adopt_check(f"{broken}:app", "--requests", recording)
    assert (ran.status, ran.err) == (2, f"{PREFIX}cannot import '{broken}': no config file\n")
