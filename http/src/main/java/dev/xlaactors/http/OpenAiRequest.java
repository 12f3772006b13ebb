package dev.xlaactors.http;

import com.fasterxml.jackson.databind.JsonNode;
import dev.xlaactors.lm.sampling.LogitBias;
import dev.xlaactors.lm.sampling.MinTokens;
import dev.xlaactors.lm.sampling.OccurrencePenalty;
import dev.xlaactors.lm.sampling.SamplingParams;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * The request bodies of the OpenAI API, parsed and checked before anything reaches a model: each field's
 * type and range, and every field known. A field this server does not implement (audio, ...) is refused naming it, so a
 * client never silently gets less than it asked for; a field given as JSON {@code null} counts as absent (clients write unset options that way). The
 * limits that depend on a model (vocabulary, context) are checked by {@link OpenAiRoutes}.
 */
final class OpenAiRequest {
  /** The most choices one request asks for ({@code n}, times the prompts of a completion). */
  static final int MAX_CHOICES = 16;
  /** The most stop strings (OpenAI's limit is 4; vLLM takes more). */
  static final int MAX_STOPS = 16;
  /** The most inputs of one embeddings request (OpenAI's limit). */
  static final int MAX_INPUTS = 2048;

  private static final Set<String> SAMPLING = Set.of("model", "max_tokens", "temperature", "top_p", "top_k", "min_p", "seed", "stop",
      "n", "stream", "stream_options", "user", "repetition_penalty", "ignore_eos", "add_special_tokens", "skip_special_tokens",
      "include_stop_str_in_output", "logit_bias", "presence_penalty", "frequency_penalty", "min_tokens");
  private static final Set<String> COMPLETION = union(SAMPLING, Set.of("prompt", "logprobs", "echo", "response_format"));
  private static final Set<String> CHAT = union(SAMPLING, Set.of("messages", "max_completion_tokens", "logprobs", "top_logprobs",
      "response_format", "tools", "tool_choice", "parallel_tool_calls"));
  private static final Set<String> STREAM_OPTIONS = Set.of("include_usage", "continuous_usage_stats");
  private static final Set<String> EMBEDDINGS = Set.of("model", "input", "encoding_format", "dimensions", "user");
  /** Fields of OpenAI's API this server knows but does not implement, with why. */
  private static final Map<String, String> NOT_IMPLEMENTED = Map.ofEntries(
      Map.entry("tools", "tool calls are a chat completions option (POST /v1/chat/completions)"),
      Map.entry("tool_choice", "tool calls are a chat completions option (POST /v1/chat/completions)"),
      Map.entry("parallel_tool_calls", "tool calls are a chat completions option (POST /v1/chat/completions)"),
      Map.entry("functions", "OpenAI deprecated it for tools: send \"tools\": [{\"type\": \"function\", \"function\": {\"name\", "
          + "\"description\", \"parameters\"}}]"),
      Map.entry("function_call", "OpenAI deprecated it for tool_choice: send \"tool_choice\": \"none\" | \"auto\" | \"required\" | "
          + "{\"type\": \"function\", \"function\": {\"name\": ...}}"),
      Map.entry("best_of", "use n and pick among the choices"),
      Map.entry("suffix", "no insertion (fill-in-the-middle)"),
      Map.entry("audio", "text only"),
      Map.entry("modalities", "text only"),
      Map.entry("prediction", "no predicted outputs"),
      Map.entry("reasoning_effort", "not a reasoning model"),
      Map.entry("service_tier", "one tier"),
      Map.entry("store", "nothing is stored"),
      Map.entry("metadata", "nothing is stored"),
      Map.entry("web_search_options", "no web search"));

  private OpenAiRequest() {}

  /** A prompt: text (tokenized by the model) or token ids. */
  record Prompt(String text, int[] tokens) {}

