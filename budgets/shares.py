"""Share arithmetic of the database tree: a thin layer over the one budget-tree module
(`budgets.rules`), which the engine, the simulator and the reports use
too, plus how weights are shown on pages.

share among siblings = weight / sum of sibling weights (0 when all are 0);
entitled share       = product of shares along the path from the root.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping
from decimal import Decimal

from budgets.rules import NodeShare, shares_by_id, weight_number

__all__ = [
    "SHARE_DECIMALS",
    "NodeShare",
    "compute_shares",
    "share_change_text",
    "share_text",
    "shares_with_edits",
    "weight_number",
    "weight_text",
]

# A share (among siblings, entitled) is shown as a percentage with this many decimals on
# every page, so 12.5% reads "12.50%" everywhere (not "12%" on one page and "12.5%" on
# another); the CLI (`allot_cli.render.share`) writes the same digits.
SHARE_DECIMALS = 2


def compute_shares(
    nodes: Iterable[tuple[Hashable, Hashable | None, Decimal | float]],
) -> dict[Hashable, NodeShare]:
    """Shares of every node, given (id, parent_id, weight) rows. Roots get share 1."""
    return shares_by_id(nodes)


def shares_with_edits(
    nodes: Iterable[tuple[Hashable, Hashable | None, Decimal | float]],
    edits: Mapping[Hashable, Decimal],
) -> dict[Hashable, NodeShare]:
    """Shares after replacing some weights (for previews and audit rows)."""
    return shares_by_id(
        (node_id, parent_id, edits.get(node_id, weight)) for node_id, parent_id, weight in nodes
    )


def weight_text(weight: Decimal) -> str:
    """A weight without trailing zeros or exponent: 50.0000 -> '50', 2.5000 -> '2.5'."""
    return f"{Decimal(weight).normalize():f}"


def share_text(fraction: float | Decimal | None) -> str:
    """A share as every page shows it: 0.125 -> '12.50%'; None -> '–'."""
    if fraction is None:
        return "–"
    return f"{float(fraction) * 100:.{SHARE_DECIMALS}f}%"


def share_change_text(delta: float | Decimal) -> str:
    """A change of a share, signed, in the same digits: 0.025 -> '+2.50%'."""
    text = share_text(delta)
    return text if text.startswith("-") or float(delta) == 0 else "+" + text
