"""Every figure a page or the API shows maps to one glossary entry (docs/concepts.md).

The labels are read from the templates themselves (table headers, card labels and
definition terms), the API's number fields from the serializers' source and the CLI's
column headers from its tables (`render.table` in allot_cli/), so a new column or field
without an entry fails here: add the entry (or, for a label that is not
a figure, such as "Project", say so below)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from allot_cli.usage import SHARE_COLUMNS, SHARE_HEADERS

ROOT = Path(__file__).resolve().parent.parent
GLOSSARY = ROOT / "docs" / "concepts.md"
TEMPLATES = [*ROOT.glob("templates/**/*.html"), *ROOT.glob("*/templates/**/*.html")]
SERIALIZERS = [
    ROOT / "ledger" / "api.py",
    ROOT / "budgets" / "api" / "serializers.py",
    *sorted((ROOT / "scheduler" / "api" / "serializers").glob("*.py")),
]

# page label -> glossary anchor
FIGURES = {
    "Weight": "weight",
    "Current weight": "weight",
    "New weight": "weight",
    "Share": "share-among-siblings",
    "Entitled share": "entitled-share",
    "Entitled now": "entitled-share",
    "After": "entitled-share",
    "Change": "entitled-share",
    "Entitled share today → proposed": "entitled-share",
    "Entitled GPU-h/week ( GPUs)": "entitled-gpu-hours",
    "Entitled GPU-h/week": "entitled-gpu-hours",  # the tree's phone card, with the cluster
    "Capacity": "capacity",
    "Demand (GPU-h)": "demand",
    "Demand-capped entitlement (GPU-h)": "demand-capped-entitlement",
    "Delivered (GPU-h)": "delivered-gpu-hours",
    "Delivered GPU-h": "what-if-preview-figures",
    "Recorded": "what-if-preview-figures",
    "Replay, today's weights": "what-if-preview-figures",
    "Replay, proposed weights": "what-if-preview-figures",
    "Change proposed − today": "what-if-preview-figures",
    "Entitlement delivered": "delivery-ratio",
    "p90 replay wait (min) replay: today → proposed": "replay-wait",
    "Unallocated (GPU-h)": "unallocated-gpu-hours",
    "Window usage (GPU-h)": "usage",
    "Level FS": "level-fair-share",
    "Factor": "fair-share-factor",
    "Rank": "rank",
    "Position": "queue-position",
    "Protected until": "protection",
    "Estimated start": "eta",
    "Occupancy": "occupancy",
    "Availability": "availability",
    "Unallocated share": "unallocated-share",
    "Idle while work waited": "idle-while-work-waited",
    "Min runtime": "allocated-job",
    "Hours": "draining",
    "Running GPUs": "now-page-figures",
    "Free GPUs (healthy hosts)": "now-page-figures",
    "GPUs in use": "now-page-figures",
    "Pending": "now-page-figures",
    "Running jobs": "now-page-figures",
    "Cycles": "now-page-figures",
    "Last cycle": "now-page-figures",
    "Its duration": "now-page-figures",
    "Health": "now-page-figures",
    "Held for short jobs now (GPUs)": "short-job-reserve-cost",
    "Reserve cost (GPU-h, 7 days)": "short-job-reserve-cost",
    "Short-job waits saved (7 days)": "short-job-reserve-cost",
    "Share floor": "share-floor",
    "Consolidation": "consolidation",
    "Reservation admission": "reservation-admission",
    "Idle-GPU reclaim": "idle-reclaim",
    "Busy GPU-steps (%)": "planner-figures",
    "Impact": "impact",
    "GPU utilization": "utilization",
    "GPU-h held": "effective-gpu-hours",
    "Effective GPU-h": "effective-gpu-hours",
    "SM active": "sm-active",
    "Peak GPU memory used (MiB)": "peak-gpu-memory-used",
    "Value (priority x GPU-steps)": "planner-figures",
    "Objective (GPU-steps, weighted)": "planner-figures",
    "Completed (jobs)": "planner-figures",
    "Unmet real-time (GPU-steps)": "planner-figures",
    "Planning time (ms)": "planner-figures",
}

# labels that name a thing or a time, not a figure
NOT_FIGURES = {
    "#", "About", "Account", "At", "Cluster", "Command", "Created", "End", "Ended", "Environment",
    "Error", "Expires", "First started", "From", "GPUs", "Host", "Hosts", "Image", "Job", "Key",
    "Kind", "Last seen", "Managers", "Members", "Mode", "Name", "Node", "Priority", "Project",
    "Reason", "Revoke", "Scenario", "Since", "Slurm job", "Started", "State", "Step", "Steps",
    "Submitted", "Submitter", "To", "Until", "User", "What it means", "Why", "Why it waits",
}  # fmt: skip

# API number field -> glossary anchor
API_FIELDS = {
    "share": "share-among-siblings",
    "norm_shares": "share-among-siblings",
    "raw_shares": "weight",
    "entitled_share": "entitled-share",
    "delivered_gpu_h": "delivered-gpu-hours",
    "unallocated_gpu_h": "unallocated-gpu-hours",
    "demand_gpu_h": "demand",
    "capped_entitled_gpu_h": "demand-capped-entitlement",
    "within_entitlement_gpu_h": "allocated-within-entitlement",
    "capacity_gpu_h": "capacity",
    "healthy_gpu_h": "healthy-capacity",
    "borrowed_gpu_h": "borrowed",
    "idle_demand_gpu_h": "idle-while-work-waited",
    "idle_gpu_h": "idle",
    "draining_gpu_h": "draining",
    "down_gpu_h": "down",
    "raw_usage": "usage",
    "norm_usage": "usage",
    "effective_usage": "usage",
    "level_fs": "level-fair-share",
    "fairshare": "fair-share-factor",
    "fairshare_factor": "fair-share-factor",
    "reserve_cost_gpu_h": "short-job-reserve-cost",
    "utilization": "utilization",
    "measured_gpu_h": "utilization",
    "utilized_gpu_h": "utilization",
    "effective_gpu_h": "effective-gpu-hours",
    "sm_active": "sm-active",
    "memory_used_max_mib": "peak-gpu-memory-used",
    "weight": "weight",
    "rank": "rank",
    "project_rank": "rank",
    "position": "queue-position",
    "project_position": "queue-position",
    "queue_length": "queue-position",
    "held_gpus": "short-job-reserve-cost",
    "short_waits_saved": "short-job-reserve-cost",
    "healthy_gpus": "now-page-figures",
    "gpus_in_use": "now-page-figures",
    "pending_jobs": "now-page-figures",
    "running_jobs": "now-page-figures",
    "draining_hosts": "now-page-figures",
    "down_hosts": "now-page-figures",
    "starts": "now-page-figures",
    "stops": "now-page-figures",
    # the policy's settings behind a figure or a rule
    "min_runtime_s": "allocated-job",
    "max_min_runtime_s": "protection",
    "lookback_s": "usage",
    "half_life_s": "usage",
    "short_reserve_hosts": "short-job-reserve",
    "short_job_max_s": "short-job-reserve",
    "idle_threshold_pct": "idle-reclaim",
    "idle_reclaim_after_s": "idle-reclaim",
    "reservation_admit_min": "reservation-admission",
    "window_days": "windows",
    "days": "windows",
}
# number fields that are not figures of the glossary: a job's own progress and inputs, a
# cycle's duration, a preview's progress, ids and references, versions, counts of a
# page or a request, the cluster's size and timing settings
API_NOT_FIGURES = {
    "progress_s", "duration_ms", "progress", "id", "job", "node", "parent", "project",
    "cluster", "cycle", "attempt", "preempted_by", "preempting_job", "preempting_project",
    "scheduled_event", "array", "array_index", "number", "version", "base_version", "depth",
    "count", "attempt_count", "priority", "duration_s", "gpus", "hosts", "cycle_s", "grace_s",
}  # fmt: skip
# the serializer fields that carry a number
NUMBER_FIELDS = ("FloatField", "IntegerField", "DecimalField")

# CLI column header -> glossary anchor
CLI_FIGURES = {
    "DELIVERED": "delivered-gpu-hours",
    "UNALLOC": "unallocated-gpu-hours",
    "DEMAND": "demand",
    "CAPPED ENT": "demand-capped-entitlement",
    "ENT DELIVERED": "delivery-ratio",
    "GPU UTIL": "utilization",
    "RAW SHARES": "weight",
    "NORM SHARES": "share-among-siblings",
    "RAW USAGE": "usage",
    "NORM USAGE": "usage",
    "EFFECTV USAGE": "usage",
    "LEVEL FS": "level-fair-share",
    "FAIR SHARE": "fair-share-factor",
    "FS": "fair-share-factor",
    "RANK": "rank",
    "POS": "queue-position",
    "MIN_RT": "allocated-job",
    "WAITED": "time-in-queue",
    "HEALTHY": "healthy-capacity",
    "IN_USE": "now-page-figures",
    "PEND": "now-page-figures",
    "RUN": "now-page-figures",
    "DRAIN": "now-page-figures",
    "DOWN": "now-page-figures",
    "HEALTH": "now-page-figures",
    "LAST_CYCLE": "now-page-figures",
}
# `allot show` line label -> glossary anchor (the glossary's own name for the figure)
SHOW_FIGURES = {
    "queue position": "queue-position",
    "fair-share factor": "fair-share-factor",
    "estimated start": "eta",
    "estimate moved": "eta",
    "reservation-only estimate": "eta",
    "min runtime": "allocated-job",
    "protected until": "protection",
    "GPU utilization": "utilization",
}
# `allot show` labels that name a thing or a time, not a figure
SHOW_NOT_FIGURES = {
    "array", "cluster", "env", "gpus", "image", "job", "kind", "priority", "project",
    "reason", "resumable", "state", "submitted", "submitter",
}  # fmt: skip
# CLI headers that name a thing or a time, not a figure
CLI_NOT_FIGURES = {
    "#", "ADAPTER", "AT", "ATTEMPT", "BY", "CLUSTER", "CREATED", "CURRENT", "DAY (UTC)", "END",
    "ENDED", "EXPIRES", "FROM", "GPUS", "HOST", "HOSTS", "JOBID", "KEY", "KIND", "NAME", "NODE",
    "PRIO", "PROJECT", "REASON", "SINCE", "STARTED", "STATE", "TO", "USER", "WHY",
}  # fmt: skip


def _anchors() -> set[str]:
    return set(re.findall(r"^### ([a-z0-9-]+)$", GLOSSARY.read_text(), re.M))


def _template_labels() -> dict[str, set[str]]:
    labels: dict[str, set[str]] = {}
    for path in TEMPLATES:
        text = path.read_text()
        found = [
            *re.findall(r"<th[^>]*>(.*?)</th>", text, re.S),
            *re.findall(r'data-label="([^"]+)"', text),
            *re.findall(r"<dt>(.*?)</dt>", text, re.S),
        ]
        for raw in found:
            label = " ".join(re.sub(r"<[^>]+>|\{[%{].*?[%}]\}", " ", raw).split())
            if label:
                labels.setdefault(label, set()).add(path.name)
    return labels


def _api_number_fields() -> set[str]:
    fields: set[str] = set()
    for path in SERIALIZERS:
        kinds = "|".join(NUMBER_FIELDS)
        found = re.findall(rf"^\s+(\w+) = serializers\.(?:{kinds})\(", path.read_text(), re.M)
        fields |= set(found)
    return fields


def test_the_templates_are_found():
    labels = _template_labels()
    assert "Entitled share" in labels and "Level FS" in labels  # the parser reads them


def test_every_page_label_is_a_glossary_figure_or_not_a_figure():
    unknown = {
        label: sorted(files)
        for label, files in _template_labels().items()
        if label not in FIGURES and label not in NOT_FIGURES
    }
    assert not unknown, f"labels without a glossary entry (docs/concepts.md): {unknown}"


def test_every_api_number_field_is_a_glossary_figure():
    found = _api_number_fields()
    assert "fairshare_factor" in found  # the scan reads the scheduler's serializers too
    assert {"position", "weight"} <= found  # and whole numbers and decimals, not only floats
    unknown = found - set(API_FIELDS) - API_NOT_FIGURES
    assert not unknown, f"API fields without a glossary entry: {sorted(unknown)}"


CLI_HEADER = re.compile(r"^[A-Z#][A-Z_ ]*( \(UTC\))?$")


def _cli_headers() -> dict[str, set[str]]:
    """Column headers of the CLI's tables: the literal headers of every `render.table`
    call (and of the lists they splice in), and `allot shares`' computed ones."""
    headers: dict[str, set[str]] = {}
    for path in sorted((ROOT / "allot_cli").glob("*.py")):
        tree = ast.parse(path.read_text())
        spliced = {  # `extra = [...] if long else []`
            node.targets[0].id: [*node.value.body.elts, *node.value.orelse.elts]
            for node in ast.walk(tree)
            if isinstance(node, ast.Assign)
            and isinstance(node.value, ast.IfExp)
            and isinstance(node.value.body, ast.List)
            and isinstance(node.value.orelse, ast.List)
        }
        named = {  # `columns = [...]`, passed to `render.table(columns, ...)`
            node.targets[0].id: node.value
            for node in ast.walk(tree)
            if isinstance(node, ast.Assign)
            and isinstance(node.targets[0], ast.Name)
            and isinstance(node.value, ast.List)
        }
        for call in ast.walk(tree):
            if not (isinstance(call, ast.Call) and ast.unparse(call.func) == "render.table"):
                continue
            first = call.args[0]
            first = named.get(first.id, first) if isinstance(first, ast.Name) else first
            for node in ast.walk(first):
                found = spliced.get(node.id, []) if isinstance(node, ast.Name) else [node]
                for item in found:
                    if isinstance(item, ast.Constant) and CLI_HEADER.match(str(item.value)):
                        headers.setdefault(item.value, set()).add(path.name)
    for column in SHARE_COLUMNS:
        shown = SHARE_HEADERS.get(column, column.upper().replace("_", "\n", 1))
        headers.setdefault(" ".join(shown.split()), set()).add("usage.py")
    return headers


