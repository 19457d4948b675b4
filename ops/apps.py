from django.apps import AppConfig


class OpsConfig(AppConfig):
    name = "ops"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.conf import settings
        from django.db.models.signals import post_migrate

        # Django's hook for registering once the apps are loaded (not a cycle breaker):
        # importing the heartbeat connects its signal handlers, which read models.
        from ops import dbroles, heartbeat, metrics  # noqa: F401

        metrics.use_process_files(settings.METRICS_DIR)
        # once per migrate, after every app's migrations (the runtime role's grants)
        post_migrate.connect(dbroles.grant_runtime_role, sender=self)
