import logging

from django.apps import AppConfig

from scheduler.core import native


class SchedulerConfig(AppConfig):
    name = "scheduler"
    verbose_name = "Scheduler"

    def ready(self) -> None:
        # every process that serves or schedules says once which engine it runs
        native.log_status(logging.getLogger("scheduler"))
