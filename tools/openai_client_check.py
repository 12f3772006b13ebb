"""Checks the OpenAI API of a live `bin/xla-actors serve` with the official client, openai-python.

    python tools/openai_client_check.py BASE_URL --completion-model M --chat-model C --embedding-model E

Runs in the venv of tools/openai-env.sh (cli's OpenAiClientsTest runs it against a serve of the tiny test
checkpoints). Each check asserts values, not just that a call returned: greedy streamed text equals the
whole response's, a stop string cuts the text where it first occurs, usage counts the tokens, a seed
replays, errors raise the client's exception classes. Prints one line per check and exits 0 when all
pass, 1 at the first failure (naming it).
"""
import argparse
import math
import sys

import openai


def check(name, condition, detail=""):
    if not condition:
        print(f"FAILED {name}: {detail}", flush=True)
        sys.exit(1)
    print(f"ok {name}", flush=True)


def stream_text(chunks, chat):
    texts, finish, usage, objects = {}, {}, None, set()
    for chunk in chunks:
        objects.add(chunk.object)
        if chunk.usage is not None:
            usage = chunk.usage
        for c in chunk.choices:
            piece = (c.delta.content or "") if chat else c.text
            texts[c.index] = texts.get(c.index, "") + piece
            if c.finish_reason is not None:
                finish[c.index] = c.finish_reason
    return texts, finish, usage, objects


