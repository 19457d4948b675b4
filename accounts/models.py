"""API tokens: several per user, each named, hashed at rest, listable and revocable.

django-rest-knox stores only a SHA-512 digest of each token (the secret is shown once,
when it is made) and the first characters (`token_key`) to name it in lists."""

from django.db import models
from knox.models import AbstractAuthToken


class ApiToken(AbstractAuthToken):
    name = models.CharField(max_length=100, blank=True)

    class Meta:
        ordering = ["-created"]

    def __str__(self) -> str:
        return f"{self.token_key}… of {self.user} ({self.name or 'unnamed'})"