def test_the_cli_headers_are_found():
    headers = _cli_headers()
    assert {"DELIVERED", "POS", "FS", "LEVEL FS", "IN_USE"} <= set(headers)


def test_every_cli_column_is_a_glossary_figure_or_not_a_figure():
    unknown = {
        header: sorted(files)
        for header, files in _cli_headers().items()
        if header not in CLI_FIGURES and header not in CLI_NOT_FIGURES
    }
    assert not unknown, f"CLI columns without a glossary entry (docs/concepts.md): {unknown}"


@pytest.mark.parametrize(
    "mapping", [FIGURES, API_FIELDS, CLI_FIGURES, SHOW_FIGURES], ids=["pages", "api", "cli", "show"]
)
def test_every_mapped_entry_exists_in_the_glossary(mapping):
    missing = {label: anchor for label, anchor in mapping.items() if anchor not in _anchors()}
    assert not missing, f"no such glossary entry: {missing}"


# Two different figures never share a name: the tree's entitled GPU-hours (uncapped)
# and the delivery figures' demand-capped entitlement once were both "Entitled".
SHARED_NAMES_GONE = {"Entitled", "Entitled (GPU-h)", "GPU-h/week ( GPUs)"}


def test_no_two_figures_share_a_label():
    assert not SHARED_NAMES_GONE & set(_template_labels())


