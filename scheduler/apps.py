import logging

from django.apps import AppConfig

from budgets.signals import tree_changed
from scheduler.core import native
from scheduler.cycle_requests import request_cycles_all
from scheduler.process_state import ProcessState


class SchedulerConfig(AppConfig):
    name = "scheduler"
    verbose_name = "Scheduler"

    def ready(self) -> None:
        # every process that serves or schedules says once which engine it runs
        native.log_status(logging.getLogger("scheduler"))
        # what this process keeps between requests (its queue copies, its Redis pools)
        self.process_state = ProcessState()
        # a budget change asks every cluster for a cycle (budgets knows nothing of us)
        tree_changed.connect(request_cycles_all, dispatch_uid="scheduler.cycles-on-tree-change")
