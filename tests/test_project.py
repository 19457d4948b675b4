"""Project-wide rules: settings refuse unsafe production, the pure packages stay pure."""

import ast
import functools
import os
import re
import secrets
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.sources import python_files, python_source

ROOT = Path(__file__).resolve().parent.parent
GOOD_KEY = secrets.token_urlsafe(50)


def _import_production(
    env_overrides: dict[str, str], code: str = "import django; django.setup()"
) -> subprocess.CompletedProcess:
    env = dict(os.environ, DJANGO_SETTINGS_MODULE="config.settings.production", **env_overrides)
    # production refuses to start without both URLs (tests/ops/test_deploy_recipe.py); a
    # run on the embedded servers has none, and settings alone connect to nothing
    env.setdefault("DATABASE_URL", "postgres://allot@db.invalid:5432/allot")
    env.setdefault("REDIS_URL", "redis://redis.invalid:6379/0")
    env.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)  # set for the browser tests; never in deployment
    for name in [k for k, v in env_overrides.items() if v is None]:
        env.pop(name)
    return subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"DEBUG": "true", "SECRET_KEY": GOOD_KEY}, "DEBUG must be off"),
        ({"DEBUG": "false", "SECRET_KEY": ""}, "SECRET_KEY must be set"),
        ({"DEBUG": "false", "SECRET_KEY": "short"}, "SECRET_KEY must be set"),
        ({"DEBUG": "false", "SECRET_KEY": "ab" * 40}, "SECRET_KEY must be set"),  # 2 characters
        # unset: the default key, refused by its own branch (it is long and varied enough
        # for the length rule, so only the equality check can refuse it)
        ({"DEBUG": "false", "SECRET_KEY": None}, "SECRET_KEY is the development default"),
        (
            {
                "DEBUG": "false",
                "SECRET_KEY": "allot-insecure-development-key-never-use-it-in-production",
            },
            "SECRET_KEY is the development default",
        ),
    ],
)
def test_production_settings_refuse_unsafe_configuration(overrides, message):
    result = _import_production(overrides)
    assert result.returncode != 0
    assert message in result.stderr


@functools.cache
def _configured_production() -> subprocess.CompletedProcess:
    """Django set up under production settings with DEBUG off and a good key, printing
    the settings that make it HTTPS-only (one process for the two tests that read it)."""
    return _import_production(
        {"DEBUG": "false", "SECRET_KEY": GOOD_KEY},
        code="import django; django.setup(); from django.conf import settings as s; "
        "print(s.SESSION_COOKIE_SECURE, s.CSRF_COOKIE_SECURE, s.SECURE_SSL_REDIRECT, "
        "s.SECURE_HSTS_SECONDS, s.STORAGES['staticfiles']['BACKEND'])",
    )


def test_production_settings_start_when_configured():
    result = _configured_production()
    assert result.returncode == 0, result.stderr


def test_default_secret_key_is_long_enough_that_only_the_equality_check_refuses_it():
    from config.settings.base import DEFAULT_SECRET_KEY

    # long enough for the length rule, so only the equality check refuses it
    assert len(DEFAULT_SECRET_KEY) >= 50 and len(set(DEFAULT_SECRET_KEY)) >= 5