  /**
   * What a request says about sampling; null where it says nothing (the model's defaults apply).
   *
   * @param maxTokens {@code max_tokens} (or chat's {@code max_completion_tokens})
   * @param stop the stop strings, matched on the text across token boundaries (empty: none)
   */
  record Sampling(Integer maxTokens, Double temperature, Double topP, Integer topK, Double minP, Long seed, List<String> stop,
      Double repetitionPenalty, int n, Map<Integer, Float> logitBias, double presencePenalty, double frequencyPenalty, int minTokens) {

    /**
     * {@code defaults} (the model's) with what the request sets; {@code choice} offsets the seed so that the n choices differ.
     * {@code logit_bias}, the presence and frequency penalties and {@code min_tokens} become the sampler's logits processors
     * ({@link LogitBias}, {@link OccurrencePenalty}, {@link MinTokens} of every stop token the sequence ends at), in that order.
     */
    SamplingParams over(SamplingParams defaults, int maxTokens, int logprobs, int choice) {
      SamplingParams p = defaults.withMaxTokens(maxTokens).withLogprobs(logprobs).withStopStrings(stop);
      if (!logitBias.isEmpty()) {
        p = p.withProcessor(new LogitBias(logitBias));
      }
      if (presencePenalty != 0 || frequencyPenalty != 0) {
        p = p.withProcessor(new OccurrencePenalty(presencePenalty, frequencyPenalty));
      }
      if (minTokens > 0) {
        p = p.withProcessor(new MinTokens(minTokens)); // the sequence's final stops: a chat adds its template's end of turn later
      }
      if (temperature != null) { // as vLLM, a temperature too small to divide by is the smallest one
        p = p.withTemperature(temperature == 0 ? 0 : Math.max(temperature, SamplingParams.MIN_TEMPERATURE));
      }
      if (topP != null) {
        p = p.withTopP(topP);
      }
      if (topK != null) {
        p = p.withTopK(topK);
      }
      if (minP != null) {
        p = p.withMinP(minP);
      }
      if (repetitionPenalty != null) {
        p = p.withRepetitionPenalty(repetitionPenalty);
      }
      if (seed != null) {
        p = p.withSeed(seed + choice);
      }
      return p;
    }
  }

  /**
   * How a request wants its answer streamed: not at all, or as server-sent events with or without a usage
   * chunk at the end ({@code includeUsage}) and the usage so far on every chunk ({@code continuousUsage},
   * vLLM's {@code stream_options.continuous_usage_stats}).
   */
  record Streaming(boolean stream, boolean includeUsage, boolean continuousUsage) {}

  /**
   * vLLM's extensions of a completion or chat request, which its clients (guidellm, lm-eval) send:
   * {@code ignore_eos} (generate past the end-of-sequence tokens, for load tests of a fixed length),
   * {@code add_special_tokens} (null: the endpoint's default, true for a completion's prompt text, false for
   * a chat, whose template writes them), {@code skip_special_tokens} (leave special tokens out of the text,
   * default true) and {@code include_stop_str_in_output} (the text ends with the stop string that ended it).
   */
  record Extensions(boolean ignoreEos, Boolean addSpecialTokens, boolean skipSpecialTokens, boolean includeStopString) {
    /** What no extension says: vLLM's defaults. */
    static final Extensions NONE = new Extensions(false, null, true, false);

    /** {@code params} with the model's end-of-sequence stop tokens dropped when {@code ignore_eos} says so. */
    SamplingParams apply(SamplingParams params) {
      return ignoreEos ? params.withStopTokenIds(java.util.Set.of()) : params;
    }
  }

  /**
   * {@code POST /v1/completions}: {@code logprobs} null (none) or how many top tokens (0: the drawn token's
   * only); with {@code echo} the prompt's text (and, with logprobs, its tokens' log-probabilities) comes
   * first, and {@code max_tokens} may be 0 (the prompt scored, nothing generated); {@code responseFormat} null
   * for text, else as a chat's (vLLM takes {@code response_format} on completions too).
   */
  record Completion(String model, List<Prompt> prompts, Sampling sampling, Integer logprobs, boolean echo, Streaming streaming,
      Extensions extensions, ResponseFormat responseFormat) {}

  /**
   * A chat message: its role, its text (text parts joined; null only for an assistant's message of tool calls
   * without text), the tool calls of an assistant's message (empty: none) and, for a {@code tool} message, the
   * id of the call it answers (null otherwise).
   */
  record Message(String role, String content, List<ToolCall> toolCalls, String toolCallId) {
    /** A message of text only. */
    Message(String role, String content) {
      this(role, content, List.of(), null);
    }
  }

  /**
   * A tool call: its id, the function's name and its arguments (a JSON text, as OpenAI sends them; any text is taken:
   * a call cut short by max_tokens, sent back, is not JSON).
   */
  record ToolCall(String id, String name, String arguments) {}

  /**
   * A function the model may call ({@code tools[i].function}): its name, description (null: none) and the JSON
   * schema of its arguments ({@code parameters}; null: none given, no arguments), {@code strict} (null: not given) and
   * {@code definition}, the request's {@code tools[i]} as sent (what the chat template gets).
   */
  record Tool(String name, String description, JsonNode parameters, Boolean strict, JsonNode definition) {}

  /**
   * A chat's {@code tools} and {@code tool_choice}: {@code choice} is {@code none}, {@code auto}, {@code required} or
   * {@code function} (then {@code function} names the one to call); {@code parallel} is {@code parallel_tool_calls}
   * (accepted; an answer holds at most one call).
   */
  record Tools(List<Tool> functions, String choice, String function, boolean parallel) {
    /** Whether the answer may be a call. */
    boolean mayCall() {
      return !choice.equals("none");
    }
  }

