"""Makes the two checkpoints bench/run.sh llamacpp measures on both sides: Hugging Face directories as
`save_pretrained` writes them, with random weights (seeded) and a tokenizer built here, nothing from a hub.

    $(bash tools/torch-env.sh) tools/llamacpp_checkpoints.py --tiktoken R50K_BASE.tiktoken --out DIR gpt2|llama

- gpt2: GPT-2 124 M (GPT2Config's defaults: 12 layers, 768 wide, 12 heads, 1,024 positions, 50,257 tokens,
  tied head), config.json with `n_ctx` (llama.cpp's converter reads it), GPT-2's own tokenizer rebuilt from
  `r50k_base.tiktoken` (the ranks JTokkit bundles): vocab.json, merges.txt and tokenizer.json.
- llama: SmolLM2-135M's shape (hidden 576, 30 layers, 9 heads, 3 KV heads, intermediate 1,536, 49,152
  tokens, tied embeddings, 4,096 positions, rope_theta 100,000), a byte-level BPE tokenizer made of the
  first 49,151 ranks of r50k_base (a prefix of a BPE's merges is a BPE) plus <|endoftext|> as the last id.
  Its pre-tokenizer is GPT-2's, but the converter identifies pre-tokenizers by a hash of how a test text
  tokenizes, which a smaller vocabulary changes: tools/llamacpp_convert.py maps it to "gpt-2".

Also writes greedy.json: a prompt (token ids, the first of a seeded series whose greedy steps all have a
clear winner and not one repeated token), transformers' 16 greedy tokens after it and the smallest gap
between the best and the second-best logit on the way, which bench/run.sh llamacpp compares both servers
against: a gap that small is a tie that f32 rounding in another order may break the other way.
"""
import argparse
import base64
import json
import os
import pathlib
import shutil
import sys

os.environ["HF_HUB_OFFLINE"] = "1"  # before transformers is imported: nothing may come from a hub

import torch  # noqa: E402
import transformers  # noqa: E402
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors  # noqa: E402

EOT = "<|endoftext|>"
GREEDY_STEPS = 16
GREEDY_PROMPT_LENGTH = 8
GREEDY_PROMPT_TRIES = 16
# The best logit's lead over the second in every greedy step of the chosen prompt. Both servers compute in
# f32 (llama.cpp's F32 GGUF, our f32 programs) with sums in different orders: differences of ~1e-4 at most.
MIN_GREEDY_MARGIN = 0.01


def bytes_to_unicode():
    """GPT-2's map from bytes to printable characters (vocab.json holds tokens in these characters)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, (chr(c) for c in cs)))


def read_tiktoken(path):
    ranks = {}
    for line in pathlib.Path(path).read_text().splitlines():
        if line:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    return ranks


def merge_of(ranks, token, rank):
    """The two tokens whose merge makes `token`: byte-pair encoding of its bytes with only the merges ranked
    below it ends in exactly two parts (tiktoken keeps no merge list; its ranks are the merges' order)."""
    parts = [bytes([b]) for b in token]
    while len(parts) > 2:
        best = None
        for i in range(len(parts) - 1):
            r = ranks.get(parts[i] + parts[i + 1])
            if r is not None and r < rank and (best is None or r < best[1]):
                best = (i, r)
        if best is None:
            break
        i = best[0]
        parts = parts[:i] + [parts[i] + parts[i + 1]] + parts[i + 2:]
    if len(parts) != 2:
        sys.exit(f"token {token!r} (rank {rank}) is not a merge of two lower-ranked tokens: not a BPE rank file")
    return parts


def gpt2_tokenizer(ranks, size):
    """GPT-2's byte-level BPE over the `size` lowest ranks, <|endoftext|> as id `size`: (vocab, merges, tokenizer)."""
    enc = bytes_to_unicode()
    text = lambda b: "".join(enc[x] for x in b)  # noqa: E731
    ordered = sorted((r, t) for t, r in ranks.items() if r < size)
    vocab = {text(t): r for r, t in ordered}
    merges = [tuple(text(p) for p in merge_of(ranks, t, r)) for r, t in ordered if len(t) > 1]
    vocab[EOT] = size
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    tok.add_special_tokens([EOT])
    return vocab, merges, tok


def save_tokenizer(out, vocab, merges, tok, context):
    (out / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False))
    (out / "merges.txt").write_text("#version: 0.2\n" + "".join(f"{a} {b}\n" for a, b in merges))
    fast = transformers.PreTrainedTokenizerFast(tokenizer_object=tok, model_max_length=context, bos_token=EOT,
                                                eos_token=EOT, unk_token=EOT)
    fast.save_pretrained(out)
    # No BOS in front of prompts on either side: GPT-2 has none, and the greedy prompt is token ids as they are.
    config = json.loads((out / "tokenizer_config.json").read_text())
    config.update(add_bos_token=False, add_prefix_space=False)
    (out / "tokenizer_config.json").write_text(json.dumps(config, indent=2) + "\n")


