"""Makes the Hugging Face test fixtures: tiny randomly initialised checkpoints and what transformers computes.

Run once by a developer, with the venv of tools/torch-env.sh (CI never installs torch); the outputs are
committed under cli/src/test/resources/hf/:

    $(bash tools/torch-env.sh) tools/hf_reference.py [--out cli/src/test/resources/hf]

Each fixture directory holds what `save_pretrained` writes (config.json, model.safetensors or shards with
their index, generation_config.json where transformers writes one), a tokenizer trained here on a small
built-in corpus (tokenizer.json, tokenizer_config.json), and reference.json: transformers' own outputs on
fixed inputs, which tools/hf_check.py and the Java tests compare an imported package against.

Nothing is downloaded: the models are built from configs written below with random weights (a fixed seed),
and the tokenizers are trained with the `tokenizers` library. Weight scales are far larger than real
models' (initializer_range 0.3-0.5) so that greedy decoding of a random tiny model does not repeat one
token forever, and the greedy runs of the causal models are checked to have a clear winner at every step
(MIN_GREEDY_MARGIN: the greedy prompt is the first of a seeded series that has one) so that an importer computing in another precision picks the same tokens.
"""
import argparse
import collections
import json
import os
import pathlib
import shutil
import sys

os.environ["HF_HUB_OFFLINE"] = "1"  # before transformers is imported: nothing may come from a hub

import torch  # noqa: E402
import transformers  # noqa: E402
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers  # noqa: E402

VOCAB = 512
CONTEXT = 64
# The gap between the best and the second-best logit that every greedy step of a fixture must have: the
# importer computes in f32 where transformers may not (the bf16 fixture), and a closer race could flip.
MIN_GREEDY_MARGIN = {"float32": 0.05, "bfloat16": 0.25}

# The corpus the tokenizers are trained on: plain English, varied enough that byte-level BPE reaches
# VOCAB entries with real merges.
CORPUS = """\
The quick brown fox jumps over the lazy dog while the cat sleeps in the warm afternoon sun.
A model package holds compiled programs, weights, a tokenizer and the defaults of generation.
Every request names a model; the server looks it up in its catalog and answers with tokens.
Rain fell on the old stone bridge, and the river carried leaves toward the distant sea.
She opened the window, listened to the birds, and wrote three letters before breakfast.
Numbers like 42, 1024 and 3.14159 appear in tests, tables, logs and measurements.
Java runs on the virtual machine; Python drives the exporter; XLA compiles the programs.
Transformers attend to earlier tokens with keys and values kept in a cache for each sequence.
Small random models are useful fixtures because their weights fit in a few hundred kilobytes.
The library reads safetensors files, maps them into memory and uploads each tensor once.
When the tokenizer splits text into pieces, common words become single tokens and rare ones split.
Mountains, valleys, forests and lakes filled the map that hung on the wall of the classroom.
He asked whether the train would arrive on time, and the conductor smiled and nodded.
Greedy decoding picks the most likely next token at every step until enough tokens are made.
Embeddings turn sentences into vectors; similar sentences should end up close to each other.
On Monday the team reviewed the design, on Tuesday they built it, and on Friday they shipped it.
Hello world! How are you today? I am fine, thank you, and what about you, my friend?
Colors: red, orange, yellow, green, blue, indigo, violet; shapes: circle, square, triangle.
The committee agreed that the proposal was sound, but asked for clearer measurements first.
Bread, cheese, apples and tea were packed into the basket for the long walk in the hills.
"""

# The chat template of the Llama fixture: the usual messages/role/content shape. The tokenizer's
# post-processor adds <s> itself, so the template does not.
LLAMA_CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|' + message['role'] + '|>\\n' + message['content'] + eos_token + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|assistant|>\\n' }}{% endif %}"
)

# Qwen2's ChatML template (no BOS: Qwen2's tokenizer adds none).
QWEN2_CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)

PROMPT_TEXT = "The quick brown fox jumps over the lazy dog."
SCORE_IDS = [17, 301, 45, 260, 99, 402, 7, 311, 150, 488]  # the causal fixtures' scored sequence
GREEDY_PROMPT_TRIES = 64  # candidate greedy prompts per fixture, the first with clear margins is kept
EMBED_TEXTS = ["Embeddings turn sentences into vectors.", "Hello world!"]