  /**
   * {@code POST /v1/chat/completions}: {@code logprobs} whether to report them, {@code topLogprobs} how many alternatives,
   * {@code responseFormat} null for text, {@code tools} null when the request has none.
   */
  record Chat(String model, List<Message> messages, Sampling sampling, boolean logprobs, int topLogprobs, Streaming streaming,
      Extensions extensions, ResponseFormat responseFormat, Tools tools) {}

  /**
   * A chat's or a completion's {@code response_format} other than text: {@code schema} null for {@code json_object} (any JSON object),
   * else the JSON schema's text of {@code json_schema} (its {@code name} is for the client; {@code strict} or not, the
   * output always follows the schema: a schema the grammar cannot follow is refused either way).
   */
  record ResponseFormat(String schema, String name) {}

  /** {@code POST /v1/embeddings}: the inputs, {@code base64} for little-endian float32 bytes, {@code dimensions} null unless asked. */
  record Embeddings(String model, List<Prompt> inputs, boolean base64, Integer dimensions) {}

  /**
   * vLLM's {@code POST /tokenize}: {@code model} null when not named (the one language model served),
   * the prompt's text and whether the tokenizer adds its special tokens (default true, as vLLM).
   */
  record Tokenize(String model, String prompt, boolean addSpecialTokens) {}

  /** vLLM's {@code POST /detokenize}: {@code model} null when not named, the token ids. */
  record Detokenize(String model, int[] tokens) {}

  // ------------------------------------------------------------------------------------------ parsing

  static Tokenize tokenize(JsonNode root) {
    fields(root, Set.of("model", "prompt", "add_special_tokens"));
    JsonNode prompt = present(root, "prompt");
    if (prompt == null || !prompt.isTextual()) {
      throw OpenAiError.invalid("prompt", "'prompt' is required: the text to tokenize, got " + (prompt == null ? "none"
          : TensorJson.kind(prompt)));
    }
    return new Tokenize(optionalModel(root), prompt.asText(), bool(root, "add_special_tokens", true));
  }

  static Detokenize detokenize(JsonNode root) {
    fields(root, Set.of("model", "tokens"));
    JsonNode tokens = present(root, "tokens");
    if (tokens == null || !tokens.isArray()) {
      throw OpenAiError.invalid("tokens", "'tokens' is required: a list of token ids, got " + (tokens == null ? "none"
          : TensorJson.kind(tokens)));
    }
    return new Detokenize(optionalModel(root), ids(tokens, "tokens"));
  }

  private static String optionalModel(JsonNode root) {
    return present(root, "model") == null ? null : model(root);
  }

  static Completion completion(JsonNode root) {
    fields(root, COMPLETION);
    String model = model(root);
    JsonNode p = present(root, "prompt");
    if (p == null) {
      throw OpenAiError.invalid("prompt", "'prompt' is required: a string, a list of strings, a list of token ids or a list of lists of them");
    }
    List<Prompt> prompts = prompts(p, "prompt");
    boolean echo = bool(root, "echo", false);
    Sampling sampling = sampling(root, "max_tokens", echo ? 0 : 1); // max_tokens 0 with echo: score the prompt only
    if (prompts.size() * sampling.n() > MAX_CHOICES) {
      throw OpenAiError.invalid("n", "at most " + MAX_CHOICES + " choices per request (prompts times n), got " + prompts.size() + " x "
          + sampling.n());
    }
    Integer logprobs = null;
    if (present(root, "logprobs") != null) {
      logprobs = (int) whole(root, "logprobs", 0, 0, SamplingParams.MAX_LOGPROBS);
    }
    return new Completion(model, prompts, sampling, logprobs, echo, streaming(root), extensions(root), responseFormat(root));
  }

  static Chat chat(JsonNode root) {
    fields(root, CHAT);
    String model = model(root);
    if (present(root, "max_tokens") != null && present(root, "max_completion_tokens") != null) {
      throw OpenAiError.invalid("max_completion_tokens", "give max_completion_tokens or max_tokens (its older name), not both");
    }
    Sampling sampling = sampling(root, present(root, "max_completion_tokens") != null ? "max_completion_tokens" : "max_tokens", 1);
    if (sampling.n() > MAX_CHOICES) {
      throw OpenAiError.invalid("n", "at most " + MAX_CHOICES + " choices per request, got " + sampling.n());
    }
    JsonNode m = present(root, "messages");
    if (m == null || !m.isArray() || m.isEmpty()) {
      throw OpenAiError.invalid("messages", "'messages' is required: a non-empty list of {\"role\", \"content\"}, got "
          + (m == null ? "none" : TensorJson.kind(m)));
    }
    List<Message> messages = new ArrayList<>();
    for (int i = 0; i < m.size(); i++) {
      messages.add(message(m.get(i), "messages[" + i + "]"));
    }
    boolean logprobs = bool(root, "logprobs", false);
    int top = (int) whole(root, "top_logprobs", 0, 0, SamplingParams.MAX_LOGPROBS);
    if (top > 0 && !logprobs) {
      throw OpenAiError.invalid("top_logprobs", "top_logprobs needs \"logprobs\": true");
    }
    return new Chat(model, List.copyOf(messages), sampling, logprobs, top, streaming(root), extensions(root), responseFormat(root),
        tools(root));
  }