def test_deploy_check_passes_with_no_warning_under_production_settings():
    result = _import_production(
        {"DEBUG": "false", "SECRET_KEY": GOOD_KEY, "ALLOWED_HOSTS": "allot.example.org"},
        code="import django, sys; from django.core.management import call_command; django.setup(); "
        "call_command('check', deploy=True, fail_level='WARNING')",
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout + result.stderr


def test_production_serves_https_only_with_hsts_and_secure_cookies():
    result = _configured_production()
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [
        "True",
        "True",
        "True",
        "31536000",
        "whitenoise.storage.CompressedManifestStaticFilesStorage",
    ]


def test_pure_packages_do_not_import_django():
    result = subprocess.run(
        [str(Path(sys.executable).parent / "lint-imports"), "--no-cache"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "KEPT" in result.stdout


def test_pure_packages_type_check_strictly():
    """mypy --strict on the engine, simulator, planner and ledger accounting (the
    configuration in pyproject.toml, as `make lint` runs it)."""
    result = subprocess.run(
        [str(Path(sys.executable).parent / "mypy")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Success" in result.stdout


# --- every path the README, the docs or a docstring names exists -------------------------

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# The project's packages and scripts whose docstrings and comments may name files.
CODE_DIRS = [
    "accounts",
    "allot_cli",
    "allot_common",
    "bench",
    "budgets",
    "config",
    "dashboards",
    "ledger",
    "ops",
    "scheduler",
    "tests",
    "tools",
]
# Made by `make install`, `make run` or the tests, not part of the repository.
GENERATED = {".venv", "build", "var", ".git", ".pytest_cache", ".mypy_cache", ".ruff_cache"}
FILE_SUFFIXES = (".py", ".md", ".json", ".toml", ".html", ".csv", ".txt", ".js", ".css", ".png")
CODE_SPAN = re.compile(r"`([^`\n]+)`")
LINK = re.compile(r"\]\(([^)\s]+)\)")
MD_NAME = re.compile(r"(?<![\w/.-])([\w./-]*[\w-]\.md)\b")
OUTSIDE = re.compile(r"(?<![.\w])\.\./|/work/")  # not `.../` (an elided path)
PY_PATH = re.compile(r"(?<![\w/.-])((?:\.\./|/)?[\w.-]+(?:/[\w.-]+)+\.py)\b")


def _top_level() -> set[str]:
    return {p.name for p in ROOT.iterdir()} - GENERATED


def _path_tokens(text: str) -> list[str]:
    """Words in `code spans` that name a file or folder of the repository: a path whose
    first part is a top-level entry, or a file name with a known suffix at the top."""
    top = _top_level()
    found = []
    for span in CODE_SPAN.findall(text):
        for word in span.split():
            word = word.strip(",;:()[]'\"").split("#")[0].split("::")[0]
            word = re.sub(r":\d+$", "", word)
            if not word or any(c in word for c in "<>*{}$=?&%@"):
                continue  # a placeholder, a glob, an option or a URL query
            in_repo = word.split("/")[0] in top and ("/" in word or word.endswith(FILE_SUFFIXES))
            a_document = "/" not in word and word.endswith(".md")
            if in_repo or a_document:
                found.append(word)
    return found


def _exists(path: str, *, relative_to: Path = ROOT) -> bool:
    if "/" not in path and path.endswith(".md"):  # a document named by itself
        return (ROOT / path).exists() or (ROOT / "docs" / path).exists()
    target = (relative_to / path).resolve()
    return target.is_relative_to(ROOT) and target.exists()


def test_path_check_recognises_repository_paths_and_missing_ones():
    """The checks below see a path only through `_path_tokens`: it must pick out paths
    of the repository and documents, and leave out project paths, URLs and options."""
    gone = "GONE" + ".md"  # spelled apart, so the code scan below does not see it
    text = f"`scheduler/nope.py`, `{gone}`, `org/prog-a/a1`, `/api/v1/jobs/`, `--gpus 8`, `docs/`"
    assert _path_tokens(text) == ["scheduler/nope.py", gone, "docs/"]
    assert [_exists(p) for p in _path_tokens(text)] == [False, False, True]
    assert _exists("concepts.md") and not _exists("img/none.png", relative_to=ROOT / "docs")
    assert OUTSIDE.search("see .." + "/shared/data") and not OUTSIDE.search("and `.../recover`")


def test_docs_name_no_path_outside_the_repository():
    """README and docs describe the repository: a path beside the checkout or on the
    development machine is no use to a reader elsewhere."""
    offenders = [
        f"{doc.relative_to(ROOT)}:{n}: {line.strip()[:120]}"
        for doc in DOCS
        for n, line in enumerate(doc.read_text().splitlines(), 1)
        if OUTSIDE.search(line)
    ]
    assert not offenders, "\n".join(offenders)


def test_readme_is_a_guide_not_a_reference():
    """Issue 23: the README guides a new user in at most 450 lines; reference tables,
    per-endpoint lists and figures live under docs/."""
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= 450, f"README.md has {len(lines)} lines"


def test_every_path_the_docs_name_exists():
    """Paths in code spans and relative links of README.md and docs/*.md exist."""
    assert (ROOT / "docs").is_dir() and len(DOCS) > 1
    missing = []
    for doc in DOCS:
        text = doc.read_text()
        missing += [f"{doc.relative_to(ROOT)}: `{p}`" for p in _path_tokens(text) if not _exists(p)]
        for link in LINK.findall(text):
            if re.match(r"^[a-z]+:", link) or link.startswith("#"):
                continue  # a URL or an anchor of the same page
            if not _exists(link.split("#")[0], relative_to=doc.parent):
                missing.append(f"{doc.relative_to(ROOT)}: ({link})")
    assert not missing, "\n".join(missing)


HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$")


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: the text of its links, lower case, punctuation other
    than `-` and `_` dropped, spaces made hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def _anchors(doc: Path) -> set[str]:
    """The anchors of a document's headings; a repeated heading gets `-1`, `-2`, ..."""
    seen: dict[str, int] = {}
    fenced = False
    for line in doc.read_text().splitlines():
        fenced ^= line.startswith("```")
        match = None if fenced else HEADING.match(line)
        if match:
            slug = _slug(match.group(1))
            seen[slug] = seen.get(slug, -1) + 1
    return {s if n == 0 else f"{s}-{n}" for s, count in seen.items() for n in range(count + 1)}


def test_anchor_check_follows_github():
    assert _slug("Overload latency: waiting, room now (2026-12-06, 09:15-10:45)") == (
        "overload-latency-waiting-room-now-2026-12-06-0915-1045"
    )
    assert _slug("`bench/cycle.py`, case `burst`") == "benchcyclepy-case-burst"
    assert _slug("why the month's ETA [is off](concepts)") == "why-the-months-eta-is-off"


def test_every_anchor_the_docs_link_to_exists():
    """Links to a heading (`#anchor`, alone or after a document's path) in README.md and
    docs/*.md name a heading the target document has: a moved or renamed section fails here."""
    broken = []
    for doc in DOCS:
        for link in LINK.findall(doc.read_text()):
            path, _, anchor = link.partition("#")
            if not anchor or re.match(r"^[a-z]+:", link) or (path and not path.endswith(".md")):
                continue
            target = (doc.parent / path).resolve() if path else doc
            if target.exists() and anchor not in _anchors(target):
                broken.append(f"{doc.relative_to(ROOT)}: ({link})")
    assert not broken, "\n".join(broken)


PAGE_PATH = re.compile(r"`(/[a-z][a-z0-9_/<>{}.-]*/)`")


def test_every_page_path_the_glossary_names_resolves():
    """A page path in docs/concepts.md (`/me/`, `/clusters/<id>/queue/`) is one the URL
    conf serves: the glossary once sent readers to a `/dashboards/pyramid/` that never
    existed. A `<parameter>` stands for an id."""
    from django.urls import Resolver404, resolve

    paths = PAGE_PATH.findall((ROOT / "docs" / "concepts.md").read_text())
    assert "/me/" in paths  # the scan reads them
    unknown = []
    for path in sorted(set(paths)):
        try:
            resolve(re.sub(r"<[^>]+>|\{[^}]+\}", "1", path))
        except Resolver404:
            unknown.append(path)
    assert not unknown, f"docs/concepts.md names pages the URL conf does not serve: {unknown}"


_DOCUMENTED = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)


def _docstrings(tree: ast.Module) -> list[str]:
    """The docstrings of the module and of every class and function in it, nested ones
    included. A definition is a statement: only statements' bodies are walked (`body`,
    `orelse`, `finalbody`, `handlers`, `cases`), not the expressions that are most of a
    tree's nodes (`ast.walk` over all of them was three quarters of this check's time)."""
    found, todo = [], [tree]
    while todo:
        node = todo.pop()
        if isinstance(node, _DOCUMENTED):
            found.append(ast.get_docstring(node, clean=False) or "")
        for name in ("body", "orelse", "finalbody", "handlers", "cases"):
            children = getattr(node, name, None)
            if isinstance(children, list):
                todo.extend(
                    c
                    for c in children
                    if isinstance(c, ast.stmt | ast.excepthandler | ast.match_case)
                )
    return found


def _code_files() -> list[str]:
    return [rel for rel in python_files(CODE_DIRS) if "migrations" not in rel.split("/")]


def test_every_path_a_docstring_or_comment_names_exists():
    """Documents named anywhere in the code (`*.md`) and file paths named in docstrings
    (`*.py` with a folder) exist in the repository."""
    missing = []
    for where in _code_files():
        text, tree = python_source(where)
        missing += [f"{where}: {name}" for name in MD_NAME.findall(text) if not _exists(name)]
        for doc in _docstrings(tree):
            missing += [f"{where}: {name}" for name in PY_PATH.findall(doc) if not _exists(name)]
            missing += [f"{where}: {m.group()!r} (outside)" for m in OUTSIDE.finditer(doc)]
    assert not missing, "\n".join(missing)
