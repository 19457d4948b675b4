"""django.contrib.messages on pages only (config.middleware.PageMessageMiddleware)."""

from django.contrib import messages
from django.contrib.sessions.backends.signed_cookies import SessionStore
from django.http import HttpResponse
from django.test import RequestFactory

from config.middleware import PageMessageMiddleware


def run(path: str, *, add: str = ""):
    request = RequestFactory().get(path)
    request.session = SessionStore()

    def view(request):
        if add:
            messages.info(request, add)
        return HttpResponse()

    response = PageMessageMiddleware(view)(request)
    return request, response


def test_an_api_request_builds_no_message_storage():
    request, response = run("/api/v1/jobs/")
    assert not hasattr(request, "_messages") and not response.cookies


def test_a_page_keeps_its_messages_for_the_next_page():
    request, _ = run("/jobs/", add="Job cancelled.")
    assert [m.message for m in messages.get_messages(request)] == ["Job cancelled."]
