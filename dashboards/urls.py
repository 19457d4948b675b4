from django.urls import path

from dashboards import views

app_name = "dashboards"

urlpatterns = [
    path("dashboards/", views.dashboard, name="dashboard"),
    path("dashboards/occupancy/", views.occupancy, name="occupancy"),
    path("dashboards/delivery/", views.delivery, name="delivery"),
    path("dashboards/efficiency/", views.efficiency, name="efficiency"),
    path("dashboards/fairshare/", views.fairshare, name="fairshare"),
    path("dashboards/waits/", views.waits, name="waits"),
    path("me/", views.me, name="me"),
]
