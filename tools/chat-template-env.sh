#!/usr/bin/env bash
# Creates (once) a light Python virtual environment with Hugging Face transformers and tokenizers but no
# torch, used only by tools/chat_template_reference.py to make the expected prompt ids of the chat-template
# test (http/src/test/resources/chat-templates/reference.json): apply_chat_template needs no torch. The pins
# are tools/torch-env.sh's, so the ids are the same as that venv's. Prints the venv's python path.
#
#   venv: ${XLA_ACTORS_CACHE:-$HOME/.cache/xla-actors}/chat-template-venv-<transformers version>
set -euo pipefail
transformers_version=5.23.0
tokenizers_version=0.23.3
jinja2_version=3.1.6
exec bash "$(dirname "${BASH_SOURCE[0]}")/pinned-venv.sh" "chat-template-venv-$transformers_version" python3 \
  "transformers==$transformers_version" "tokenizers==$tokenizers_version" "jinja2==$jinja2_version"
