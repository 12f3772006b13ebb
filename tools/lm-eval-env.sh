#!/usr/bin/env bash
# Prints the python of a venv holding lm-eval (EleutherAI's lm-evaluation-harness) with its API extras, for
# bench/run.sh serve-clients: its local-completions and local-chat-completions models against bin/xla-actors
# serve. About 400 MB (datasets, scikit-learn, ...; no torch); made once under ~/.cache/xla-actors.
set -euo pipefail
lm_eval_version=0.4.13
exec bash "$(dirname "${BASH_SOURCE[0]}")/pinned-venv.sh" "lm-eval-venv-$lm_eval_version" python3 "lm-eval[api]==$lm_eval_version"
