"""A long prompt through a running server against transformers: bench/run.sh llamacpp's check that a package
imported with no length options takes a prompt of thousands of tokens (by chunks) and scores it as the
checkpoint's authors' implementation does.

    long_prompt_check.py HF_DIR URL MODEL [--tokens 2000] [--seed 7] [--tolerance 2e-3]

Sends a seeded prompt of --tokens random token ids to URL's /v1/completions with echo, logprobs 0 and
max_tokens 0 (the prompt scored, nothing generated: what evaluation harnesses send), and compares every
prompt token's log-probability with transformers' log_softmax of the checkpoint's logits (float32, CPU)
at the position before it. Prints one line with the largest and the mean difference; exits 1 when the
largest is over --tolerance, 2 when the server refused the prompt.

Run it with the torch venv's python (tools/torch-env.sh). Nothing here reaches a hub: HF_DIR is a folder.
"""
import argparse
import json
import sys
import urllib.error
import urllib.request

import torch
from transformers import AutoModelForCausalLM


def served_logprobs(url, model, ids):
    body = json.dumps({"model": model, "prompt": ids, "max_tokens": 0, "echo": True, "logprobs": 0}).encode()
    request = urllib.request.Request(url.rstrip("/") + "/v1/completions", body, {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=600) as response:
            answer = json.load(response)
    except urllib.error.HTTPError as e:
        print(f"long prompt: the server refused {len(ids)} tokens: HTTP {e.code} {e.read().decode(errors='replace')[:400]}")
        sys.exit(2)
    return answer["choices"][0]["logprobs"]["token_logprobs"]


def reference_logprobs(hf_dir, ids):
    model = AutoModelForCausalLM.from_pretrained(hf_dir, torch_dtype=torch.float32)
    model.eval()
    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits[0]
    logprobs = torch.log_softmax(logits.double(), dim=-1)
    # token i's log-probability is read at position i - 1; the first token has none (null on the wire)
    return [None] + [float(logprobs[i - 1, ids[i]]) for i in range(1, len(ids))]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("hf_dir")
    ap.add_argument("url")
    ap.add_argument("model")
    ap.add_argument("--tokens", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--tolerance", type=float, default=2e-3)
    a = ap.parse_args()
    config = json.load(open(f"{a.hf_dir}/config.json"))
    vocab = config["vocab_size"]
    generator = torch.Generator().manual_seed(a.seed)
    ids = torch.randint(0, vocab, (a.tokens,), generator=generator).tolist()
    ours = served_logprobs(a.url, a.model, ids)
    if len(ours) != len(ids) or ours[0] is not None:
        sys.exit(f"long prompt: expected {len(ids)} token_logprobs with a null first, got {len(ours)} (first {ours[:1]})")
    ref = reference_logprobs(a.hf_dir, ids)
    diffs = [abs(o - r) for o, r in zip(ours[1:], ref[1:])]
    worst = max(range(len(diffs)), key=diffs.__getitem__)
    print(f"long prompt: {len(ids)} tokens echoed with logprobs; |ours - transformers| over {len(diffs)} log-probabilities: "
          f"max {diffs[worst]:.3g} (position {worst + 1}), mean {sum(diffs) / len(diffs):.3g}; tolerance {a.tolerance:g}")
    if diffs[worst] > a.tolerance:
        print(f"long prompt: DIFFERS from transformers beyond {a.tolerance:g}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
