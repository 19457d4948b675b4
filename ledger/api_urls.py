from django.urls import path

from ledger import api

urlpatterns = [
    path("usage/", api.UsageApi.as_view(), name="usage-list"),
    path("occupancy/", api.OccupancyApi.as_view(), name="occupancy-list"),
    path("fairshare/", api.FairshareApi.as_view(), name="fairshare"),
]
