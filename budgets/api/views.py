"""REST endpoints. Thin: parse, call a service or selector, serialise."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.response import Response

from budgets import selectors, services
from budgets.api import serializers as s
from config.api_fields import refuse_any_field
from config.api_schema import error_response, paginated
from config.api_views import ApiView
from config.errors import NotFound
from config.pagination import PAGE_PARAMETERS, Pagination
from config.query import read_api_query


def _node_payload(index: selectors.TreeIndex, node_id: int) -> dict:
    node = index.nodes[node_id]
    share = index.shares[node_id]
    return {
        "id": node.pk,
        "name": node.name,
        "kind": node.kind,
        "parent": node.parent_id,
        "path": index.path(node.pk),
        "weight": node.own_weight,
        "share": share.share,
        "entitled_share": share.entitled,
        "managers": index.managers.get(node.pk, []),
        "members": index.members.get(node.pk, []),
    }


def _validated(serializer_class, data) -> dict:
    serializer = serializer_class(data=data)
    serializer.is_valid(raise_exception=True)
    return serializer.validated_data


class NodeListApi(ApiView):
    @extend_schema(responses=s.NodeOutput(many=True), summary="Every node with its shares")
    def get(self, request):
        index = selectors.tree_index(with_people=True)
        data = [_node_payload(index, node.pk) for node, _ in index.walk()]
        return Response(s.NodeOutput(data, many=True).data)

    @extend_schema(request=s.NodeCreateInput, responses={201: s.NodeOutput}, summary="Add a node")
    def post(self, request):
        data = _validated(s.NodeCreateInput, request.data)
        node = services.node_create(
            actor=request.user,
            parent_id=data["parent"],
            name=data["name"],
            weight=data["weight"],
            kind=data["kind"],
            reason=data["reason"],
        )
        index = selectors.tree_index(with_people=True)
        return Response(
            s.NodeOutput(_node_payload(index, node.pk)).data, status=status.HTTP_201_CREATED
        )


class NodeDetailApi(ApiView):
    @extend_schema(responses=s.NodeOutput, summary="One node with its shares")
    def get(self, request, node_id: int):
        index = selectors.tree_index(with_people=True)
        if node_id not in index.nodes:
            raise NotFound(f"There is no node with id {node_id}.")
        return Response(s.NodeOutput(_node_payload(index, node_id)).data)

    @extend_schema(
        request=s.NodeUpdateInput,
        responses={200: s.NodeOutput, 409: error_response(409)},
        summary="Rename or move a node",
    )
    def patch(self, request, node_id: int):
        data = _validated(s.NodeUpdateInput, request.data)
        services.node_update(
            actor=request.user,
            node_id=node_id,
            name=data.get("name"),
            parent_id=data.get("parent"),
            reason=data["reason"],
            base_version=data.get("base_version"),
        )
        index = selectors.tree_index(with_people=True)
        return Response(s.NodeOutput(_node_payload(index, node_id)).data)


class TreeApi(ApiView):
    @extend_schema(
        responses=s.TreeOutput,
        summary="The whole tree in the import format, with ids and shares",
    )
    def get(self, request):
        roots = selectors.tree_as_dict()
        return Response({"version": selectors.tree_version(), "tree": roots[0] if roots else None})


class BudgetChangeListApi(ApiView):
    @extend_schema(
        parameters=[s.BudgetChangeFilter, *PAGE_PARAMETERS],
        responses=paginated(s.BudgetEventOutput, "PaginatedBudgetEventList"),
        operation_id="v1_budget_changes_list",
        summary="Budget history, newest first",
    )
    def get(self, request):
        filters = read_api_query(s.BudgetChangeFilter, request).validated_data
        events = selectors.budget_event_list(
            node_id=filters.get("node"),
            actor=filters.get("actor"),
            since=filters.get("since"),
            kind=filters.get("kind"),
        )
        paginator = Pagination()
        page = paginator.paginate_queryset(events, request, view=self)
        return paginator.get_paginated_response(s.BudgetEventOutput(page, many=True).data)

    @extend_schema(
        request=s.BudgetChangeInput,
        responses={201: s.BudgetEventOutput, 409: error_response(409)},
        summary="Change weights (now or at effective_at) with a reason",
    )
    def post(self, request):
        data = _validated(s.BudgetChangeInput, request.data)
        event = services.budget_change_create(
            actor=request.user,
            reason=data["reason"],
            changes=data["changes"],
            effective_at=data["effective_at"],
            base_version=data["base_version"],
        )
        event = selectors.budget_event_list().get(pk=event.pk)
        return Response(s.BudgetEventOutput(event).data, status=status.HTTP_201_CREATED)


class BudgetChangeDetailApi(ApiView):
    @extend_schema(responses=s.BudgetEventOutput, summary="One budget event")
    def get(self, request, event_id: int):
        event = selectors.budget_event_list().filter(pk=event_id).first()
        if event is None:
            raise NotFound(f"There is no budget event with id {event_id}.")
        return Response(s.BudgetEventOutput(event).data)


class BudgetChangeCancelApi(ApiView):
    @extend_schema(
        request=s.BudgetCancelInput,
        responses={201: s.BudgetEventOutput, 409: error_response(409)},
        summary="Cancel a scheduled change",
    )
    def post(self, request, event_id: int):
        data = _validated(s.BudgetCancelInput, request.data)
        event = services.budget_change_cancel(
            actor=request.user, scheduled_event_id=event_id, reason=data["reason"]
        )
        event = selectors.budget_event_list().get(pk=event.pk)
        return Response(s.BudgetEventOutput(event).data, status=status.HTTP_201_CREATED)


class MembershipListApi(ApiView):
    @extend_schema(
        parameters=[s.MembershipFilter, *PAGE_PARAMETERS],
        responses=paginated(s.MembershipOutput, "PaginatedMembershipList"),
        summary="Memberships, by node, role and user name",
    )
    def get(self, request):
        filters = read_api_query(s.MembershipFilter, request).validated_data
        memberships = selectors.membership_list(node_id=filters.get("node"))
        paginator = Pagination()
        page = paginator.paginate_queryset(memberships, request, view=self)
        return paginator.get_paginated_response(s.MembershipOutput(page, many=True).data)

    @extend_schema(
        request=s.MembershipInput, responses={201: s.MembershipOutput}, summary="Give a user a role"
    )
    def post(self, request):
        data = _validated(s.MembershipInput, request.data)
        membership = services.membership_add(
            actor=request.user,
            node_id=data["node"],
            username=data["user"],
            role=data["role"],
            reason=data.get("reason"),
        )
        return Response(s.MembershipOutput(membership).data, status=status.HTTP_201_CREATED)


class MembershipDetailApi(ApiView):
    @extend_schema(responses={204: None}, summary="Remove a membership")
    def delete(self, request, membership_id: int):
        refuse_any_field(request.data)
        services.membership_remove(actor=request.user, membership_id=membership_id)
        return Response(status=status.HTTP_204_NO_CONTENT)
