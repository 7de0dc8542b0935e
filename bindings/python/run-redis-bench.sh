#!/usr/bin/env bash
# The requests-cache side of `courier bench cache --backend redis --requests-cache`: requests-cache's
# Redis backend (with requests and redis-py) in the project's benchmark virtual environment
# (setup-env.sh; they are never dependencies of the package), saving and reading 1 KiB responses
# on the Redis at URL (bindings/python/tools/bench_redis_cache.py). The last line of stdout is one
# JSON object: requests_cache_get_ops, requests_cache_put_ops.
# Usage: bash bindings/python/run-redis-bench.sh URL [PUTS] [GETS]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
courier_extra_packages=("requests" "requests-cache" "redis")
. bindings/python/setup-env.sh >&2
unset COURIER_LIBRARY PYTHONPATH
"$vpy" bindings/python/tools/bench_redis_cache.py "$@"
