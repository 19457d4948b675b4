"""Django admin of the live service. A cluster's operators are editable, its policy only
when it is added (afterwards `cluster_policy_update`, audited, through `manage.py
cluster_set` or the API) and its metrics settings never here (shown read-only, without
the bearer token; `cluster_metrics_update`, audited, through `manage.py cluster_metrics`
or the API); a host's health changes through `host_set_health` (audited)
by the drain/resume actions; jobs are cancelled through `job_cancel`; events, attempts,
cycles and keys are read-only."""

from django.contrib import admin, messages

from budgets.admin import ReadOnlyAdmin
from config.admin_refusals import ServiceAdmin
from config.errors import ApplicationError
from scheduler.models import (
    Attempt,
    Cluster,
    ClusterPolicyEvent,
    CycleRecord,
    Host,
    HostEvent,
    IdempotencyKey,
    Job,
    JobEvent,
)
from scheduler.selectors.utilization import metrics_settings
from scheduler.services.clusters import POLICY_FIELDS, cluster_operators_set
from scheduler.services.hosts import host_set_health
from scheduler.services.jobs import job_cancel


def _staff_view(request) -> bool:
    return request.user.is_active and request.user.is_staff


class StaffReadOnlyAdmin(ReadOnlyAdmin):
    def has_view_permission(self, request, obj=None):
        return _staff_view(request)


class ClusterPolicyEventInline(admin.TabularInline):
    model = ClusterPolicyEvent
    extra = 0
    can_delete = False
    fields = readonly_fields = ["at", "changes", "reason", "actor_name"]

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(Cluster)
class ClusterAdmin(ServiceAdmin):
    """Clusters are added with `manage.py cluster_add` (`cluster_create`: validated,
    provisioned) and never deleted; their policy changes through
    `cluster_policy_update`. Here only the operators change, through
    `cluster_operators_set` (audited with the admin user as actor)."""

    list_display = ["name", "adapter", "host_count", "gpus_per_host", "gpu_capacity"]
    filter_horizontal = ["operators"]
    inlines = [ClusterPolicyEventInline]
    fieldsets = [
        (None, {"fields": ["name", "host_count", "gpus_per_host", "operators"]}),
        ("Adapter", {"fields": ["adapter", "adapter_url", "adapter_options"]}),
        (
            "Policy",
            {
                "fields": list(POLICY_FIELDS),
                "description": "To change the policy of a cluster, use <code>manage.py "
                "cluster_set NAME --reason ...</code> or <code>PATCH /api/v1/clusters/{id}/"
                "</code>: they check the values and record who changed what and why.",
            },
        ),
        (
            "GPU metrics",
            {
                "fields": ["gpu_metrics"],
                "description": "To change where a cluster's GPU metrics are read, use "
                "<code>manage.py cluster_metrics NAME --reason ...</code> or <code>PATCH "
                "/api/v1/clusters/{id}/metrics/</code>: they check the values and record "
                "the change (never a token's value).",
            },
        ),
    ]

    readonly_fields = [
        "name",
        "host_count",
        "gpus_per_host",
        "adapter",
        "adapter_url",
        "adapter_options",
        *POLICY_FIELDS,
        "gpu_metrics",
    ]

    @admin.display(description="Metrics settings")
    def gpu_metrics(self, obj: Cluster) -> str:
        shown = metrics_settings(obj)
        return (
            f"Prometheus: {shown['prometheus_url'] or 'none'}; host label "
            f"{shown['host_label']}, GPU label {shown['gpu_label']}; selector "
            f"{shown['selector'] or 'none'}; bearer token "
            f"{'set' if shown['bearer_token_set'] else 'not set'}"
        )

    def has_add_permission(self, request):
        return False

    def has_delete_permission(self, request, obj=None):
        return False

    def save_model(self, request, obj, form, change):
        pass  # every other field is read-only; the operators are saved below

    def save_related(self, request, form, formsets, change):
        for formset in formsets:  # the read-only policy history: saves nothing
            self.save_formset(request, form, formset, change=change)
        try:
            cluster_operators_set(
                actor=request.user,
                cluster_id=form.instance.pk,
                usernames=[u.get_username() for u in form.cleaned_data["operators"]],
                reason=f"operators changed in the admin by {request.user.get_username()}",
            )
        except ApplicationError as exc:
            self.refuse(request, exc.message)