def test_no_label_is_both_a_figure_and_not_one():
    assert not set(FIGURES) & NOT_FIGURES
    assert not set(API_FIELDS) & API_NOT_FIGURES
    assert not set(CLI_FIGURES) & CLI_NOT_FIGURES


SHOW_LABEL = re.compile(r"^(GPU )?[a-z][a-z -]*$")  # lower case but for an acronym


def _show_labels() -> set[str]:
    """The line labels of `allot show` (the `(label, value)` pairs of allot_cli/jobs.py)."""
    tree = ast.parse((ROOT / "allot_cli" / "jobs.py").read_text())
    return {
        node.elts[0].value
        for node in ast.walk(tree)
        if isinstance(node, ast.Tuple)
        and len(node.elts) == 2
        and isinstance(node.elts[0], ast.Constant)
        and isinstance(node.elts[0].value, str)
        and SHOW_LABEL.match(node.elts[0].value)
    }


def _entries() -> dict[str, str]:
    """Glossary anchor -> the text of its entry."""
    parts = re.split(r"^### ([a-z0-9-]+)$", GLOSSARY.read_text(), flags=re.M)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def test_every_allot_show_label_is_a_glossary_figure_or_not_a_figure():
    labels = _show_labels()
    assert {"queue position", "estimated start", "GPU utilization"} <= labels  # the scan reads them
    unknown = labels - set(SHOW_FIGURES) - SHOW_NOT_FIGURES
    assert not unknown, f"allot show labels without a glossary entry: {sorted(unknown)}"


