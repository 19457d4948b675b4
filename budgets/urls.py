from django.urls import path

from budgets import views

app_name = "budgets"

urlpatterns = [
    path("", views.tree_page, name="tree"),
    path("nodes/<int:node_id>/edit/", views.edit_page, name="edit"),
    path("nodes/<int:node_id>/preview/", views.preview_partial, name="preview"),
    path("history/", views.history_page, name="history"),
    path("scheduled/<int:event_id>/cancel/", views.cancel_scheduled, name="cancel"),
]