  static Embeddings embeddings(JsonNode root) {
    fields(root, EMBEDDINGS);
    String model = model(root);
    JsonNode in = present(root, "input");
    if (in == null) {
      throw OpenAiError.invalid("input", "'input' is required: a string, a list of strings, a list of token ids or a list of lists of them");
    }
    List<Prompt> inputs = prompts(in, "input");
    if (inputs.size() > MAX_INPUTS) {
      throw OpenAiError.invalid("input", "at most " + MAX_INPUTS + " inputs per request, got " + inputs.size());
    }
    string(root, "user", null); // accepted without effect, as OpenAI defines it: a string
    String format = string(root, "encoding_format", "float");
    if (!format.equals("float") && !format.equals("base64")) {
      throw OpenAiError.invalid("encoding_format", "expected \"float\" or \"base64\", got \"" + format + "\"");
    }
    Integer dimensions = present(root, "dimensions") == null ? null : (int) whole(root, "dimensions", 0, 1, 1 << 20);
    return new Embeddings(model, inputs, format.equals("base64"), dimensions);
  }

  // ------------------------------------------------------------------------------------------ fields

  /** Refuses a field not in {@code known}: one OpenAI defines but this server lacks says why, any other is unknown. */
  private static void fields(JsonNode root, Set<String> known) {
    for (Iterator<Map.Entry<String, JsonNode>> it = root.fields(); it.hasNext(); ) {
      Map.Entry<String, JsonNode> f = it.next();
      if (known.contains(f.getKey()) || f.getValue().isNull()) {
        continue;
      }
      String why = NOT_IMPLEMENTED.get(f.getKey());
      if (why != null) {
        throw OpenAiError.unsupported(f.getKey(), why);
      }
      throw new OpenAiError(400, OpenAiError.INVALID_REQUEST, f.getKey(), "unknown_parameter", "unknown field '" + f.getKey()
          + "'; this endpoint takes " + String.join(", ", known.stream().sorted().toList()));
    }
  }

  /** The field {@code name}, or null when absent or JSON null. */
  private static JsonNode present(JsonNode root, String name) {
    JsonNode n = root.get(name);
    return n == null || n.isNull() ? null : n;
  }

  private static String model(JsonNode root) {
    JsonNode n = present(root, "model");
    if (n == null || !n.isTextual() || n.asText().isEmpty()) {
      throw OpenAiError.invalid("model", "'model' is required: the name of a served model (GET /v1/models lists them)");
    }
    return n.asText();
  }

  private static Sampling sampling(JsonNode root, String maxTokensField, int minTokens) {
    string(root, "user", null); // accepted without effect, as OpenAI defines it: a string
    Integer maxTokens = present(root, maxTokensField) == null ? null : (int) whole(root, maxTokensField, 0, minTokens, Integer.MAX_VALUE);
    Double temperature = number(root, "temperature", 0, 2, "0 (greedy) to 2");
    Double topP = number(root, "top_p", Double.MIN_VALUE, 1, "above 0, at most 1");
    Integer topK = null;
    JsonNode k = present(root, "top_k");
    if (k != null) {
      long v = whole(root, "top_k", 0, -1, Integer.MAX_VALUE);
      topK = v == -1 ? 0 : (int) v; // vLLM's -1 and 0 both mean no cut
    }
    Double minP = number(root, "min_p", 0, 1, "0 to 1");
    Long seed = present(root, "seed") == null ? null : whole(root, "seed", 0, Long.MIN_VALUE, Long.MAX_VALUE);
    Double penalty = number(root, "repetition_penalty", Double.MIN_VALUE, 100, "above 0 (1: none)");
    int n = (int) whole(root, "n", 1, 1, MAX_CHOICES);
    Double presence = number(root, "presence_penalty", -2, 2, "from -2 to 2 (0: none)");
    Double frequency = number(root, "frequency_penalty", -2, 2, "from -2 to 2 (0: none)");
    int leastTokens = (int) whole(root, "min_tokens", 0, 0, Integer.MAX_VALUE);
    if (maxTokens != null && leastTokens > maxTokens) {
      throw OpenAiError.invalid("min_tokens", "min_tokens " + leastTokens + " is above " + maxTokensField + " " + maxTokens
          + ": ask for at most as many as the most");
    }
    return new Sampling(maxTokens, temperature, topP, topK, minP, seed, stops(root), penalty, n, logitBias(root),
        presence == null ? 0 : presence, frequency == null ? 0 : frequency, leastTokens);
  }