def _set_health(modeladmin, request, queryset, health: str, reason: str) -> None:
    done = 0
    for host in queryset:
        try:
            host_set_health(actor=request.user, host_id=host.pk, health=health, reason=reason)
            done += 1
        except ApplicationError as exc:
            modeladmin.message_user(request, f"{host}: {exc.message}", messages.ERROR)
    if done:
        modeladmin.message_user(request, f"{done} host(s) set {health}.", messages.SUCCESS)


@admin.action(
    description="Drain the selected hosts (no new work; running jobs stop after protection)"
)
def drain_hosts(modeladmin, request, queryset):
    _set_health(
        modeladmin, request, queryset, "draining", f"drained in the admin by {request.user}"
    )


@admin.action(description="End the drain of the selected hosts")
def resume_hosts(modeladmin, request, queryset):
    _set_health(modeladmin, request, queryset, "healthy", f"resumed in the admin by {request.user}")


class HostEventInline(admin.TabularInline):
    model = HostEvent
    extra = 0
    can_delete = False
    fields = readonly_fields = ["at", "from_health", "to_health", "reason", "actor_name"]

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(Host)
class HostAdmin(StaffReadOnlyAdmin):
    """Read-only but for the drain/resume actions (audited, through the service)."""

    list_display = ["name", "cluster", "gpus", "health", "health_reason", "health_changed_at"]
    list_filter = ["cluster", "health"]
    search_fields = ["name"]
    actions = [drain_hosts, resume_hosts]
    inlines = [HostEventInline]


@admin.register(HostEvent)
class HostEventAdmin(StaffReadOnlyAdmin):
    list_display = ["at", "host", "from_health", "to_health", "actor_name", "reason"]
    list_filter = ["to_health", "host__cluster"]


@admin.register(ClusterPolicyEvent)
class ClusterPolicyEventAdmin(StaffReadOnlyAdmin):
    list_display = ["at", "cluster", "changes", "actor_name", "reason"]
    list_filter = ["cluster"]


@admin.action(description="Cancel the selected jobs")
def cancel_jobs(modeladmin, request, queryset):
    done = 0
    for job in queryset:
        try:
            job_cancel(actor=request.user, job_id=job.pk)
            done += 1
        except ApplicationError as exc:
            modeladmin.message_user(request, f"job {job.pk}: {exc.message}", messages.ERROR)
    if done:
        modeladmin.message_user(request, f"{done} job(s) cancelled or stopping.", messages.SUCCESS)


class AttemptInline(admin.TabularInline):
    model = Attempt
    fk_name = "job"
    extra = 0
    can_delete = False
    fields = readonly_fields = [
        "number",
        "attempt_id",
        "state",
        "allocated",
        "placements",
        "started_at",
        "ended_at",
        "end_reason",
    ]

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(Job)
class JobAdmin(StaffReadOnlyAdmin):
    """Read-only: states change through the services (the cancel action)."""

    list_display = ["id", "name", "project", "cluster", "submitter", "gpus", "kind", "state"]
    list_filter = ["state", "kind", "cluster"]
    search_fields = ["name", "submitter__username"]
    list_select_related = ["project", "cluster", "submitter"]
    actions = [cancel_jobs]
    inlines = [AttemptInline]


@admin.register(JobEvent)
class JobEventAdmin(StaffReadOnlyAdmin):
    list_display = ["at", "job", "from_state", "to_state", "reason_code", "actor_name"]
    list_filter = ["to_state"]
    search_fields = ["reason"]
    raw_id_fields = ["job"]


@admin.register(Attempt)
class AttemptAdmin(StaffReadOnlyAdmin):
    list_display = ["attempt_id", "job", "cluster", "state", "started_at", "ended_at", "end_reason"]
    list_filter = ["state", "end_reason", "cluster"]


@admin.register(CycleRecord)
class CycleRecordAdmin(StaffReadOnlyAdmin):
    list_display = ["started_at", "cluster", "duration_ms", "pending", "starts", "stops"]
    list_filter = ["cluster"]


@admin.register(IdempotencyKey)
class IdempotencyKeyAdmin(StaffReadOnlyAdmin):
    list_display = ["created_at", "user", "key"]
    exclude = ["fingerprint"]
