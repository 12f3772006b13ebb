#!/usr/bin/env python3
"""Makes the expected prompts of http's ChatTemplateReferenceTest with Hugging Face transformers: for the
verbatim chat templates of several model families (fetched by tools/chat-templates.sh; never committed) and a
Llama-2-style template written here, the text and the token ids that apply_chat_template(...,
add_generation_prompt=True) gives for a few conversations (system prompts, several turns, "{{"/"{%" in the
content, non-ASCII), and for Qwen2.5's template apply_chat_template(..., tools=...) of conversations with tools, a call
and its results.

The tokenizers are made here, small, and committed beside the expected ids (nothing is downloaded from a model
hub): a byte-level BPE (GPT-2/Llama 3/Qwen style) and a SentencePiece-style BPE with byte fallback (Llama 2/
Gemma style: "▁" for spaces, <0xNN> pieces for bytes outside the vocabulary), each with its family's special
tokens added as a checkpoint has them.

    python "$(tools/chat-template-env.sh)" tools/chat_template_reference.py [OUT_DIR]

OUT_DIR defaults to http/src/test/resources/chat-templates: reference.json and <family>/tokenizer.json.
Re-run it only when a template, a conversation or the pinned transformers changes (tools/chat-template-env.sh).
"""
import datetime
import hashlib
import json
import pathlib
import subprocess
import sys
from unittest import mock

import tokenizers
import transformers
from tokenizers import decoders, models, normalizers, pre_tokenizers, processors, trainers

ROOT = pathlib.Path(__file__).resolve().parent.parent
# The date strftime_now gives (Llama 3's templates date their system prompt): the Java test fixes its clock to it.
NOW = datetime.datetime(2024, 7, 26, 10, 0, 0)

# A template in the style of Llama 2 Chat's (our own words for its well-known format): BOS before each [INST],
# the system prompt inside the first one, EOS after each answer.
LLAMA2_STYLE = (
    "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}"
    "{% set system_message = messages[0]['content'] %}{% else %}{% set loop_messages = messages %}"
    "{% set system_message = false %}{% endif %}"
    "{% for message in loop_messages %}"
    "{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
    "{% if loop.index0 == 0 and system_message != false %}"
    "{% set content = '<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' + message['content'] %}"
    "{% else %}{% set content = message['content'] %}{% endif %}"
    "{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}"
    "{% elif message['role'] == 'assistant' %}{{ ' ' + content.strip() + ' ' + eos_token }}{% endif %}"
    "{% endfor %}"
)

