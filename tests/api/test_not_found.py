"""Every 404 under /api/ is the API's error object, with DEBUG on (Django's technical
page otherwise) or off, for paths no endpoint matches and for unknown objects."""

import pytest

pytestmark = pytest.mark.django_db

UNMATCHED = ["/api/v1/jobs/null,null/", "/api/v1/no-such-thing/", "/api/nothing"]


@pytest.mark.parametrize("debug", [True, False])
@pytest.mark.parametrize("path", UNMATCHED)
def test_an_unmatched_api_path_answers_the_json_error(client, settings, debug, path):
    settings.DEBUG = debug
    response = client.get(path, HTTP_ACCEPT="text/html")
    assert response.status_code == 404
    assert response["Content-Type"] == "application/json"
    assert response.json() == {
        "code": "not_found",
        "detail": f"There is no API endpoint at {path}.",
    }


def test_an_unknown_object_keeps_its_own_json_404(api_client, admin_user):
    api_client.force_authenticate(admin_user)
    response = api_client.get("/api/v1/jobs/999999/")
    assert response.status_code == 404
    assert response.json()["code"] == "not_found"


def test_a_missing_trailing_slash_is_still_redirected(client, settings):
    settings.DEBUG = True
    response = client.get("/api/v1/jobs")
    assert response.status_code == 301
    assert response["Location"] == "/api/v1/jobs/"


def test_pages_outside_the_api_keep_the_html_404(client, settings):
    settings.DEBUG = False
    response = client.get("/no-such-page/")
    assert response.status_code == 404
    assert response["Content-Type"].startswith("text/html")
