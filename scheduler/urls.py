from django.urls import path

from scheduler import views
from scheduler.views import queue, whatif

app_name = "scheduler"

urlpatterns = [
    path("jobs/<int:job_id>/", views.job_detail, name="job-detail"),
    path("jobs/<int:job_id>/waiting/", views.job_waiting, name="job-waiting"),
    path("now/", views.now, name="now"),
    path("queue/", queue.queue_home, name="queue"),
    path("clusters/<int:cluster_id>/queue/", queue.cluster_queue, name="cluster-queue"),
    path("planner/", views.planner_list, name="planner-list"),
    path("planner/<slug:name>/", views.planner_detail, name="planner-detail"),
    # the budget edit page's what-if preview: under /budgets/, served by the scheduler
    path("budgets/nodes/<int:node_id>/whatif/", whatif.whatif_start, name="whatif"),
    path("budgets/whatif/<int:preview_id>/", whatif.whatif_status, name="whatif-status"),
]
