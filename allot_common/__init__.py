"""Small pure helpers that the `allot` CLI and the server both use (no Django, no
server code, no CLI code): `allot_common.durations`, the durations people type.

The CLI imports nothing of the server and the server nothing of the CLI; what both
need lives here (import-linter contract in pyproject.toml)."""