  /** OpenAI's {@code logit_bias}: token ids (as the object's keys, strings) to biases from -100 to 100; ids checked against the model later. */
  private static Map<Integer, Float> logitBias(JsonNode root) {
    JsonNode b = present(root, "logit_bias");
    if (b == null) {
      return Map.of();
    }
    if (!b.isObject()) {
      throw OpenAiError.invalid("logit_bias", "expected an object of token id to bias, such as {\"50256\": -100}, got " + TensorJson.kind(b));
    }
    Map<Integer, Float> bias = new java.util.TreeMap<>();
    for (Iterator<Map.Entry<String, JsonNode>> it = b.fields(); it.hasNext(); ) {
      Map.Entry<String, JsonNode> e = it.next();
      int id;
      try {
        id = Integer.parseInt(e.getKey());
      } catch (NumberFormatException x) {
        id = -1;
      }
      if (id < 0) {
        throw OpenAiError.invalid("logit_bias", "keys are token ids (whole numbers >= 0 written as strings), got \"" + e.getKey() + "\"");
      }
      JsonNode v = e.getValue();
      if (!v.isNumber() || !(v.asDouble() >= -LogitBias.MAX_BIAS && v.asDouble() <= LogitBias.MAX_BIAS)) {
        throw OpenAiError.invalid("logit_bias", "the bias of token " + id + " is " + v + ": expected a number from -100 to 100");
      }
      bias.put(id, (float) v.asDouble());
    }
    return bias;
  }

  /** {@code response_format}: null for {@code text}; {@code json_object}; {@code json_schema} with its {@code schema}. */
  private static ResponseFormat responseFormat(JsonNode root) {
    JsonNode f = present(root, "response_format");
    if (f == null) {
      return null;
    }
    if (!f.isObject() || !f.path("type").isTextual()) {
      throw OpenAiError.invalid("response_format", "expected {\"type\": \"text\" | \"json_object\" | \"json_schema\", ...}, got "
          + TensorJson.kind(f));
    }
    String type = f.get("type").asText();
    // json_schema is checked wherever it is given (the document states its shape whatever the type); only type
    // json_schema uses it.
    JsonNode js = f.get("json_schema"); // null too is refused: the document has no null there
    JsonNode schema = js == null ? null : jsonSchema(js);
    switch (type) {
      case "text":
        return null;
      case "json_object":
        return new ResponseFormat(null, null);
      case "json_schema":
        if (js == null) {
          throw OpenAiError.invalid("response_format", "type json_schema needs \"json_schema\": {\"name\", \"schema\", \"strict\"}");
        }
        return new ResponseFormat(schema.toString(), js.path("name").asText(""));
      default:
        throw OpenAiError.invalid("response_format", "type is \"text\", \"json_object\" or \"json_schema\", got \"" + type + "\"");
    }
  }

  /** The schema of {@code response_format.json_schema}, checked: its fields, their types, the schema an object. */
  private static JsonNode jsonSchema(JsonNode js) {
    if (!js.isObject()) {
      throw OpenAiError.invalid("response_format", "json_schema is {\"name\", \"description\", \"schema\", \"strict\"}, got " + TensorJson.kind(js));
    }
    for (Iterator<String> it = js.fieldNames(); it.hasNext(); ) {
      String name = it.next();
      if (!Set.of("name", "schema", "strict", "description").contains(name)) {
        throw OpenAiError.invalid("response_format", "unknown field json_schema." + name + ": it takes name, description, schema and strict");
      }
    }
    for (String text : List.of("name", "description")) {
      if (js.has(text) && !js.get(text).isTextual()) {
        throw OpenAiError.invalid("response_format", "json_schema." + text + " is a string, got " + TensorJson.kind(js.get(text)));
      }
    }
    JsonNode schema = present(js, "schema");
    if (schema == null || !schema.isObject()) {
      throw OpenAiError.invalid("response_format", "json_schema.schema is required: the JSON schema (an object) the answer follows");
    }
    if (present(js, "strict") != null && !js.get("strict").isBoolean()) {
      throw OpenAiError.invalid("response_format", "json_schema.strict is true or false, got " + js.get("strict"));
    }
    return schema;
  }

  private static List<String> stops(JsonNode root) {
    JsonNode s = present(root, "stop");
    if (s == null) {
      return List.of();
    }
    List<String> stops = new ArrayList<>();
    if (s.isTextual()) {
      stops.add(s.asText());
    } else if (s.isArray()) {
      for (JsonNode e : s) {
        if (!e.isTextual()) {
          throw OpenAiError.invalid("stop", "expected a string or a list of strings, got a list holding " + TensorJson.kind(e));
        }
        stops.add(e.asText());
      }
    } else {
      throw OpenAiError.invalid("stop", "expected a string or a list of strings, got " + TensorJson.kind(s));
    }
    if (stops.size() > MAX_STOPS) {
      throw OpenAiError.invalid("stop", "at most " + MAX_STOPS + " stop strings, got " + stops.size());
    }
    if (stops.stream().anyMatch(String::isEmpty)) {
      throw OpenAiError.invalid("stop", "a stop string must not be empty");
    }
    return List.copyOf(stops);
  }

