from django.apps import AppConfig

from config import startup


class DashboardsConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "dashboards"
    verbose_name = "Dashboards"

    def ready(self) -> None:
        # The last of INSTALLED_APPS: the set-up is done, the collector that the entry
        # point paused starts again, what the set-up made frozen (config/startup.py).
        startup.resume()