# API time fields that are figures of the glossary (the number scan above does not see
# them) -> glossary anchor
API_TIME_FIELDS = {"protected_until": "protection"}


def test_the_api_time_figures_are_served():
    found: set[str] = set()
    for path in SERIALIZERS:
        found |= set(
            re.findall(r"^\s+(\w+) = serializers\.DateTimeField\(", path.read_text(), re.M)
        )
    assert set(API_TIME_FIELDS) <= found


@pytest.mark.parametrize(
    "mapping", [API_FIELDS, SHOW_FIGURES, API_TIME_FIELDS], ids=["api", "show", "api-times"]
)
def test_the_glossary_entry_names_the_field_or_the_label(mapping):
    """An API field and an `allot show` label appear in the entry they map to, so the
    glossary says where each figure is shown under which name."""
    entries = {
        anchor: " ".join(text.replace("**", "").split()).lower()
        for anchor, text in _entries().items()
    }
    missing = {
        label: anchor
        for label, anchor in mapping.items()
        if not re.search(rf"(?<![a-z_]){re.escape(label.lower())}(?![a-z_])", entries[anchor])
    }
    assert not missing, f"not named in their glossary entry: {missing}"


def _glossary_names() -> dict[str, list[str]]:
    """Glossary anchor -> the names its entry gives the figure (its bold title, each
    alternative of "a / b", without a parenthesis or what follows a colon), lowercase."""
    names = {}
    for anchor, text in _entries().items():
        title = re.match(r"\s*\*\*(.+?)\*\*", text, re.S)
        raw = " ".join(title.group(1).split()) if title else anchor.replace("-", " ")
        raw = re.sub(r"\(.*?\)", "", raw.split(":")[0]).strip(" .").lower()
        names[anchor] = [name.strip() for name in raw.split("/")]
    return names