  private static Extensions extensions(JsonNode root) {
    JsonNode add = present(root, "add_special_tokens");
    return new Extensions(bool(root, "ignore_eos", false), add == null ? null : bool(root, "add_special_tokens", true),
        bool(root, "skip_special_tokens", true), bool(root, "include_stop_str_in_output", false));
  }

  private static Streaming streaming(JsonNode root) {
    boolean stream = bool(root, "stream", false);
    JsonNode options = present(root, "stream_options");
    boolean usage = false;
    boolean continuous = false;
    if (options != null) {
      if (!stream) {
        throw OpenAiError.invalid("stream_options", "stream_options is only allowed with \"stream\": true");
      }
      if (!options.isObject()) {
        throw OpenAiError.invalid("stream_options", "expected an object such as {\"include_usage\": true}, got " + TensorJson.kind(options));
      }
      for (Iterator<String> it = options.fieldNames(); it.hasNext(); ) {
        String name = it.next();
        if (!STREAM_OPTIONS.contains(name) && !options.get(name).isNull()) {
          throw OpenAiError.unsupported("stream_options." + name, "the stream options are include_usage and continuous_usage_stats");
        }
      }
      usage = bool(options, "include_usage", false);
      continuous = bool(options, "continuous_usage_stats", false);
    }
    return new Streaming(stream, usage, continuous);
  }

  /** A string, a list of strings, a list of token ids or a list of lists of token ids (ids checked against the model later). */
  private static List<Prompt> prompts(JsonNode p, String field) {
    if (p.isTextual()) {
      return List.of(new Prompt(p.asText(), null));
    }
    if (!p.isArray() || p.isEmpty()) {
      throw OpenAiError.invalid(field, "expected a string, a list of strings, a list of token ids or a list of lists of them, got "
          + (p.isArray() ? "an empty list" : TensorJson.kind(p)));
    }
    if (p.get(0).isIntegralNumber()) {
      return List.of(new Prompt(null, ids(p, field)));
    }
    List<Prompt> prompts = new ArrayList<>();
    for (int i = 0; i < p.size(); i++) {
      JsonNode e = p.get(i);
      if (e.isTextual()) {
        prompts.add(new Prompt(e.asText(), null));
      } else if (e.isArray() && !e.isEmpty()) {
        prompts.add(new Prompt(null, ids(e, field + "[" + i + "]")));
      } else {
        throw OpenAiError.invalid(field + "[" + i + "]", "expected a string or a non-empty list of token ids, got "
            + (e.isArray() ? "an empty list" : TensorJson.kind(e)));
      }
    }
    return List.copyOf(prompts);
  }

  private static int[] ids(JsonNode list, String field) {
    int[] ids = new int[list.size()];
    for (int i = 0; i < ids.length; i++) {
      JsonNode t = list.get(i);
      if (!t.isIntegralNumber() || !t.canConvertToInt() || t.asInt() < 0) {
        throw OpenAiError.invalid(field + "[" + i + "]", "expected a token id (a whole number >= 0), got " + t);
      }
      ids[i] = t.asInt();
    }
    return ids;
  }

