"""The Celery application: workers and beat read their settings from Django."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.dev")

app = Celery("allot")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