def corpus_lines():
    return CORPUS.splitlines()


def byte_level_bpe(special, bos=None):
    """A byte-level BPE tokenizer (GPT-2's scheme) trained on the corpus; `special` take the first ids.
    With `bos`, the post-processor adds it in front of every sequence, as Llama 3's tokenizer.json does."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB, special_tokens=special, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(corpus_lines(), trainer)
    if bos is None:
        tok.post_processor = processors.ByteLevel(trim_offsets=False)
    else:
        bos_id = tok.token_to_id(bos)
        tok.post_processor = processors.TemplateProcessing(
            single=f"{bos} $A", pair=f"{bos} $A {bos} $B", special_tokens=[(bos, bos_id)])
    return tok


def wordpiece():
    """BERT's scheme: lower-cased WordPiece with [CLS] ... [SEP] added by the post-processor.

    The vocabulary is counted here rather than by tokenizers' WordPieceTrainer, whose result changes from
    run to run (it breaks ties in Rust hash-map order): every character, alone and as a "##" continuation,
    then the corpus' most frequent whole words and 2-4 letter continuations, frequency first then text."""
    special = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    words = collections.Counter()
    for line in corpus_lines():
        text = tok.normalizer.normalize_str(line)
        words.update(w for w, _ in tok.pre_tokenizer.pre_tokenize_str(text))
    chars = sorted({c for w in words for c in w})
    pieces = collections.Counter(words)
    for w, n in words.items():
        for i in range(1, len(w)):
            for j in range(i + 2, min(i + 4, len(w)) + 1):
                pieces["##" + w[i:j]] += n
    vocab = special + chars + ["##" + c for c in chars]
    ranked = sorted((t for t in pieces if t not in vocab), key=lambda t: (-pieces[t], t))
    vocab += ranked[: VOCAB - len(vocab)]
    tok.model = models.WordPiece({t: i for i, t in enumerate(vocab)}, unk_token="[UNK]")
    tok.decoder = decoders.WordPiece()
    tok.post_processor = processors.BertProcessing(("[SEP]", tok.token_to_id("[SEP]")),
                                                   ("[CLS]", tok.token_to_id("[CLS]")))
    return tok


def save_tokenizer(tok, out, **kwargs):
    fast = transformers.PreTrainedTokenizerFast(tokenizer_object=tok, model_max_length=CONTEXT, **kwargs)
    # save_jinja_files=False keeps the chat template inside tokenizer_config.json, the layout most
    # published checkpoints have (the importer reads a chat_template.jinja file too).
    fast.save_pretrained(out, save_jinja_files=False)
    return fast


def rounded(x):
    """Floats at ~7 significant digits: f32's precision, and small files."""
    if isinstance(x, list):
        return [rounded(v) for v in x]
    return float(f"{x:.7g}")


def greedy_by_hand(model, prompt, steps):
    """Argmax of a full forward pass per step: the greedy run generate() must agree with, and the margin
    of every step's choice."""
    ids = list(prompt)
    margins = []
    for _ in range(steps):
        logits = model(torch.tensor([ids])).logits[0, -1].float()
        top = torch.topk(logits, 2).values
        margins.append(float(top[0] - top[1]))
        ids.append(int(torch.argmax(logits)))
    return ids[len(prompt):], margins


def greedy_prompt(model, dtype_name):
    """The first of a fixed series of 6-token prompts whose 8 greedy steps each have a clear winner and
    do not just repeat a token, with its tokens and margins."""
    rng = torch.Generator().manual_seed(7)
    for _ in range(GREEDY_PROMPT_TRIES):
        prompt = torch.randint(3, VOCAB, (6,), generator=rng).tolist()
        tokens, margins = greedy_by_hand(model, prompt, 8)
        if min(margins) >= MIN_GREEDY_MARGIN[dtype_name] and len(set(tokens)) >= 4:
            return prompt, tokens, margins
    sys.exit(f"none of {GREEDY_PROMPT_TRIES} prompts has greedy margins of {MIN_GREEDY_MARGIN[dtype_name]} "
             "and varied tokens: change the model's seed or initializer_range")