def _api_help_texts() -> list[tuple[str, str, str]]:
    """(file, field, help text) of every mapped API number field that has a help text."""
    found = []
    for path in SERIALIZERS:
        tree = ast.parse(path.read_text())
        constants = {  # a help text named once and used by two fields (input and output)
            node.targets[0].id: node.value
            for node in tree.body
            if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name)
        }
        for node in ast.walk(tree):
            if not (
                isinstance(node, ast.Assign)
                and isinstance(node.targets[0], ast.Name)
                and node.targets[0].id in API_FIELDS
                and isinstance(node.value, ast.Call)
            ):
                continue
            for keyword in node.value.keywords:
                if keyword.arg == "help_text":
                    value = keyword.value
                    if isinstance(value, ast.Name):
                        value = constants[value.id]
                    text = ast.literal_eval(value)
                    found.append((path.name, node.targets[0].id, text))
    return found


def _simple(text: str) -> str:
    return " ".join(re.sub(r"[^a-z0-9 ]", " ", text.lower()).split())


def test_an_api_fields_description_calls_the_figure_by_its_glossary_name():
    """The API's description of a figure uses the glossary's name for it (a reader of
    the schema meets the words of the pages): "Demand-capped entitlement: ...", not a
    second name for the same figure."""
    names = _glossary_names()
    texts = _api_help_texts()
    assert len(texts) > 20  # the scan reads them
    wrong = [
        f"{file} {field}: {text!r} (glossary: {' / '.join(names[API_FIELDS[field]])})"
        for file, field, text in texts
        if not any(
            _simple(name) in _simple(text) or _simple(name).rstrip("s") in _simple(text)
            for name in names[API_FIELDS[field]]
        )
    ]
    assert not wrong, "\n".join(wrong)


CHART_SOURCES = [ROOT / "dashboards" / "charts.py", *sorted((ROOT / "static" / "js").glob("*.js"))]


