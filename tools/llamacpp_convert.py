"""Runs llama.cpp's convert_hf_to_gguf.py on a Hugging Face checkpoint, with one addition: a BPE
pre-tokenizer the converter does not recognise is written as the one named by --pre instead of refused.

    PYTHON tools/llamacpp_convert.py --llamacpp SRC [--pre gpt-2] HF_DIR --outfile OUT.gguf --outtype f32

PYTHON: the venv of tools/llamacpp-convert-env.sh; SRC: the llama.cpp source (tools/llamacpp-build.sh
--source). Every other argument goes to convert_hf_to_gguf.py as it is.

Why the mapping: the converter names a tokenizer's pre-tokenizer (the regex that splits text before BPE)
by the sha256 of how the tokenizer encodes a fixed test text, against a table of published models. The
Llama checkpoint of tools/llamacpp_checkpoints.py splits text with GPT-2's regex but has a smaller
vocabulary (the first 49,151 of GPT-2's merges), so the test text encodes to other ids, the hash is in no
table, and the converter stops. --pre says which pre-tokenizer it is; a recognised hash is kept as it is.
"""
import argparse
import logging
import pathlib
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0], add_help=False)
    ap.add_argument("--llamacpp", required=True, type=pathlib.Path, help="the llama.cpp source folder")
    ap.add_argument("--pre", help="the pre-tokenizer to write when the converter does not recognise the hash")
    a, rest = ap.parse_known_args()
    sys.path.insert(0, str(a.llamacpp))
    sys.path.insert(1, str(a.llamacpp / "gguf-py"))
    from conversion import base  # llama.cpp's converter package, next to convert_hf_to_gguf.py

    recognised = base.TextModel.get_vocab_base_pre

    def with_mapping(self, tokenizer):
        try:
            return recognised(self, tokenizer)
        except NotImplementedError:
            if a.pre is None:
                raise
            logging.getLogger("llamacpp_convert").warning("pre-tokenizer hash not recognised: written as %r", a.pre)
            return a.pre

    base.TextModel.get_vocab_base_pre = with_mapping
    import convert_hf_to_gguf

    sys.argv = ["convert_hf_to_gguf.py", *rest]
    convert_hf_to_gguf.main()


if __name__ == "__main__":
    main()
