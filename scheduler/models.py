"""Clusters. Hosts and workloads arrive with the live service."""

from django.core.validators import MinValueValidator
from django.db import models


class AdapterKind(models.TextChoices):
    SIMULATED = "simulated", "Simulated"
    SLURM = "slurm", "Slurm"


class Cluster(models.Model):
    """A pool of identical hosts. Capacity = host_count x gpus_per_host."""

    name = models.CharField(max_length=100, unique=True)
    host_count = models.PositiveIntegerField(validators=[MinValueValidator(1)])
    gpus_per_host = models.PositiveIntegerField(default=8, validators=[MinValueValidator(1)])
    adapter = models.CharField(
        max_length=20, choices=AdapterKind.choices, default=AdapterKind.SIMULATED
    )

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    @property
    def gpu_capacity(self) -> int:
        return self.host_count * self.gpus_per_host