def causal_reference(out, fast, dtype):
    """What transformers computes from the checkpoint saved in `out`, loaded back as a user would load it
    (from_pretrained, in the checkpoint's dtype: in bf16, the rotary frequencies stay f32 then, unlike a
    model converted with .to(bfloat16))."""
    model = transformers.AutoModelForCausalLM.from_pretrained(out, dtype=dtype).eval()
    dtype_name = str(dtype).removeprefix("torch.")
    with torch.no_grad():
        logits = model(torch.tensor([SCORE_IDS])).logits[0].float()
        if dtype != torch.float32:
            # The same weights computed in float32, what an importer that upcasts inside its programs must
            # match to f32 precision (the bf16 run's own logits differ by bf16's rounding of activations).
            upcast = transformers.AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32).eval()
            upcast = upcast(torch.tensor([SCORE_IDS])).logits[0]
        prompt, by_hand, margins = greedy_prompt(model, dtype_name)
        # generate() with no eos, so the 8 tokens do not stop early; a copy of the generation config, so
        # that what was saved keeps its eos.
        gen = model.generation_config.__class__.from_dict(model.generation_config.to_dict())
        gen.update(eos_token_id=None, pad_token_id=0, do_sample=False, max_new_tokens=8)
        out = model.generate(torch.tensor([prompt]), generation_config=gen,
                             attention_mask=torch.ones(1, len(prompt), dtype=torch.long))
        tokens = out[0, len(prompt):].tolist()
    if tokens != by_hand:
        sys.exit(f"generate() gave {tokens}, argmax by hand {by_hand}: a logits processor interfered")
    return {
        "dtype": dtype_name,
        "input_ids": SCORE_IDS,
        "logits": rounded(logits.tolist()),
        **({"logits_upcast_f32": rounded(upcast.tolist())} if dtype_name != "float32" else {}),
        "greedy_prompt": prompt,
        "greedy_tokens": tokens,
        "greedy_min_margin": rounded(min(margins)),
        "prompt_text": PROMPT_TEXT,
        "prompt_ids": fast(PROMPT_TEXT)["input_ids"],
    }


def bert_reference(out, fast):
    model = transformers.AutoModel.from_pretrained(out, dtype=torch.float32).eval()
    batch = fast(EMBED_TEXTS, padding=True, return_tensors="pt")
    with torch.no_grad():
        hidden = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).last_hidden_state
    mask = batch["attention_mask"].unsqueeze(-1).float()
    mean = (hidden * mask).sum(1) / mask.sum(1)
    return {
        "dtype": "float32",
        "texts": EMBED_TEXTS,
        "input_ids": batch["input_ids"].tolist(),
        "attention_mask": batch["attention_mask"].tolist(),
        "mean_embeddings": rounded(mean.tolist()),
        "cls_embeddings": rounded(hidden[:, 0].tolist()),
        "normalized_mean_embeddings": rounded(torch.nn.functional.normalize(mean, dim=-1).tolist()),
    }


def gpt2_config():
    return transformers.GPT2Config(
        vocab_size=VOCAB, n_positions=CONTEXT, n_embd=64, n_layer=2, n_head=4, initializer_range=0.3,
        bos_token_id=0, eos_token_id=0, tie_word_embeddings=True)


def llama_config(rope_parameters):
    return transformers.LlamaConfig(
        vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=CONTEXT, rms_norm_eps=1e-6, initializer_range=0.3,
        tie_word_embeddings=False, rope_parameters=rope_parameters, bos_token_id=1, eos_token_id=2)


def qwen2_config():
    return transformers.Qwen2Config(
        vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=CONTEXT, rms_norm_eps=1e-6, initializer_range=0.3,
        tie_word_embeddings=True, rope_parameters={"rope_type": "default", "rope_theta": 1000000.0},
        bos_token_id=None, eos_token_id=2)


def bert_config():
    return transformers.BertConfig(
        vocab_size=VOCAB, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
        max_position_embeddings=CONTEXT, initializer_range=0.5, pad_token_id=0)


def write_reference(out, ref):
    (out / "reference.json").write_text(json.dumps(ref, separators=(",", ":")) + "\n")
    size = sum(f.stat().st_size for f in out.iterdir())
    print(f"{out.name}: {sorted(f.name for f in out.iterdir())}, {size:,} bytes", file=sys.stderr)