  private static Message message(JsonNode m, String path) {
    if (!m.isObject()) {
      throw OpenAiError.invalid(path, "expected a message {\"role\", \"content\"}, got " + TensorJson.kind(m));
    }
    for (Iterator<String> it = m.fieldNames(); it.hasNext(); ) {
      String name = it.next();
      if (!Set.of("role", "content", "name", "tool_calls", "tool_call_id").contains(name) && !m.get(name).isNull()) {
        throw OpenAiError.unsupported(path + "." + name, "messages hold role, content, name, tool_calls (an assistant's) and "
            + "tool_call_id (a tool's); no function_call (send tool_calls) or audio");
      }
    }
    JsonNode role = present(m, "role");
    if (role != null && role.isTextual() && role.asText().equals("function")) {
      throw OpenAiError.unsupported(path + ".role", "role \"function\" is OpenAI's deprecated form: send {\"role\": \"tool\", "
          + "\"tool_call_id\", \"content\"}");
    }
    if (role == null || !role.isTextual() || !Set.of("system", "developer", "user", "assistant", "tool").contains(role.asText())) {
      throw OpenAiError.invalid(path + ".role", "expected \"system\", \"developer\", \"user\", \"assistant\" or \"tool\", got "
          + role);
    }
    JsonNode name = present(m, "name");
    if (name != null && !name.isTextual()) { // taken without effect, as vLLM; but a string, as OpenAI defines it
      throw OpenAiError.invalid(path + ".name", "expected a string, got " + TensorJson.kind(name));
    }
    List<ToolCall> calls = toolCalls(m, path, role.asText());
    String callId = null;
    if (role.asText().equals("tool")) {
      JsonNode id = present(m, "tool_call_id");
      if (id == null || !id.isTextual()) {
        throw OpenAiError.invalid(path + ".tool_call_id", "a tool message names the call it answers: \"tool_call_id\", the id of an "
            + "assistant's tool call, got " + (id == null ? "none" : TensorJson.kind(id)));
      }
      callId = id.asText();
    } else if (present(m, "tool_call_id") != null) {
      throw OpenAiError.invalid(path + ".tool_call_id", "only a message of role \"tool\" answers a call; this one's role is "
          + role.asText());
    }
    JsonNode content = present(m, "content");
    String text;
    if (content == null) {
      text = calls.isEmpty() ? "" : null; // as clients send an assistant's calls without text: the template sees None
    } else if (content.isTextual()) {
      text = content.asText();
    } else if (content.isArray()) {
      StringBuilder b = new StringBuilder();
      for (int i = 0; i < content.size(); i++) {
        JsonNode part = content.get(i);
        String type = part.path("type").asText();
        if (!type.equals("text") || !part.path("text").isTextual()) {
          throw OpenAiError.unsupported(path + ".content[" + i + "]", "content parts are {\"type\": \"text\", \"text\": ...} only "
              + "(a text model), got type \"" + type + "\"");
        }
        if (b.length() > 0) {
          b.append('\n'); // as vLLM joins text parts
        }
        b.append(part.get("text").asText());
      }
      text = b.toString();
    } else {
      throw OpenAiError.invalid(path + ".content", "expected a string or a list of text parts, got " + TensorJson.kind(content));
    }
    return new Message(role.asText(), text, calls, callId);
  }

  /** An assistant message's {@code tool_calls}: each {@code {id, type: "function", function: {name, arguments}}}. */
  private static List<ToolCall> toolCalls(JsonNode m, String path, String role) {
    JsonNode list = present(m, "tool_calls");
    if (list == null) {
      return List.of();
    }
    if (!role.equals("assistant")) {
      throw OpenAiError.invalid(path + ".tool_calls", "only an assistant's message holds tool calls; this one's role is " + role);
    }
    if (!list.isArray()) {
      throw OpenAiError.invalid(path + ".tool_calls", "expected a list of {\"id\", \"type\": \"function\", \"function\": {\"name\", "
          + "\"arguments\"}}, got " + TensorJson.kind(list));
    }
    List<ToolCall> calls = new ArrayList<>();
    for (int i = 0; i < list.size(); i++) {
      String at = path + ".tool_calls[" + i + "]";
      JsonNode c = list.get(i);
      JsonNode f = c.path("function");
      if (!c.path("id").isTextual() || !f.path("name").isTextual() || !f.path("arguments").isTextual()
          || !c.path("type").asText("function").equals("function")) {
        throw OpenAiError.invalid(at, "expected {\"id\": string, \"type\": \"function\", \"function\": {\"name\": string, "
            + "\"arguments\": a JSON text}}, got " + abbreviated(c.toString()));
      }
      calls.add(new ToolCall(c.get("id").asText(), f.get("name").asText(), f.get("arguments").asText()));
    }
    return List.copyOf(calls);
  }

  private static String abbreviated(String s) {
    return s.length() <= 80 ? s : s.substring(0, 77) + "...";
  }

  /** The most tools of one request (OpenAI's limit). */
  static final int MAX_TOOLS = 128;
  private static final java.util.regex.Pattern FUNCTION_NAME = java.util.regex.Pattern.compile("[A-Za-z0-9_-]{1,64}");

