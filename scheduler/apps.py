import logging

from django.apps import AppConfig


class SchedulerConfig(AppConfig):
    name = "scheduler"
    verbose_name = "Scheduler"

    def ready(self) -> None:
        from scheduler import native

        # every process that serves or schedules says once which engine it runs
        native.log_status(logging.getLogger("scheduler"))
