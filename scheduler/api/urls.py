from django.urls import path

from scheduler.api import views

urlpatterns = [
    path("jobs/", views.JobListApi.as_view(), name="job-list"),
    path("jobs/<int:job_id>/", views.JobDetailApi.as_view(), name="job-detail"),
    path("jobs/<int:job_id>/cancel/", views.JobCancelApi.as_view(), name="job-cancel"),
    path("queue/", views.QueueApi.as_view(), name="queue"),
    path("clusters/", views.ClusterListApi.as_view(), name="cluster-list"),
    path("clusters/<int:cluster_id>/", views.ClusterDetailApi.as_view(), name="cluster-detail"),
    path(
        "clusters/<int:cluster_id>/metrics/",
        views.ClusterMetricsApi.as_view(),
        name="cluster-metrics",
    ),
    path("hosts/", views.HostListApi.as_view(), name="host-list"),
    path("hosts/<int:host_id>/", views.HostDetailApi.as_view(), name="host-detail"),
    path("previews/", views.PreviewCreateApi.as_view(), name="preview-create"),
    path("previews/<int:preview_id>/", views.PreviewDetailApi.as_view(), name="preview-detail"),
]
