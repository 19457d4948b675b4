"""Share arithmetic of the database tree: a thin layer over the one budget-tree module
(`budgets.rules`), which the engine, the simulator and the reports use
too, plus how weights are shown on pages (a share's format is `allot_common.figures`,
shared with the CLI).

share among siblings = weight / sum of sibling weights (0 when all are 0);
entitled share       = product of shares along the path from the root.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping
from decimal import Decimal

from allot_common.figures import SHARE_DECIMALS, share_change_text, share_text
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
