"""The batch script of one Allot attempt on Slurm."""

from __future__ import annotations

import shlex

from scheduler.adapters.base import AdapterError, StartRequest
from scheduler.adapters.slurm.parsing import ENV_NAME_RE


def job_script(request: StartRequest) -> str:
    """The batch script of one attempt: the job's command in its own process group,
    its environment, and a SIGTERM trap that forwards a graceful stop to the command
    and waits for it to exit. `spec["image"]` is not used on Slurm."""
    spec = request.spec or {}
    command = spec.get("command")
    if isinstance(command, list | tuple):
        command = shlex.join(str(part) for part in command)
    if not command or not str(command).strip():
        raise AdapterError(
            f"job {request.job_name!r} has no command to run on Slurm", retryable=False
        )
    env = dict(spec.get("env") or {})
    bad = [name for name in env if not ENV_NAME_RE.match(str(name))]
    if bad:
        raise AdapterError(
            f"invalid environment variable name(s): {', '.join(map(str, bad))}", retryable=False
        )
    exports = "\n".join(
        f"export {name}={shlex.quote(str(value))}" for name, value in sorted(env.items())
    )
    image = spec.get("image")
    return SCRIPT_TEMPLATE.format(
        attempt_id=request.attempt_id,
        image_note=f"# image {image!r} is not used: Slurm runs the command on the node\n"
        if image
        else "",
        exports=exports,
        attempt=shlex.quote(request.attempt_id),
        project=shlex.quote(request.project),
        command=shlex.quote(str(command)),
    )


SCRIPT_TEMPLATE = """\
#!/bin/bash
# Allot attempt {attempt_id}
{image_note}{exports}
export ALLOT_ATTEMPT_ID={attempt} ALLOT_PROJECT={project}
# Job control: the command runs in its own process group, so that a stop reaches
# every process of it, not only the shell.
set -m
interrupted=0
forward_stop() {{
  interrupted=1
  echo "allot: stop requested, sending SIGTERM to the command" >&2
  kill -TERM -- "-$child" 2>/dev/null || kill -TERM "$child" 2>/dev/null
}}
trap forward_stop TERM
bash -c {command} &
child=$!
while :; do
  wait "$child"; status=$?
  # the trap interrupted wait (status > 128): wait again for the command's own status
  if [ "$status" -gt 128 ] && [ "$interrupted" = 1 ]; then interrupted=0; continue; fi
  break
done
exit "$status"
"""
