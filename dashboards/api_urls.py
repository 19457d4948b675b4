from django.urls import path

from dashboards import api

urlpatterns = [
    path("waits/", api.WaitsApi.as_view(), name="waits-list"),
]
