"""LogQL selectors as Loki reads them: every query the templates make from hostile names is parsed by Grafana's LogQL
grammar (@grafana/lezer-logql, pinned in docs/package.json, run on Node.js), holds nothing Loki's lexer refuses,
and each regex matcher's value, compiled by RE2 (the engine of Loki's regexes; google-re2), matches exactly the
scope's names and none of a list of near-misses.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from functools import cache
from itertools import combinations

import pytest
import re2

from providers.telemetry.loki.logql import SelectorTemplate
from tests.gunicorn_process import ROOT
from tests.telemetry.go_strings import go_unquote

DOCS_PACKAGE = ROOT / "docs" / "package.json"
GRAMMAR_SCRIPT = ROOT / "tests" / "telemetry" / "logql_grammar.mjs"
PLACEHOLDER = "{hosts}"
TEMPLATES = [
    '{host=~"{hosts}"}',
    "{host=~`{hosts}`}",
    '{host="{hosts}"}',
    "{host=`{hosts}`}",
    '{job="syslog", host=~`{hosts}`} |= "NVRM"',
    "{ hostname = `{hosts}` , job=`kernel` }",
]
# Names a scope may hold, the hostile ones first: NUL (the one a real Loki refused inside backticks), other
# control characters, a byte order mark, quotes, backslashes, RE2 metacharacters, LogQL's own braces.
VALUES = [
    "node\x00one",
    "tab\there",
    "cr\rlf\n",
    "bom\ufeffx",
    "del\x7f",
    "esc\x1b[0m",
    "nbsp\xa0x",
    "back`tick",
    'quote"and\\backslash',
    "dots.and*stars+(x)|[y]{2}^$?",
    '}{"`,=~',
    "ünïcödé-ノード",
    "emoji-\U0001f600",
    " spaced ",
    "gpu-1.dc.example",
    "gpu-2.dc.example",
    "gpu-1.dc2.example",
    "worker-01",
]
# Loki's lexer (Go's text/scanner) refuses these anywhere in a query, quoted or not.
LEXER_REFUSES = ("\x00", "\ufeff")


@cache
def grammar_missing() -> str | None:
    if shutil.which("node") is None:
        return "node is not installed (.ci/run installs Node.js)"
    if not (ROOT / "docs" / "node_modules" / "@grafana" / "lezer-logql").exists():
        return "@grafana/lezer-logql is not installed: run `npm ci` in docs/ (.ci/run does)"
    return None


def parse(queries: list[str]) -> list[dict]:
    missing = grammar_missing()
    if missing is not None:
        # CI installs both (.ci/run); elsewhere the check waits for them rather than failing `make test`.
        (pytest.fail if os.environ.get("CI") else pytest.skip)(missing)
    done = subprocess.run(
        ["node", str(GRAMMAR_SCRIPT), str(DOCS_PACKAGE)],
        input=json.dumps(queries),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def near_misses(names: list[str]) -> set[str]:
    """Texts close to the names that are none of them: each name longer, shorter, shifted, with a regex
    metacharacter's meaning taken literally the other way, and the name parts of two names crossed."""
    misses: set[str] = set()
    for name in names:
        misses |= {name + "x", "x" + name, name[:-1], name[1:], name + "\n", name.upper(), ""}
        misses |= {name.replace(".", "x"), name.replace(".", ""), name.replace("*", ""), name.replace("+", "")}
    for a, b in combinations(names, 2):
        head_a, _, domain_a = a.partition(".")
        head_b, _, domain_b = b.partition(".")
        if domain_a and domain_b:
            misses |= {f"{head_a}.{domain_b}", f"{head_b}.{domain_a}"}
        misses.add(a + "|" + b)
    return misses - set(names)


def check_query(query: str, parsed: dict, names: list[str], operator: str) -> None:
    assert not parsed["error"], f"the LogQL grammar refuses {query!r}"
    assert not any(ch in query for ch in LEXER_REFUSES), f"Loki's lexer refuses {query!r}"
    (matcher,) = [m for m in parsed["matchers"] if m[0] in ("host", "hostname")]
    label, op, literal = matcher
    assert op == operator, (query, matcher)
    if literal[0] == "`":
        assert literal[1:-1].isprintable(), f"a raw string holds what Loki would refuse or change: {query!r}"
    value = go_unquote(literal)
    if operator == "Eq":
        assert [value] == names, (query, value)
        return
    pattern = re2.compile(value)
    for name in names:
        assert pattern.fullmatch(name), (query, name)
    for miss in near_misses(names):
        assert not pattern.fullmatch(miss), (query, miss)


