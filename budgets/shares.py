"""Share arithmetic of the budget tree (pure Python, no Django).

share among siblings = weight / sum of sibling weights (0 when all are 0);
entitled share       = product of shares along the path from the root.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal


@dataclass(frozen=True, slots=True)
class NodeShare:
    share: float  # among siblings
    entitled: float  # of the whole cluster


def compute_shares(
    nodes: Iterable[tuple[Hashable, Hashable | None, Decimal | float]],
) -> dict[Hashable, NodeShare]:
    """Shares of every node, given (id, parent_id, weight) rows. Roots get share 1."""
    children: dict[Hashable | None, list[tuple[Hashable, Decimal]]] = defaultdict(list)
    for node_id, parent_id, weight in nodes:
        children[parent_id].append((node_id, Decimal(weight)))
    result: dict[Hashable, NodeShare] = {}
    stack: list[tuple[Hashable | None, float]] = [(None, 1.0)]
    while stack:
        parent_id, parent_entitled = stack.pop()
        siblings = children.get(parent_id, [])
        total = sum((w for _, w in siblings), Decimal(0))
        for node_id, weight in siblings:
            if parent_id is None:
                share = 1.0  # a root has no siblings
            elif total > 0:
                share = float(weight / total)
            else:
                share = 0.0
            entitled = parent_entitled * share
            result[node_id] = NodeShare(share=share, entitled=entitled)
            stack.append((node_id, entitled))
    return result


def shares_with_edits(
    nodes: Iterable[tuple[Hashable, Hashable | None, Decimal | float]],
    edits: Mapping[Hashable, Decimal],
) -> dict[Hashable, NodeShare]:
    """Shares after replacing some weights (for previews and audit rows)."""
    return compute_shares(
        (node_id, parent_id, edits.get(node_id, weight)) for node_id, parent_id, weight in nodes
    )


def weight_text(weight: Decimal) -> str:
    """A weight without trailing zeros or exponent: 50.0000 -> '50', 2.5000 -> '2.5'."""
    text = f"{Decimal(weight).normalize():f}"
    return text


def weight_number(weight: Decimal) -> int | float:
    """A weight as a JSON number: 50.0000 -> 50, 2.5000 -> 2.5."""
    value = Decimal(weight).normalize()
    return int(value) if value == value.to_integral() else float(value)