def completions(client, model):
    greedy = client.completions.create(model=model, prompt="Hello world", max_tokens=8, temperature=0, n=2, logprobs=2)
    check("completions: n=2 choices", [c.index for c in greedy.choices] == [0, 1], greedy.choices)
    check("completions: greedy choices agree", greedy.choices[0].text == greedy.choices[1].text)
    check("completions: finish_reason length", all(c.finish_reason == "length" for c in greedy.choices))
    check("completions: usage", greedy.usage.completion_tokens == 16 and greedy.usage.prompt_tokens > 0
          and greedy.usage.total_tokens == greedy.usage.prompt_tokens + 16, greedy.usage)
    lp = greedy.choices[0].logprobs
    check("completions: logprobs of 8 tokens", len(lp.tokens) == 8 and len(lp.token_logprobs) == 8
          and all(x <= 0 for x in lp.token_logprobs) and all(1 <= len(t) <= 3 for t in lp.top_logprobs), lp)
    check("completions: greedy picks the most likely token",
          all(math.isclose(lp.token_logprobs[i], max(lp.top_logprobs[i].values()), abs_tol=1e-6) for i in range(8)))
    text = greedy.choices[0].text

    chunks = client.completions.create(model=model, prompt="Hello world", max_tokens=8, temperature=0, stream=True,
                                       stream_options={"include_usage": True})
    texts, finish, usage, objects = stream_text(chunks, chat=False)
    check("completions stream: same text as the whole response", texts.get(0) == text, (texts, text))
    check("completions stream: finish_reason and usage chunk", finish.get(0) == "length" and usage is not None
          and usage.completion_tokens == 8, (finish, usage))
    check("completions stream: chunk object", objects == {"text_completion"}, objects)

    # A stop string from the middle of the greedy text: the text ends just before its first occurrence.
    candidates = [text[i:i + 2] for i in range(1, len(text) - 2) if "\ufffd" not in text[i:i + 2] and text[i:i + 2].strip()]
    if candidates:
        stop = candidates[len(candidates) // 2]
        cut = client.completions.create(model=model, prompt="Hello world", max_tokens=8, temperature=0, stop=[stop])
        check(f"completions: stop {stop!r}", cut.choices[0].text == text[:text.index(stop)]
              and cut.choices[0].finish_reason == "stop", (cut.choices[0].text, text))
        streamed, finish, _, _ = stream_text(client.completions.create(model=model, prompt="Hello world", max_tokens=8,
                                                                       temperature=0, stop=stop, stream=True), chat=False)
        check("completions stream: stop", streamed.get(0) == text[:text.index(stop)] and finish.get(0) == "stop", streamed)

    echo = client.completions.create(model=model, prompt="Hello world", max_tokens=8, temperature=0, echo=True)
    check("completions: echo", echo.choices[0].text == "Hello world" + text, echo.choices[0].text)
    # echo with logprobs and max_tokens 0 scores the prompt (the score program); the most likely token after
    # [10, 20] must have the log-probability that greedy generation from [10, 20] (the decode programs) reports.
    scored = client.completions.create(model=model, prompt=[10, 20, 30], max_tokens=0, echo=True, logprobs=1)
    slp = scored.choices[0].logprobs
    check("completions: echo scores the prompt", len(slp.tokens) == 3 and slp.token_logprobs[0] is None
          and slp.top_logprobs[0] is None and all(x <= 0 for x in slp.token_logprobs[1:])
          and scored.usage.completion_tokens == 0 and scored.choices[0].finish_reason == "length", slp)
    step = client.completions.create(model=model, prompt=[10, 20], max_tokens=1, temperature=0, logprobs=1)
    check("completions: prompt scores agree with generation", math.isclose(max(slp.top_logprobs[2].values()),
          step.choices[0].logprobs.token_logprobs[0], abs_tol=1e-3), (slp.top_logprobs[2], step.choices[0].logprobs))
    ids = client.completions.create(model=model, prompt=[[10, 20], [30]], max_tokens=3, temperature=0)
    check("completions: token-id prompts", len(ids.choices) == 2 and ids.usage.prompt_tokens == 3, ids.usage)

    a = client.completions.create(model=model, prompt="Hello", max_tokens=8, temperature=1.0, seed=42)
    b = client.completions.create(model=model, prompt="Hello", max_tokens=8, temperature=1.0, seed=42)
    check("completions: a seed replays", a.choices[0].text == b.choices[0].text, (a.choices[0].text, b.choices[0].text))


def chat(client, model):
    messages = [{"role": "user", "content": "Hello!"}]  # the tiny models take prompts of at most 32 tokens
    whole = client.chat.completions.create(model=model, messages=messages, max_completion_tokens=6, temperature=0,
                                           logprobs=True, top_logprobs=2)
    c = whole.choices[0]
    check("chat: assistant message", c.message.role == "assistant" and isinstance(c.message.content, str), c.message)
    check("chat: finish_reason and usage", c.finish_reason == "length" and whole.usage.completion_tokens == 6, whole.usage)
    content = c.logprobs.content
    check("chat: logprobs with top_logprobs", len(content) == 6 and all(len(t.top_logprobs) == 2 and t.logprob <= 0
                                                                       and isinstance(t.bytes, list) for t in content), content)
    check("chat: object", whole.object == "chat.completion", whole.object)
    stream = client.chat.completions.create(model=model, messages=messages, max_tokens=6, temperature=0, stream=True,
                                            stream_options={"include_usage": True})
    texts, finish, usage, objects = stream_text(stream, chat=True)
    check("chat stream: same text as the whole response", texts.get(0) == c.message.content, (texts, c.message.content))
    check("chat stream: finish_reason, usage chunk, object", finish.get(0) == "length" and usage.completion_tokens == 6
          and objects == {"chat.completion.chunk"}, (finish, usage, objects))
    n = client.chat.completions.create(model=model, messages=messages, max_tokens=4, n=3, temperature=1.0, seed=1)
    check("chat: n=3", sorted(ch.index for ch in n.choices) == [0, 1, 2] and n.usage.completion_tokens == 12, n.usage)


def embeddings(client, model):
    default = client.embeddings.create(model=model, input=["hello world", "good morning"])  # the client asks for base64
    floats = client.embeddings.create(model=model, input=["hello world", "good morning"], encoding_format="float")
    check("embeddings: two vectors", len(default.data) == 2 and [d.index for d in default.data] == [0, 1])
    check("embeddings: base64 decodes to the floats", all(
        all(math.isclose(x, y, rel_tol=1e-6, abs_tol=1e-6) for x, y in zip(a.embedding, b.embedding))
        and len(a.embedding) == len(b.embedding) > 0 for a, b in zip(default.data, floats.data)))
    check("embeddings: usage", default.usage.prompt_tokens > 0 and default.usage.total_tokens == default.usage.prompt_tokens)


def vllm_extensions(client, completion_model, chat_model):
    """vLLM's fields as guidellm and lm-eval send them, through the client's extra_body and stream_options."""
    fixed = client.completions.create(model=completion_model, prompt="Hello", max_tokens=8, temperature=0,
                                      extra_body={"ignore_eos": True, "skip_special_tokens": True,
                                                  "add_special_tokens": True, "include_stop_str_in_output": False})
    check("extensions: ignore_eos runs to max_tokens", fixed.usage.completion_tokens == 8
          and fixed.choices[0].finish_reason == "length", fixed)
    stream = client.chat.completions.create(model=chat_model, messages=[{"role": "user", "content": "Hi"}], max_tokens=4,
                                            temperature=0, stream=True, extra_body={"ignore_eos": True},
                                            stream_options={"include_usage": True, "continuous_usage_stats": True})
    counts = [chunk.usage.completion_tokens for chunk in stream]
    check("extensions: continuous usage on every chunk", counts == sorted(counts) and counts[-1] == 4 and len(counts) >= 5,
          counts)


def errors(client, completion_model, chat_model):
    try:
        client.completions.create(model="no-such-model", prompt="x")
        check("errors: unknown model", False, "no error")
    except openai.NotFoundError as e:
        check("errors: unknown model -> NotFoundError", e.status_code == 404 and e.code == "model_not_found", e)
    try:
        client.completions.create(model=completion_model, prompt="x", suffix="y")
        check("errors: unsupported field", False, "no error")
    except openai.BadRequestError as e:
        check("errors: unsupported field -> BadRequestError naming it", e.param == "suffix", e)
    try:
        client.completions.create(model=completion_model, prompt="x", extra_body={"no_such_field": 1})
        check("errors: unknown field", False, "no error")
    except openai.BadRequestError as e:
        check("errors: unknown field -> BadRequestError naming it", e.param == "no_such_field", e)
    try:
        client.chat.completions.create(model=completion_model, messages=[{"role": "user", "content": "hi"}])
        check("errors: chat without a template", False, "no error")
    except openai.BadRequestError as e:
        check("errors: a model without a chat template -> BadRequestError", e.code == "no_chat_template", e)
    try:
        client.completions.create(model=completion_model, prompt="x", max_tokens=100000)
        check("errors: max_tokens beyond the context", False, "no error")
    except openai.BadRequestError as e:
        check("errors: max_tokens beyond the context -> BadRequestError", e.param == "max_tokens", e)


def structured(client, completion_model, chat_model):
    """response_format with a pydantic model (client.chat.completions.parse), json_object, a refused schema, and the
    logits processors of the sampling fields (logit_bias, min_tokens): the model has random weights, so only the
    constraint makes its answers parse."""
    import json
    from typing import Literal

    import pydantic

    class Person(pydantic.BaseModel):  # small: the tiny test packages have a context of 64 tokens
        name: str
        age: int
        kind: Literal["a", "b"]

    for seed in range(2):
        completion = client.chat.completions.parse(model=chat_model, messages=[{"role": "user", "content": "Who?"}],
                                                   response_format=Person, temperature=1, seed=seed)
        choice = completion.choices[0]
        check(f"structured: parse(response_format=Person) seed {seed} -> a Person",
              isinstance(choice.message.parsed, Person) and choice.finish_reason == "stop", choice.message.content)
        check(f"structured: seed {seed}'s content validates as a Person",
              Person.model_validate_json(choice.message.content) == choice.message.parsed, choice.message.content)
    any_object = client.chat.completions.create(model=chat_model, messages=[{"role": "user", "content": "JSON please"}],
                                                response_format={"type": "json_object"}, seed=1)
    check("structured: json_object -> a JSON object", isinstance(json.loads(any_object.choices[0].message.content), dict),
          any_object.choices[0].message.content)
    try:
        client.chat.completions.create(model=chat_model, messages=[{"role": "user", "content": "hi"}], response_format={
            "type": "json_schema", "json_schema": {"name": "id", "schema": {"type": "string", "pattern": "^a+$"}}})
        check("structured: a schema outside the subset", False, "no error")
    except openai.BadRequestError as e:
        check("structured: a schema outside the subset -> BadRequestError naming the keyword",
              e.param == "response_format" and "'pattern'" in str(e), e)
    biased = client.completions.create(model=completion_model, prompt="Hello", max_tokens=4, temperature=0, logprobs=0,
                                       logit_bias={"65": 100})
    check("sampling: logit_bias +100 -> that token every time", len(set(biased.choices[0].logprobs.tokens)) == 1
          and biased.usage.completion_tokens == 4, biased.choices[0].logprobs.tokens)
    ended = client.completions.create(model=completion_model, prompt="Hello", max_tokens=5, temperature=0, logit_bias={"0": 100})
    check("sampling: the end of text at +100 ends at once", ended.choices[0].text == "" and ended.choices[0].finish_reason == "stop",
          ended)
    held = client.completions.create(model=completion_model, prompt="Hello", max_tokens=5, temperature=0, logit_bias={"0": 100},
                                     extra_body={"min_tokens": 3})
    check("sampling: min_tokens 3 holds the end of text back", held.usage.completion_tokens == ended.usage.completion_tokens + 3
          and held.choices[0].finish_reason == "stop", held)


TOOLS = [
    {"type": "function", "function": {"name": "twice", "description": "Twice a number", "parameters": {
        "type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"], "additionalProperties": False}}},
    {"type": "function", "function": {"name": "light", "description": "Switch the light", "parameters": {
        "type": "object", "properties": {"on": {"type": "boolean"}}, "required": ["on"], "additionalProperties": False}}},
]


