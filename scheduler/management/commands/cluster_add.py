"""`manage.py cluster_add NAME --adapter simulated --hosts 16 --gpus-per-host 8 ...`
or `manage.py cluster_add NAME --adapter slurm --slurm-conf PATH [--partition P]
[--slurm-option KEY=VALUE ...]`."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from config.errors import ApplicationError
from scheduler.management.options import add_policy_arguments, policy_options, refused
from scheduler.models import AdapterKind
from scheduler.services.clusters import cluster_create
from scheduler.services.slurm import slurm_option_value


class Command(BaseCommand):
    help = (
        "Add a cluster and its hosts. A simulated cluster is created in the simulated "
        "cluster process (ALLOT_SIMCLUSTER_URL, or --url) as well."
    )

    def add_arguments(self, parser):
        parser.add_argument("name", help="the cluster's name (letters, digits, . _ -)")
        parser.add_argument(
            "--adapter", default=AdapterKind.SIMULATED, help="simulated (default) or slurm"
        )
        parser.add_argument("--hosts", type=int, help="number of hosts (simulated)")
        parser.add_argument(
            "--gpus-per-host", type=int, default=None, help="GPUs of each host (simulated; 8)"
        )
        parser.add_argument(
            "--speed",
            type=float,
            help="simulated seconds per wall second (simulated; 60: a simulated minute per second)",
        )
        add_policy_arguments(parser, defaults=True)
        parser.add_argument(
            "--url", default="", help="the simulated cluster's URL (default ALLOT_SIMCLUSTER_URL)"
        )
        parser.add_argument(
            "--reset",
            action="store_true",
            help="empty the simulated cluster if the process already has it (its jobs are lost)",
        )
        parser.add_argument(
            "--slurm-conf",
            default="",
            help="the Slurm cluster's slurm.conf (slurm; default $SLURM_CONF); its nodes are imported",
        )
        parser.add_argument(
            "--partition", default="", help="the Slurm partition to use (slurm; default: all nodes)"
        )
        parser.add_argument(
            "--slurm-option",
            action="append",
            default=[],
            metavar="KEY=VALUE",
            help="another Slurm adapter option (slurm; repeatable): sbatch_min_runtime_s=30m, "
            "workdir=/scratch, output=allot-%%j.out, timeout_s=30, use_accounts=off, bin_dir=/opt/slurm/bin",
        )

    def handle(self, *args, **options):
        if options["adapter"] == AdapterKind.SLURM:
            adapter_options = _slurm_adapter_options(options)
        else:
            if options["slurm_conf"] or options["partition"] or options["slurm_option"]:
                raise CommandError(
                    "--slurm-conf, --partition and --slurm-option are for --adapter slurm"
                )
            adapter_options = None
            if options["gpus_per_host"] is None:
                options["gpus_per_host"] = 8
        try:
            cluster = cluster_create(
                name=options["name"],
                adapter=options["adapter"],
                hosts=options["hosts"],
                gpus_per_host=options["gpus_per_host"],
                speed=options["speed"],
                **policy_options(options),
                adapter_url=options["url"],
                adapter_options=adapter_options,
                reset=options["reset"],
            )
        except ApplicationError as exc:
            raise refused(exc) from None
        place = cluster.adapter_url or cluster.adapter_options.get("slurm_conf", "")
        where = f" at {place}" if place else ""
        speed = cluster.adapter_options.get("speed")
        self.stdout.write(
            self.style.SUCCESS(
                f"Added cluster '{cluster.name}': {cluster.host_count} hosts x "
                f"{cluster.gpus_per_host} GPUs ({cluster.gpu_capacity} GPUs), "
                f"{cluster.adapter}{where}" + (f", speed {speed:g}" if speed else "") + "."
            )
        )


def _slurm_adapter_options(options: dict[str, Any]) -> dict[str, Any]:
    """A Slurm cluster's adapter options from the command's; CommandError for an option
    of simulated clusters only (it would be ignored)."""
    if options["gpus_per_host"] is not None:
        raise CommandError("--gpus-per-host: a Slurm cluster's nodes say how many")
    if options["reset"] or options["url"]:
        raise CommandError("--reset and --url are for --adapter simulated (Slurm: --slurm-conf)")
    conf = options["slurm_conf"] or os.environ.get("SLURM_CONF", "")
    adapter_options = {"slurm_conf": str(Path(conf).resolve()) if conf else ""}
    if options["partition"]:
        adapter_options["partition"] = options["partition"]
    adapter_options.update(_slurm_options(options["slurm_option"]))
    return adapter_options


def _slurm_options(given: list[str]) -> dict[str, Any]:
    """{key: typed value} of the --slurm-option KEY=VALUE given; CommandError naming the
    option."""
    options: dict[str, Any] = {}
    for item in given:
        key, equals, text = item.partition("=")
        if not equals or not key.strip():
            raise CommandError(f"--slurm-option: KEY=VALUE expected, got {item!r}")
        try:
            options[key.strip()] = slurm_option_value(key.strip(), text)
        except ApplicationError as exc:
            raise CommandError(f"--slurm-option {exc.message}") from None
    return options
