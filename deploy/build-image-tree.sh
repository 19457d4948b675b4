#!/bin/sh
# build-image-tree.sh SRC DEST: build Allot's production layout into DEST from the
# repository at SRC, with Python packages from the package index only (the hashed locks
# in deploy/). deploy/Containerfile runs this script; run it by hand to check the same
# steps where no container engine runs:
#
#   DEST/venv        the runtime virtualenv: deploy/requirements.lock, nothing else
#                    (no test, lint or embedded-server packages)
#   DEST/app         the application (no tests, no benchmarks), with the engine compiled
#                    by mypyc (build/native) and the static files collected (staticfiles)
#
# Needs python3 with venv, a C compiler and the Python headers (Debian: python3-venv,
# python3-dev, gcc). PYTHON names another interpreter. PIP_CERT names a CA bundle for pip
# (behind a TLS-intercepting proxy; pip runs --isolated, so only this variable reaches it).
set -eu

SRC=$(cd "$1" && pwd)
DEST=$2
PYTHON=${PYTHON:-python3}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$DEST"
DEST=$(cd "$DEST" && pwd)

echo "build-image-tree: the runtime virtualenv (deploy/requirements.lock)"
"$PYTHON" -m venv "$DEST/venv"
"$DEST/venv/bin/python" -m pip install --isolated --no-cache-dir --quiet \
    ${PIP_CERT:+--cert "$PIP_CERT"} --require-hashes --no-deps -r "$SRC/deploy/requirements.lock"

echo "build-image-tree: the application"
mkdir -p "$DEST/app"
(cd "$SRC" && tar -cf - --exclude=__pycache__ --exclude='*.pyc' manage.py pyproject.toml \
    config accounts budgets scheduler ledger ops dashboards allot_cli allot_common templates static \
    tools/build_native.py deploy docs) | tar -xf - -C "$DEST/app"

echo "build-image-tree: the compiled engine (mypyc; build tools from deploy/build-tools.lock)"
"$PYTHON" -m venv "$WORK/tools"
"$WORK/tools/bin/python" -m pip install --isolated --no-cache-dir --quiet \
    ${PIP_CERT:+--cert "$PIP_CERT"} --require-hashes --no-deps -r "$SRC/deploy/build-tools.lock"
(cd "$DEST/app" && "$WORK/tools/bin/python" tools/build_native.py)
rm -rf "$DEST/app/build/native/c" "$DEST/app/build/native/tmp"

echo "build-image-tree: static files"
# Production settings with stand-in URLs: collectstatic connects to nothing.
(cd "$DEST/app" && env DJANGO_SETTINGS_MODULE=config.settings.production \
    SECRET_KEY="build-only-$(date +%s)-not-a-secret-0123456789abcdefghijklmnopqrstuvwxyz" \
    DATABASE_URL=postgres://build@build.invalid/allot REDIS_URL=redis://build.invalid:6379/0 \
    ALLOT_VAR_DIR="$WORK/var" PYTHONDONTWRITEBYTECODE=1 \
    "$DEST/venv/bin/python" manage.py collectstatic --noinput --verbosity 0)

echo "build-image-tree: done: $DEST/venv, $DEST/app"
