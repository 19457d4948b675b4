from django.urls import path

from accounts import views

app_name = "accounts"

urlpatterns = [
    path("me/tokens/", views.tokens, name="tokens"),
    path("me/tokens/revoke-all/", views.tokens_revoke_all, name="tokens-revoke-all"),
    path("me/tokens/<str:token_key>/revoke/", views.token_revoke, name="token-revoke"),
]
