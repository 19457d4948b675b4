#!/usr/bin/env python
"""Django's command-line utility."""

import os
import sys

from config import startup


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.dev")
    from django.core.management import execute_from_command_line

    startup.pause()  # until the apps are ready (config/startup.py)
    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
