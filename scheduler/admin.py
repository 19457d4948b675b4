from django.contrib import admin

from scheduler.models import Cluster


@admin.register(Cluster)
class ClusterAdmin(admin.ModelAdmin):
    list_display = ["name", "adapter", "host_count", "gpus_per_host", "gpu_capacity"]
