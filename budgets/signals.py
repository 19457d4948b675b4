"""Signals the budgets app sends; other apps connect to them, so that `budgets` never
imports them.

- `tree_changed`: the budget tree's weights or shape changed (sent once the change
  commits). The scheduler asks every cluster for a cycle on it
  (`scheduler.cycle_requests.request_cycles_all`, connected in `SchedulerConfig.ready`).
"""

from django.dispatch import Signal

tree_changed = Signal()
