from django.urls import path

from accounts.api import views

urlpatterns = [
    path("auth/token/", views.TokenCreateApi.as_view(), name="api-token"),
    path("auth/tokens/", views.TokenListApi.as_view(), name="api-token-list"),
    path("auth/tokens/<str:token_key>/", views.TokenDetailApi.as_view(), name="api-token-detail"),
]