  /** {@code tools}, {@code tool_choice} and {@code parallel_tool_calls}; null when there are no tools. */
  private static Tools tools(JsonNode root) {
    JsonNode list = present(root, "tools");
    JsonNode choice = present(root, "tool_choice");
    boolean parallel = bool(root, "parallel_tool_calls", true);
    if (list == null) {
      if (choice != null && !(choice.isTextual() && choice.asText().equals("none"))) {
        throw OpenAiError.invalid("tool_choice", "tool_choice needs \"tools\": the functions the model may call");
      }
      return null;
    }
    if (!list.isArray() || list.isEmpty() || list.size() > MAX_TOOLS) {
      throw OpenAiError.invalid("tools", "expected a list of 1 to " + MAX_TOOLS + " {\"type\": \"function\", \"function\": {\"name\", "
          + "\"description\", \"parameters\"}}, got " + (list.isArray() ? list.size() + " entries" : TensorJson.kind(list)));
    }
    List<Tool> tools = new ArrayList<>();
    Set<String> names = new java.util.HashSet<>();
    for (int i = 0; i < list.size(); i++) {
      String at = "tools[" + i + "]";
      JsonNode t = list.get(i);
      if (!t.isObject() || !t.path("type").asText().equals("function") || !t.path("function").isObject()) {
        throw OpenAiError.invalid(at, "expected {\"type\": \"function\", \"function\": {\"name\", \"description\", \"parameters\"}} "
            + "(functions are the only tools), got " + abbreviated(t.toString()));
      }
      JsonNode f = t.get("function");
      for (Iterator<String> it = f.fieldNames(); it.hasNext(); ) {
        String name = it.next();
        if (!Set.of("name", "description", "parameters", "strict").contains(name)) {
          throw OpenAiError.invalid(at + ".function." + name, "unknown field; a function has name, description, parameters and strict");
        }
      }
      String name = f.path("name").asText("");
      if (!f.path("name").isTextual() || !FUNCTION_NAME.matcher(name).matches()) {
        throw OpenAiError.invalid(at + ".function.name", "expected 1 to 64 of a-z, A-Z, 0-9, _ and - (OpenAI's rule), got "
            + f.path("name"));
      }
      if (!names.add(name)) {
        throw OpenAiError.invalid(at + ".function.name", "two tools are named \"" + name + "\": names are unique");
      }
      JsonNode description = present(f, "description");
      if (description != null && !description.isTextual()) {
        throw OpenAiError.invalid(at + ".function.description", "expected a string, got " + TensorJson.kind(description));
      }
      JsonNode parameters = present(f, "parameters");
      if (parameters != null && !parameters.isObject()) {
        throw OpenAiError.invalid(at + ".function.parameters", "expected the JSON schema (an object) of the arguments, got "
            + TensorJson.kind(parameters));
      }
      JsonNode strict = present(f, "strict");
      if (strict != null && !strict.isBoolean()) {
        throw OpenAiError.invalid(at + ".function.strict", "expected true or false, got " + strict);
      }
      tools.add(new Tool(name, description == null ? null : description.asText(), parameters, strict == null ? null : strict.asBoolean(), t));
    }
    String mode = "auto";
    String function = null;
    if (choice != null) {
      if (choice.isTextual() && Set.of("none", "auto", "required").contains(choice.asText())) {
        mode = choice.asText();
      } else if (choice.isObject() && choice.path("type").asText().equals("function") && choice.path("function").path("name").isTextual()) {
        mode = "function";
        function = choice.get("function").get("name").asText();
        if (!names.contains(function)) {
          throw OpenAiError.invalid("tool_choice", "names function \"" + function + "\", which is not in tools (" + String.join(", ",
              tools.stream().map(Tool::name).toList()) + ")");
        }
      } else {
        throw OpenAiError.invalid("tool_choice", "expected \"none\", \"auto\", \"required\" or {\"type\": \"function\", \"function\": "
            + "{\"name\": ...}}, got " + abbreviated(choice.toString()));
      }
    }
    return new Tools(List.copyOf(tools), mode, function, parallel);
  }

  private static boolean bool(JsonNode root, String name, boolean dflt) {
    JsonNode n = present(root, name);
    if (n == null) {
      return dflt;
    }
    if (!n.isBoolean()) {
      throw OpenAiError.invalid(name, "expected true or false, got " + n);
    }
    return n.asBoolean();
  }

  private static String string(JsonNode root, String name, String dflt) {
    JsonNode n = present(root, name);
    if (n == null) {
      return dflt;
    }
    if (!n.isTextual()) {
      throw OpenAiError.invalid(name, "expected a string, got " + TensorJson.kind(n));
    }
    return n.asText();
  }

  private static long whole(JsonNode root, String name, long dflt, long min, long max) {
    JsonNode n = present(root, name);
    if (n == null) {
      return dflt;
    }
    if (!n.isIntegralNumber() || !n.canConvertToLong() || n.asLong() < min || n.asLong() > max) {
      throw OpenAiError.invalid(name, "expected a whole number from " + min + " to " + max + ", got " + n);
    }
    return n.asLong();
  }

  private static Double number(JsonNode root, String name, double min, double max, String range) {
    JsonNode n = present(root, name);
    if (n == null) {
      return null;
    }
    if (!n.isNumber() || !(n.asDouble() >= min && n.asDouble() <= max)) {
      throw OpenAiError.invalid(name, "expected a number " + range + ", got " + n);
    }
    return n.asDouble();
  }

  private static Set<String> union(Set<String> a, Set<String> b) {
    java.util.HashSet<String> u = new java.util.HashSet<>(a);
    u.addAll(b);
    return Set.copyOf(u);
  }
}