def _chart_legend_names() -> set[str]:
    """The legend names the charts give their traces: `name="..."` in the figure
    builders, the `("Name", "field_gpu_h", colour)` tuples they loop over, and the
    `bar("...")` / `tick("...")` helpers of the what-if chart."""
    names: set[str] = set()
    for path in CHART_SOURCES:
        text = path.read_text()
        names |= set(re.findall(r'\bname="([^"]+)"', text))
        names |= set(re.findall(r'\(\s*"([^"]+)",\s*"\w+_gpu_h"', text))
        names |= set(re.findall(r'\b(?:bar|tick)\(\s*"([^"]+)"', text))
    return names


def test_no_chart_names_the_demand_capped_entitlement_entitled():
    """The delivery, My jobs and what-if charts drew the demand-capped entitlement as
    "Entitled", beside the budget tree's (uncapped) entitled GPU-hours: their legends
    say the glossary's name, as their tables do."""
    names = _chart_legend_names()
    assert {"Delivered", "Delivered, recorded"} <= names  # the scan reads the charts
    entitled = {n for n in names if n.split(",")[0] in SHARED_NAMES_GONE}
    assert not entitled, f"chart legends with an ambiguous entitlement name: {entitled}"
    assert "Demand-capped entitlement" in names
    # nor do the charts' headings and descriptions
    said = {
        f"{path.name}: {m}"
        for path in TEMPLATES
        for m in re.findall(r"(?i)delivered\b[^<\"]{0,20}\b(?:vs|and) entitled", path.read_text())
    }
    assert not said, f"chart headings with an ambiguous entitlement name: {said}"


# --- "entitled GPU-hours" is the budget tree's uncapped figure, and only that ------------

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
MD_LINK = re.compile(r"\[([^\]]+)\]\(([^)]*#(?:demand-capped-entitlement|entitled-gpu-hours))\)")


def test_the_demand_capped_entitlement_is_never_called_entitled_gpu_hours():
    """The delivery figures' entitlement (capped by demand, hour by hour) is
    `capped_entitled_gpu_h` / "demand-capped entitlement" (CLI CAPPED ENT) in the API,
    its CSVs, the what-if preview and the docs; "entitled GPU-hours" is the tree page's
    uncapped figure. `entitled_gpu_h` survives only as API `usage/`'s deprecated alias."""
    # the API: a field of that old name is the deprecated alias, nothing else
    for path in SERIALIZERS:
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Assign)
                and isinstance(node.targets[0], ast.Name)
                and node.targets[0].id == "entitled_gpu_h"
            ):
                assert ast.unparse(node.value.func) == "DeprecatedFloatField", path.name
    # the CSV downloads and the preview's per-project figures
    from dashboards import charts
    from scheduler.core.sim import whatif

    assert "capped_entitled_gpu_h" in charts.delivery_csv({"projects": []})[0]
    over_time = {"steps": [], "entitled": [], "delivered": [], "cumulative": []}
    assert "capped_entitled_gpu_h" in charts.delivery_over_time_csv(over_time)[0]
    assert "capped_entitled_gpu_h" in whatif._FIGURES and "entitled_gpu_h" not in whatif._FIGURES
    views = (ROOT / "dashboards" / "views.py").read_text()
    assert '"entitled_gpu_h",' not in views  # /me/'s CSV header
    # the pages: the uncapped label only on the tree page
    uncapped = {label for label, anchor in FIGURES.items() if anchor == "entitled-gpu-hours"}
    assert {f for label in uncapped for f in _template_labels().get(label, ())} == {"tree.html"}
    # the docs: a link to either entry says its own name
    wrong = [
        f"{doc.name}: [{text}]({target})"
        for doc in DOCS
        for text, target in MD_LINK.findall(doc.read_text())
        if ("capped" in text.lower()) != target.endswith("#demand-capped-entitlement")
    ]
    assert not wrong, wrong


def test_the_deprecated_alias_is_marked_in_the_schema():
    from drf_spectacular.generators import SchemaGenerator

    schema = SchemaGenerator().get_schema(request=None, public=True)
    rows = [
        s["properties"]
        for s in schema["components"]["schemas"].values()
        if "capped_entitled_gpu_h" in s.get("properties", {})
    ]
    assert rows, "no schema carries capped_entitled_gpu_h"
    for properties in rows:
        assert properties["entitled_gpu_h"].get("deprecated") is True
        assert "capped_entitled_gpu_h" in properties["entitled_gpu_h"]["description"]
        assert not properties["capped_entitled_gpu_h"].get("deprecated")