def valid_arguments(name, arguments):
    """Whether the JSON text arguments is valid for the parameters schema of tool name (jsonschema when the venv has it,
    else by hand: these schemas are objects of required integer or boolean properties, nothing else)."""
    import json
    schema = next(t["function"]["parameters"] for t in TOOLS if t["function"]["name"] == name)
    value = json.loads(arguments)
    try:
        import jsonschema
    except ImportError:
        kinds = {"integer": lambda v: isinstance(v, int) and not isinstance(v, bool), "boolean": lambda v: isinstance(v, bool)}
        return (isinstance(value, dict) and set(value) == set(schema["required"])
                and all(kinds[schema["properties"][k]["type"]](v) for k, v in value.items()))
    jsonschema.validate(value, schema)
    return True


def tool_calls(client, chat_model):
    """tools with tool_choice required, a named function, none and auto, whole and streamed, and a tool's result sent
    back: the model has random weights (and a context of 64 tokens), so only the constraint makes its calls valid."""
    user = [{"role": "user", "content": "hi"}]
    calls = {}
    for seed in range(1):
        r = client.chat.completions.create(model=chat_model, messages=user, tools=TOOLS, tool_choice="required", seed=seed,
                                           temperature=1)
        choice = r.choices[0]
        call = (choice.message.tool_calls or [None])[0]
        check(f"tools: required seed {seed} -> a call with valid arguments, finish_reason tool_calls",
              call is not None and call.type == "function" and call.id.startswith("call_") and choice.message.content is None
              and choice.finish_reason == "tool_calls" and valid_arguments(call.function.name, call.function.arguments),
              choice)
        calls[seed] = call
        chunks = list(client.chat.completions.create(model=chat_model, messages=user, tools=TOOLS, tool_choice="required",
                                                     seed=seed, temperature=1, stream=True))
        streamed, finish, ids = {}, None, set()
        for chunk in chunks:
            for c in chunk.choices:
                for d in c.delta.tool_calls or []:
                    entry = streamed.setdefault(d.index, {"name": "", "arguments": ""})
                    if d.id:
                        ids.add(d.id)
                    if d.function and d.function.name:
                        entry["name"] += d.function.name
                    if d.function and d.function.arguments:
                        entry["arguments"] += d.function.arguments
                finish = c.finish_reason or finish
        deltas = sum(1 for chunk in chunks for c in chunk.choices for d in (c.delta.tool_calls or []) if d.function.arguments)
        check(f"tools: required seed {seed} streamed -> the same call, its arguments in deltas",
              streamed == {0: {"name": call.function.name, "arguments": call.function.arguments}} and len(ids) == 1
              and finish == "tool_calls" and deltas > 1, (streamed, finish, deltas))
    named = client.chat.completions.create(model=chat_model, messages=user, tools=TOOLS, seed=3,
                                           tool_choice={"type": "function", "function": {"name": "light"}})
    call = named.choices[0].message.tool_calls[0]
    check("tools: a named function -> that function, valid arguments", call.function.name == "light"
          and valid_arguments("light", call.function.arguments), call)
    none = client.chat.completions.create(model=chat_model, messages=user, tools=TOOLS, tool_choice="none", max_tokens=4)
    check("tools: none -> words", none.choices[0].message.tool_calls is None and isinstance(none.choices[0].message.content, str)
          and none.choices[0].finish_reason in ("stop", "length"), none)
    kinds = set()
    for seed in range(3):
        auto = client.chat.completions.create(model=chat_model, messages=user, tools=TOOLS, seed=seed, temperature=1)
        m = auto.choices[0].message
        if m.tool_calls:
            ok = valid_arguments(m.tool_calls[0].function.name, m.tool_calls[0].function.arguments)
            ok = ok and auto.choices[0].finish_reason == "tool_calls"
            kinds.add("call")
        else:
            ok = isinstance(m.content, str) and auto.choices[0].finish_reason in ("stop", "length")
            kinds.add("words")
        check(f"tools: auto seed {seed} -> a valid call or words", ok, auto)
    print(f"   (auto answered with: {', '.join(sorted(kinds))})", flush=True)
    back = user + [{"role": "assistant", "content": None, "tool_calls": [calls[0].model_dump(include={"id", "type", "function"})]},
                   {"role": "tool", "tool_call_id": calls[0].id, "content": "1"}]
    answer = client.chat.completions.create(model=chat_model, messages=back, tools=TOOLS, tool_choice="none", max_tokens=2)
    check("tools: the call and the tool's result go back into the prompt", answer.usage.prompt_tokens
          > none.usage.prompt_tokens + 5, (answer.usage, none.usage))
    try:
        client.chat.completions.create(model=chat_model, messages=user, tools=[{"type": "function", "function": {
            "name": "f", "parameters": {"type": "object", "properties": {"s": {"type": "string", "format": "email"}}}}}],
            tool_choice="required")
        check("tools: a parameters schema outside the subset", False, "no error")
    except openai.BadRequestError as e:
        check("tools: a parameters schema outside the subset -> BadRequestError naming the tool and keyword",
              e.param == "tools[0].function.parameters" and "'format'" in str(e), e)
    try:
        client.chat.completions.create(model=chat_model, messages=user, functions=[TOOLS[0]["function"]])
        check("tools: the deprecated functions", False, "no error")
    except openai.BadRequestError as e:
        check("tools: the deprecated functions -> BadRequestError naming tools", e.param == "functions" and "tools" in str(e), e)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("base_url")
    parser.add_argument("--completion-model", required=True)
    parser.add_argument("--chat-model", required=True)
    parser.add_argument("--embedding-model", required=True)
    args = parser.parse_args()
    client = openai.OpenAI(base_url=args.base_url.rstrip("/") + "/v1", api_key="unused", max_retries=0, timeout=60)
    ids = [m.id for m in client.models.list()]
    check("models.list", {args.completion_model, args.chat_model, args.embedding_model} <= set(ids), ids)
    check("models.retrieve", client.models.retrieve(args.chat_model).id == args.chat_model)
    completions(client, args.completion_model)
    chat(client, args.chat_model)
    embeddings(client, args.embedding_model)
    vllm_extensions(client, args.completion_model, args.chat_model)
    errors(client, args.completion_model, args.chat_model)
    structured(client, args.completion_model, args.chat_model)
    tool_calls(client, args.chat_model)
    print(f"openai-python {openai.__version__}: all checks passed", flush=True)


if __name__ == "__main__":
    main()