# family: (template file in the llama.cpp set, or None for LLAMA2_STYLE), base tokenizer, special tokens
# (tokenizer_config.json's names), further added special tokens.
FAMILIES = {
    "qwen2.5": ("Qwen-Qwen2.5-7B-Instruct", "byte-level",
                {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"}, ["<|im_start|>"]),
    "qwen3": ("Qwen-Qwen3-0.6B", "byte-level",
              {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"}, ["<|im_start|>", "<think>", "</think>"]),
    "smollm3": ("HuggingFaceTB-SmolLM3-3B", "byte-level",
                {"bos_token": "<|im_start|>", "eos_token": "<|im_end|>", "pad_token": "<|im_end|>"}, []),
    "mistral-nemo": ("mistralai-Mistral-Nemo-Instruct-2407", "byte-level",
                     {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"},
                     ["[INST]", "[/INST]", "[AVAILABLE_TOOLS]", "[/AVAILABLE_TOOLS]", "[TOOL_RESULTS]", "[/TOOL_RESULTS]",
                      "[TOOL_CALLS]"]),
    "phi-3.5": ("microsoft-Phi-3.5-mini-instruct", "sentencepiece",
                {"bos_token": "<s>", "eos_token": "<|endoftext|>", "unk_token": "<unk>", "pad_token": "<|endoftext|>"},
                ["<|system|>", "<|user|>", "<|assistant|>", "<|end|>"]),
    "gemma-2": ("google-gemma-2-2b-it", "sentencepiece",
                {"bos_token": "<bos>", "eos_token": "<eos>", "unk_token": "<unk>", "pad_token": "<pad>"},
                ["<start_of_turn>", "<end_of_turn>"]),
    "llama-3.1": ("meta-llama-Llama-3.1-8B-Instruct", "byte-level",
                  {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"},
                  ["<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eom_id|>", "<|python_tag|>"]),
    "llama-3.2": ("meta-llama-Llama-3.2-3B-Instruct", "byte-level",
                  {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"},
                  ["<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eom_id|>", "<|python_tag|>"]),
    "llama-2-style": (None, "sentencepiece", {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"}, []),
}

CONVERSATIONS = [
    [{"role": "user", "content": "Hello!"}],
    [{"role": "system", "content": "You are a helpful assistant."},
     {"role": "user", "content": "What is 2+2?"},
     {"role": "assistant", "content": "4."},
     {"role": "user", "content": "How do I write {{ name }} or {{ 7*7 }}? And {% for x in range(3) %}{{ x }}{% endfor %}"}],
    [{"role": "user", "content": "Ünïcödé: naïve café, 日本語, emoji 🎉🤖"},
     {"role": "assistant", "content": "Ça va? 👍 Ελληνικά"},
     {"role": "user", "content": "{% raw %}{{ raw }}{% endraw %} and {# comment #} end"}],
    # Reasoning in the answers (Qwen3's template keeps it only after the last question) and a last answer.
    [{"role": "user", "content": "Think first: 2+2?"},
     {"role": "assistant", "content": "<think>\ntwo and two\n</think>\n\n4."},
     {"role": "user", "content": "And 3+3?"},
     {"role": "assistant", "content": "<think>three and three</think>6."}],
]

# Tools as transformers' apply_chat_template(tools=...) takes them (OpenAI's request shape), and conversations with a
# call and its results (arguments as objects, as vLLM passes them to templates): rendered by the families in
# TOOL_FAMILIES only (templates that know tools; the others ignore or refuse them).
TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "description": "The weather of a city",
                                      "parameters": {"type": "object", "properties": {
                                          "city": {"type": "string", "description": "Its name"},
                                          "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
                                          "required": ["city"]}}},
    {"type": "function", "function": {"name": "add", "description": "Ünïcödé sum of two numbers",
                                      "parameters": {"type": "object", "properties": {"a": {"type": "number"},
                                                                                      "b": {"type": "number"}},
                                                     "required": ["a", "b"]}}},
]
TOOL_CONVERSATIONS = [
    [{"role": "user", "content": "What is the weather in Paris?"}],
    [{"role": "system", "content": "You are a helpful assistant."},
     {"role": "user", "content": "Weather in Paris, and 2.5 plus 3?"},
     {"role": "assistant", "content": None, "tool_calls": [
         {"id": "call_1", "type": "function", "function": {"name": "get_weather",
                                                          "arguments": {"city": "Paris", "unit": "celsius"}}},
         {"id": "call_2", "type": "function", "function": {"name": "add", "arguments": {"a": 2.5, "b": 3}}}]},
     {"role": "tool", "tool_call_id": "call_1", "content": "22 degrees, sunny"},
     {"role": "tool", "tool_call_id": "call_2", "content": "5.5"}],
]
TOOL_FAMILIES = {"qwen2.5"}

CORPUS = [
    "You are a helpful assistant. What is two plus two? The answer is four.",
    "system user assistant tool message content role the a an of to in is it that for on with as",
    "Hello! How do I write a name or a number? And for x in range, print x. end of text.",
    "Cutting Knowledge Date: December 2023. Today Date: 26 Jul 2024. Environment: ipython.",
    "Metadata Reasoning Mode think no_think Custom Instructions You are a helpful AI assistant named SmolLM.",
    "{{ }} {% %} {# #} [ ] ( ) < > | / \\ : ; , . ? ! ' \" - _ = + * & ^ % $ # @ ~ ` 0 1 2 3 4 5 6 7 8 9",
]


def byte_level(specials):
    tok = tokenizers.Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=600, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  special_tokens=specials, show_progress=False)
    tok.train_from_iterator(CORPUS * 4, trainer=trainer)
    return tok


def sentencepiece(specials, bos):
    # Learn pieces on the normalized corpus, then rebuild the model as Llama 2's tokenizer.json holds it:
    # <unk> <s> </s> first, the 256 byte pieces <0x00>..<0xFF> next (in the vocabulary, not added tokens),
    # then the pieces; bytes outside the vocabulary fall back to their byte pieces.
    learner = tokenizers.Tokenizer(models.BPE(unk_token="<unk>"))
    learner.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    learner.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="never", split=True)
    alphabet = [chr(c) for c in range(0x21, 0x7F)] + ["▁"]
    trainer = trainers.BpeTrainer(vocab_size=500, initial_alphabet=alphabet, limit_alphabet=len(alphabet),
                                  special_tokens=["<unk>"], show_progress=False)
    learner.train_from_iterator(CORPUS * 4, trainer=trainer)
    learned = json.loads(learner.to_str())["model"]
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
    for b in range(256):
        vocab[f"<0x{b:02X}>"] = len(vocab)
    for piece, _ in sorted(learned["vocab"].items(), key=lambda e: e[1]):
        if piece not in vocab:
            vocab[piece] = len(vocab)
    merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in learned["merges"]]
    tok = tokenizers.Tokenizer(models.BPE(vocab=vocab, merges=merges, unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    tok.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(),
                                     decoders.Strip(" ", 1, 0)])
    tok.add_special_tokens(specials)
    if bos is not None:
        tok.post_processor = processors.TemplateProcessing(single=f"{bos} $A", pair=f"{bos} $A {bos} $B",
                                                           special_tokens=[(bos, tok.token_to_id(bos))])
    return tok


def sha256(text):
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def main():
    out = pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "http/src/test/resources/chat-templates"
    templates_dir = pathlib.Path(subprocess.check_output(["bash", str(ROOT / "tools/chat-templates.sh")], text=True)
                                 .strip().splitlines()[-1])
    families = []
    for name, (file, base, named, extra) in FAMILIES.items():
        template = LLAMA2_STYLE if file is None else (templates_dir / f"{file}.jinja").read_text(encoding="utf-8")
        specials = list(dict.fromkeys(list(named.values()) + extra))
        tok = byte_level(specials) if base == "byte-level" else sentencepiece(specials, named.get("bos_token"))
        fast = transformers.PreTrainedTokenizerFast(tokenizer_object=tok, **named)
        fast.chat_template = template
        (out / name).mkdir(parents=True, exist_ok=True)
        tok.save(str(out / name / "tokenizer.json"))
        conversations = []
        cases = [(m, None) for m in CONVERSATIONS] + [(m, TOOLS) for m in TOOL_CONVERSATIONS if name in TOOL_FAMILIES]
        for messages, tools in cases:
            entry = {"messages": messages}
            if tools is not None:
                entry["tools"] = tools
            try:
                with mock.patch("transformers.utils.chat_template_utils.datetime") as clock:
                    clock.now.return_value = NOW
                    text = fast.apply_chat_template(messages, tools=tools, add_generation_prompt=True, tokenize=False)
                    ids = fast.apply_chat_template(messages, tools=tools, add_generation_prompt=True, tokenize=True)
                if isinstance(ids, dict) or hasattr(ids, "keys"):
                    ids = ids["input_ids"]
                entry["text"] = text
                entry["ids"] = list(ids)
            except Exception as e:  # a template that refuses the conversation (raise_exception): the Java side must too
                entry["error"] = str(e)
            conversations.append(entry)
        families.append({"family": name, "template": file, "template_sha256": sha256(template), "tokenizer": base,
                         "special_tokens": named, "conversations": conversations})
        print(f"{name}: " + ", ".join(str(len(c["ids"])) if "ids" in c else "refused" for c in conversations))
    reference = {
        "made_by": f"tools/chat_template_reference.py (transformers {transformers.__version__}, "
                   f"tokenizers {tokenizers.__version__})",
        "templates": "tools/chat-templates.sh (llama-cpp-python 0.3.36's vendor/llama.cpp/models/templates)",
        "now": NOW.isoformat(),
        "llama2_style_template": LLAMA2_STYLE,
        "families": families,
    }
    (out / "reference.json").write_text(json.dumps(reference, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
