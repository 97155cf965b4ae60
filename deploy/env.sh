#!/bin/sh
# `deploy/env.sh COMMAND [ARGS]`: a command run as Tasklift's services run it (deploy/systemd/): as the tasklift
# user, from the project root, with the virtualenv's bin first on PATH and the settings of the environment file
# (/etc/tasklift/tasklift.env). For the runbook's one-off steps: `deploy/env.sh python manage.py migrate --noinput`.
# Run it as root or as that user; what the caller's environment holds besides (DJANGO_SUPERUSER_*) is passed on.
set -eu
app_dir=$(cd "$(dirname "$0")/.." && pwd)
user=${TASKLIFT_USER:-tasklift}
env_file=${TASKLIFT_ENV_FILE:-/etc/tasklift/tasklift.env}
if [ "$(id -un)" != "$user" ]; then
    exec runuser -u "$user" -- "$app_dir/deploy/env.sh" "$@"
fi
set -a
. "$env_file"
set +a
cd "$app_dir"
PATH="$app_dir/.venv/bin:$PATH"
export PATH
exec "$@"
