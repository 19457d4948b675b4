from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "accounts"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.contrib.auth import get_user_model
        from django.db.models.signals import post_save

        # Django's hook for registering once the apps are loaded (not a cycle breaker):
        # accounts.services imports the models, which cannot load before this point.
        from accounts.services import tokens_revoke_on_password_change

        # a password changed on purpose revokes the user's API tokens (accounts.services)
        post_save.connect(
            tokens_revoke_on_password_change,
            sender=get_user_model(),
            dispatch_uid="accounts.tokens-on-password-change",
        )
