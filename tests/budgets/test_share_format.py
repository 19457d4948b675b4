"""A share shows the same digits on every page and in the CLI (docs/concepts.md, share
among siblings and entitled share): one function formats it, 12.5% reads "12.50%"
everywhere, never "12%" on one page and "12.5%" on another."""

from __future__ import annotations

import re
from decimal import Decimal
from pathlib import Path

import pytest
from django.template.defaultfilters import floatformat

from allot_cli import render
from allot_common import figures
from budgets import services
from budgets.shares import share_change_text, share_text
from dashboards.templatetags.dashboards import percent

pytestmark = pytest.mark.django_db
ROOT = Path(__file__).resolve().parent.parent.parent

FRACTIONS = [0.0, 0.125, 0.225, 1 / 3, 0.35, 0.0004, 1.0]


@pytest.mark.parametrize("fraction", FRACTIONS)
def test_the_cli_writes_a_share_as_the_pages_do(fraction):
    assert render.share(fraction) == share_text(fraction)


@pytest.mark.parametrize("fraction", [0.0, 0.5, 0.953, 0.9995, 1 / 3, 1.2])
def test_the_cli_writes_a_ratio_as_the_pages_do(fraction):
    """GPU utilization and delivery ratios: the pages' `percent` filter's digits."""
    assert render.percent(fraction) == percent(fraction)


# halves (quarter hours, a 1-of-8 rank) and what binary floats hold just below them
TIES = [0.125, 0.375, 0.625, 2.25, 4162.25, 0.005, 1.005, 2.675, 12345.65, 1e-9, 0.0, 7.0]


@pytest.mark.parametrize("value", TIES)
def test_the_cli_rounds_gpu_hours_and_factors_as_the_pages_do(value):
    """GPU-hours (one decimal) and fair-share factors (two) read the same digits in
    `allot usage` / `allot shares` / `allot show` as on the pages' `floatformat`."""
    assert render.gpu_hours(value) == floatformat(value, 1)
    assert render.factor(value) == floatformat(value, 2)


# shares a weight change gives (25 of 160, 5 of 160) and ratios on a tie
HALVES = [0.15625, 0.03125, 0.00125, 0.145, 0.5, 0.98765]


@pytest.mark.parametrize("fraction", HALVES)
def test_a_share_and_a_ratio_round_half_up_as_gpu_hours_and_factors_do(fraction):
    """The what-if preview and the edit preview once read 25 of 160 as "15.62%" (the
    binary float's rounding) while the API gave 0.15625 and every GPU-hour figure on the
    same pages rounds half up (`floatformat`): one rounding for every figure."""
    scaled = Decimal(repr(fraction)) * 100
    assert share_text(fraction) == floatformat(scaled, 2) + "%" == render.share(fraction)
    assert percent(fraction) == floatformat(scaled, 1) + "%" == render.percent(fraction)
    assert share_text(25 / 160) == "15.63%" and share_text(5 / 160) == "3.13%"


def test_share_text_and_its_change():
    assert share_text(0.125) == "12.50%" and share_text(0.225) == "22.50%"
    assert share_text(None) == "–"
    assert share_change_text(0.1, 0.125) == "+2.50%" and share_change_text(0.125, 0.1) == "-2.50%"


def test_one_format_and_one_empty_mark_on_every_surface():
    """The server and the CLI format with the same functions (allot_common.figures), and
    a missing value reads the same en dash on a page and in the CLI (it once was "–" on
    the pages and "-" in the CLI)."""
    assert render.share(None) == share_text(None) == percent(None) == figures.EMPTY == "–"
    assert render.percent(None) == render.factor(None) == render.gpu_hours(None) == "–"
    assert render.seconds(None) == render.when(None) == render.number(None) == "–"
    assert share_text is figures.share_text and share_change_text is figures.share_change_text
    # one terminal cell, as "-": the CLI's tables keep their widths
    from rich.cells import cell_len

    assert cell_len(figures.EMPTY) == 1
    servers = [ROOT / "budgets" / "shares.py", ROOT / "dashboards" / "templatetags"]
    clients = [ROOT / "allot_cli" / "render.py"]
    for path in [*servers, *clients]:
        files = sorted(path.rglob("*.py")) if path.is_dir() else [path]
        for file in files:  # no second share or percent format
            assert not re.search(r"\* 100:\.", file.read_text()), file


def _eighth(tree):
    """a2 at 12.5% entitled (prog-a 50% x a2 25%), a1 at 37.5%."""
    services.budget_change_create(
        actor=tree.user("lead-a"),
        reason="an eighth for a2",
        changes=[{"node": tree.node("a1").pk, "weight": 90}],
    )


def test_tree_history_and_fairshare_show_12_5_percent_alike(tree, client):
    from tests.factories import ClusterFactory

    ClusterFactory(name="h100", host_count=1, gpus_per_host=8)
    _eighth(tree)
    client.force_login(tree.user("ceo"))
    pages = {
        "tree": client.get("/budgets/").content.decode(),
        "history": client.get("/budgets/history/").content.decode(),
        "fairshare": client.get("/dashboards/fairshare/").content.decode(),
    }
    for name, html in pages.items():
        assert "12.50%" in html, name  # a2's entitled share
        assert not re.search(r"\b12(\.5)?%", html), name
    assert "37.50%" in pages["history"] and "35.00%" in pages["history"]  # a1 old -> new
    assert "25.00%" in pages["tree"]  # a2's share among siblings, the same digits


def test_the_edit_preview_uses_the_same_digits(tree, client):
    client.force_login(tree.user("lead-a"))
    a1 = tree.node("a1")
    html = client.post(
        f"/budgets/nodes/{tree.node('prog-a').pk}/preview/", {f"weight-{a1.pk}": "90"}
    ).content.decode()
    assert "12.50%" in html and "37.50%" in html and "+2.50%" in html and "-2.50%" in html
