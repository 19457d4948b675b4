from django.apps import AppConfig


class OpsConfig(AppConfig):
    name = "ops"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.conf import settings

        from ops import checks, collectors, heartbeat, metrics  # noqa: F401  (register them)

        metrics.use_process_files(settings.METRICS_DIR)