def fresh(out):
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    return out


def make_all(root):
    gpt2_tok = byte_level_bpe(["<|endoftext|>"])
    llama_tok = byte_level_bpe(["<unk>", "<s>", "</s>"], bos="<s>")
    qwen2_tok = byte_level_bpe(["<|endoftext|>", "<|im_start|>", "<|im_end|>"])
    bert_tok = wordpiece()
    for tok, name in [(gpt2_tok, "gpt2"), (llama_tok, "llama"), (qwen2_tok, "qwen2"), (bert_tok, "bert")]:
        if tok.get_vocab_size() > VOCAB:
            sys.exit(f"the {name} tokenizer has {tok.get_vocab_size()} entries, over the model's {VOCAB}")

    gpt2_kwargs = dict(bos_token="<|endoftext|>", eos_token="<|endoftext|>", unk_token="<|endoftext|>")
    torch.manual_seed(0)
    gpt2 = transformers.GPT2LMHeadModel(gpt2_config())
    for name, save_kwargs in [("gpt2", {}), ("gpt2-sharded", {"max_shard_size": "200KB"})]:
        out = fresh(root / name)
        fast = save_tokenizer(gpt2_tok, out, **gpt2_kwargs)
        gpt2.save_pretrained(out, **save_kwargs)
        write_reference(out, causal_reference(out, fast, torch.float32))

    llama_kwargs = dict(bos_token="<s>", eos_token="</s>", unk_token="<unk>", chat_template=LLAMA_CHAT_TEMPLATE)
    # llama3 scaling with a short original context and a low low_freq_factor, so that with head_dim 16 the
    # fixture's frequencies fall in all three of its bands (wavelength 6.3 kept; 20 and 63 smoothed; the
    # rest divided by the factor).
    torch.manual_seed(1)
    llama = transformers.LlamaForCausalLM(llama_config({
        "rope_type": "llama3", "rope_theta": 10000.0, "factor": 8.0, "low_freq_factor": 0.5,
        "high_freq_factor": 4.0, "original_max_position_embeddings": 32}))
    out = fresh(root / "llama")
    fast = save_tokenizer(llama_tok, out, **llama_kwargs)
    llama.save_pretrained(out)
    write_reference(out, causal_reference(out, fast, torch.float32))

    torch.manual_seed(2)
    llama_bf16 = transformers.LlamaForCausalLM(llama_config(
        {"rope_type": "linear", "rope_theta": 10000.0, "factor": 2.0})).to(torch.bfloat16)
    out = fresh(root / "llama-bf16")
    fast = save_tokenizer(llama_tok, out, **llama_kwargs)
    llama_bf16.save_pretrained(out)
    write_reference(out, causal_reference(out, fast, torch.bfloat16))

    torch.manual_seed(4)
    qwen2 = transformers.Qwen2ForCausalLM(qwen2_config())
    with torch.no_grad():  # transformers initialises biases to 0, which would leave them untested
        for name, p in qwen2.named_parameters():
            if name.endswith("_proj.bias"):
                p.normal_(0.0, 0.3)
    out = fresh(root / "qwen2")
    fast = transformers.PreTrainedTokenizerFast(
        tokenizer_object=qwen2_tok, model_max_length=CONTEXT, eos_token="<|im_end|>", pad_token="<|endoftext|>",
        chat_template=QWEN2_CHAT_TEMPLATE)
    fast.save_pretrained(out)  # transformers 5's default layout: the chat template in chat_template.jinja
    qwen2.save_pretrained(out)
    write_reference(out, causal_reference(out, fast, torch.float32))

    torch.manual_seed(3)
    bert = transformers.BertModel(bert_config())
    out = fresh(root / "bert")
    fast = save_tokenizer(bert_tok, out, unk_token="[UNK]", sep_token="[SEP]", pad_token="[PAD]",
                          cls_token="[CLS]", mask_token="[MASK]")
    bert.save_pretrained(out)
    write_reference(out, bert_reference(out, fast))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=pathlib.Path, default=pathlib.Path("cli/src/test/resources/hf"))
    a = ap.parse_args()
    torch.use_deterministic_algorithms(True)
    make_all(a.out)


if __name__ == "__main__":
    main()