@pytest.mark.parametrize("template", TEMPLATES)
def test_every_single_name_makes_a_query_loki_reads_as_that_name(template):
    selector = SelectorTemplate(template, PLACEHOLDER)
    operator = "Re" if selector.operator == "=~" else "Eq"
    queries = [selector.render(value) for value in VALUES]
    for query, parsed, value in zip(queries, parse(queries), VALUES, strict=True):
        check_query(query, parsed, [value], operator)


@pytest.mark.parametrize("template", TEMPLATES)
def test_a_scope_of_names_makes_one_regex_matching_exactly_those_names(template):
    selector = SelectorTemplate(template, PLACEHOLDER)
    scopes = [VALUES, VALUES[:3], VALUES[-4:], ["gpu-1.dc.example", "gpu-2.dc.example"], ["worker-01"]]
    scopes += [[value, "worker-01"] for value in VALUES[:-1]]
    queries = [selector.render_any(scope) for scope in scopes]
    for query, parsed, scope in zip(queries, parse(queries), scopes, strict=True):
        check_query(query, parsed, scope, "Re")


def test_a_nul_in_a_name_is_written_double_quoted_whatever_the_templates_quoting():
    for template in ("{host=`{hosts}`}", "{host=~`{hosts}`}"):
        selector = SelectorTemplate(template, PLACEHOLDER)
        for query in (selector.render("a\x00b"), selector.render_any(["a\x00b", "c"])):
            assert "`" not in query and "\\x00" in query, query
        # A name that fits keeps the template's quoting.
        assert "`" in selector.render("worker-01")


def test_the_job_log_queries_are_logql_and_their_patterns_re2_that_match_what_they_should():
    # The Loki job-log source's queries: the signal lines, the summaries' entry headers, where ranks wrote, a silent
    # rank's newest line; built from a template with a pipeline stage of its own and hostile scope names.
    from providers.telemetry.joblog import loki
    from providers.telemetry.joblog.markers import markers
    from providers.telemetry.loki.logql import with_matcher

    base = loki.build_job_query('{job="{workload_id}", attempt="{attempt_index}"} |= "x"', 'a"b`c', 2)
    heads = ["gpu-1", "dots.and*stars+(x)|[y]{2}^$?".partition(".")[0], "back`tick", "ünïcödé-ノード", "worker-01"]
    selector = with_matcher(base, loki.host_matcher("host", heads))
    queries = [
        selector + loki.signal_filter(),
        selector + loki.header_filter(),
        loki.placement_query(selector, 1021, "host"),
        loki.placement_query(base, 1021, "host", [3, 17, 4095]),
        with_matcher(base, 'host="gpu-1.dc"') + ' |= "[rank7]:"',
    ]
    for query, parsed in zip(queries, parse(queries), strict=True):
        assert not parsed["error"], f"the LogQL grammar refuses {query!r}"
    (matcher,) = [m for m in parse(queries[:1])[0]["matchers"] if m[0] == "host"]
    hosts = re2.compile(go_unquote(matcher[2]))
    for head in heads:
        for name in (head, head.upper(), head + ".dc.example", head + "."):
            assert hosts.fullmatch(name), name
        for miss in (head + "x", "x" + head, head[:-1], head + "-2.dc", "x." + head):
            assert not hosts.fullmatch(miss), miss
    signal = re2.compile(go_unquote(loki.signal_filter().split(" ", 2)[2]))
    for marker in markers():
        assert signal.search(f"[rank3]: text {marker} text"), marker
    assert not signal.search("[rank3]: {'loss': 2.001, 'grad_norm': 0.01, 'learning_rate': 1.2e-05, 'step': 1}")
    header = re2.compile(go_unquote(loki.header_filter().split(" ", 2)[2]))
    assert header.search("[0]:") and header.search("2026-09-09T11:58:30Z stderr F [12]:  ")
    assert not header.search("[rank0]: [1]: x") and not header.search("[rank12]:")
    rank = re2.compile(loki.RANK_PATTERN)
    assert rank.search("[rank118]:[E603 17:48:01]").group(loki.RANK_LABEL) == "118"
    # the placement of named ranks: its line filter and its regexp take those ranks and no other
    named = queries[3].split(" |~ ", 1)[1]
    kept, extracted = (re2.compile(go_unquote(part.split(" [", 1)[0].strip())) for part in named.split("| regexp "))
    for line, rank_number in (("[rank17]: x", "17"), ("[rank4095]:[E1 x]", "4095"), ("[rank3]: y", "3")):
        assert kept.search(line) and extracted.search(line).group(loki.RANK_LABEL) == rank_number
    for miss in ("[rank1]: x", "[rank170]: x", "[rank40950]: x", "[rank31]: x", "rank3 x"):
        assert not kept.search(miss) and not extracted.search(miss), miss