def greedy(model, prompt):
    ids = list(prompt)
    margins = []
    with torch.no_grad():
        for _ in range(GREEDY_STEPS):
            logits = model(torch.tensor([ids])).logits[0, -1].float()
            top = torch.topk(logits, 2).values
            margins.append(float(top[0] - top[1]))
            ids.append(int(torch.argmax(logits)))
    return ids[len(prompt):], margins


def greedy_reference(model, vocab):
    rng = torch.Generator().manual_seed(11)
    best = None
    for _ in range(GREEDY_PROMPT_TRIES):
        prompt = torch.randint(256, vocab - 1, (GREEDY_PROMPT_LENGTH,), generator=rng).tolist()
        tokens, margins = greedy(model, prompt)
        if best is None or min(margins) > best[2]:
            best = (prompt, tokens, min(margins))
        if min(margins) >= MIN_GREEDY_MARGIN and len(set(tokens)) >= 4:
            return {"prompt": prompt, "tokens": tokens, "min_margin": min(margins), "clear": True}
    # Kept, and said: the bench then tells a disagreement at a near-tie from one at a clear winner.
    return {"prompt": best[0], "tokens": best[1], "min_margin": best[2], "clear": False}


def make(kind, tiktoken, out):
    torch.manual_seed(0)
    ranks = read_tiktoken(tiktoken)
    if kind == "gpt2":
        config = transformers.GPT2Config(bos_token_id=50256, eos_token_id=50256)
        model = transformers.GPT2LMHeadModel(config)
        size, context = 50256, config.n_positions
    else:
        config = transformers.LlamaConfig(
            vocab_size=49152, hidden_size=576, intermediate_size=1536, num_hidden_layers=30, num_attention_heads=9,
            num_key_value_heads=3, max_position_embeddings=4096, rms_norm_eps=1e-5, tie_word_embeddings=True,
            rope_parameters={"rope_type": "default", "rope_theta": 100000.0}, bos_token_id=49151,
            eos_token_id=49151)
        model = transformers.LlamaForCausalLM(config)
        size, context = 49151, config.max_position_embeddings
    model = model.eval()
    partial = out.with_name(out.name + ".partial")
    if partial.exists():
        shutil.rmtree(partial)
    partial.mkdir(parents=True)
    model.save_pretrained(partial)
    if kind == "gpt2":
        cfg = json.loads((partial / "config.json").read_text())
        cfg["n_ctx"] = cfg["n_positions"]  # llama.cpp's GPT-2 converter reads n_ctx, which transformers 5 omits
        (partial / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")
    vocab, merges, tok = gpt2_tokenizer(ranks, size)
    save_tokenizer(partial, vocab, merges, tok, context)
    ref = greedy_reference(model, config.vocab_size)
    (partial / "greedy.json").write_text(json.dumps(ref) + "\n")
    print(f"{kind}: greedy prompt {ref['prompt']} -> {ref['tokens']}, smallest margin {ref['min_margin']:.4g}",
          file=sys.stderr)
    if out.exists():
        shutil.rmtree(out)
    os.replace(partial, out)
    print(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("kind", choices=["gpt2", "llama"])
    ap.add_argument("--tiktoken", required=True, type=pathlib.Path, help="r50k_base.tiktoken (JTokkit's jar has it)")
    ap.add_argument("--out", required=True, type=pathlib.Path)
    a = ap.parse_args()
    make(a.kind, a.tiktoken, a.out)


if __name__ == "__main__":
    main()
