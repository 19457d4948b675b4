from django.urls import path

from budgets.api import views

urlpatterns = [
    path("nodes/", views.NodeListApi.as_view(), name="node-list"),
    path("nodes/<int:node_id>/", views.NodeDetailApi.as_view(), name="node-detail"),
    path("tree/", views.TreeApi.as_view(), name="tree"),
    path("budget-changes/", views.BudgetChangeListApi.as_view(), name="budget-change-list"),
    path(
        "budget-changes/<int:event_id>/",
        views.BudgetChangeDetailApi.as_view(),
        name="budget-change-detail",
    ),
    path(
        "budget-changes/<int:event_id>/cancel/",
        views.BudgetChangeCancelApi.as_view(),
        name="budget-change-cancel",
    ),
    path("memberships/", views.MembershipListApi.as_view(), name="membership-list"),
    path(
        "memberships/<int:membership_id>/",
        views.MembershipDetailApi.as_view(),
        name="membership-detail",
    ),
]
