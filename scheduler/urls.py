from django.urls import path

from scheduler import views

app_name = "scheduler"

urlpatterns = [
    path("jobs/<int:job_id>/", views.job_detail, name="job-detail"),
    path("planner/", views.planner_list, name="planner-list"),
    path("planner/<slug:name>/", views.planner_detail, name="planner-detail"),
]
