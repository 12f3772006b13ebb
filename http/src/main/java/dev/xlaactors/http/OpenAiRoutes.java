package dev.xlaactors.http;

import com.fasterxml.jackson.databind.JsonNode;
import dev.xlaactors.actors.serve.GenerationSettings;
import dev.xlaactors.actors.serve.ModelServer;
import dev.xlaactors.error.InvalidArgumentException;
import dev.xlaactors.lm.EmbeddingModel;
import dev.xlaactors.lm.LanguageModel;
import dev.xlaactors.lm.TextGenerator;
import dev.xlaactors.runtime.HostTensor;
import dev.xlaactors.lm.sampling.SamplingParams;
import dev.xlaactors.lm.structured.GrammarProcessor;
import dev.xlaactors.lm.structured.JsonSchemaAutomaton;
import dev.xlaactors.lm.structured.TokenGrammar;
import dev.xlaactors.lm.structured.TokenVocabulary;
import dev.xlaactors.lm.structured.UnsupportedSchemaException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Base64;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.Executor;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.pekko.NotUsed;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.actor.typed.DispatcherSelector;
import org.apache.pekko.http.javadsl.model.ContentType;
import org.apache.pekko.http.javadsl.model.ContentTypes;
import org.apache.pekko.http.javadsl.model.HttpEntities;
import org.apache.pekko.http.javadsl.model.HttpResponse;
import org.apache.pekko.http.javadsl.model.MediaTypes;
import org.apache.pekko.http.javadsl.model.StatusCodes;
import org.apache.pekko.http.javadsl.model.headers.RetryAfter;
import org.apache.pekko.http.javadsl.model.headers.TimeoutAccess;
import org.apache.pekko.http.javadsl.server.AllDirectives;
import org.apache.pekko.http.javadsl.server.PathMatchers;
import org.apache.pekko.http.javadsl.server.Route;
import org.apache.pekko.japi.Pair;
import org.apache.pekko.stream.BoundedSourceQueue;
import org.apache.pekko.stream.javadsl.Keep;
import org.apache.pekko.stream.javadsl.Source;
import org.apache.pekko.util.ByteString;

/**
 * The OpenAI API over the served models, a thin adapter over {@link TextGenerator} and {@link EmbeddingModel}
 * (Pekko HTTP routes; combine with {@link ServingRoutes#route()} by {@code concat}):
 * <ul>
 *   <li>{@code GET /v1/models}, {@code GET /v1/models/<id>}: the models in OpenAI's list shape;
 *   <li>{@code POST /v1/completions}: prompts (a string, strings, token ids or lists of them) continued;
 *   <li>{@code POST /v1/chat/completions}: messages rendered by the model's chat template
 *       ({@link ChatTemplate}); a model without one is refused naming why;
 *   <li>{@code POST /v1/embeddings}: one embedding per input, as floats or base64.
 * </ul>
 *
 * <p>Requests are checked whole before anything runs ({@link OpenAiRequest}: unknown and unsupported
 * fields are refused naming them). Completions run as {@code n} generations per prompt through the model's
 * generation server (continuous batching); streamed, each piece of text is an unnamed server-sent event
 * {@code data: {chunk}}, then, when asked, a usage chunk with {@code choices: []}, then {@code data: [DONE]}
 * ({@link OpenAiResponses}). The status of a stream is decided by its first piece: a request refused by
 * its server before any text (overloaded, timed out) is an HTTP error, a failure later an error event.
 * Errors are {@code {"error": {"message", "type", "param", "code"}}} with the matching status
 * ({@link OpenAiError}).
 *
 * <p>A client that goes away cancels its generations: bound by {@link HttpServer}, through its
 * {@link ClientConnection}; and a stream that Pekko HTTP can no longer write cancels them too. Bodies are
 * bounded by {@code xla-actors.http.max-generate-body-bytes} (completions, chat) and {@code max-body-bytes}
 * (embeddings): 413 beyond. Embeddings run one input a row on the model's server ({@link EmbeddingEndpoint}):
 * admitted up to its queue capacity (503 beyond), each with its deadline (504), cancelled with the client.
 * Thread-safe.
 */
public final class OpenAiRoutes extends AllDirectives {
  private static final ContentType EVENT_STREAM = ContentTypes.create(MediaTypes.TEXT_EVENT_STREAM);
  private static final long STRICT_TIMEOUT_MS = 30_000;
  /** JSON values of a request beyond its prompts: fields, messages, stop strings (generous). */
  private static final long STRUCTURE_VALUES = 4096;

  private final ActorSystem<?> system;
  private final HttpSettings settings;
  private final Map<String, CompletionEndpoint> generators = new LinkedHashMap<>();
  private final Map<String, ChatTemplate> templates = new LinkedHashMap<>();
  private final Map<String, EmbeddingEndpoint> embedders = new LinkedHashMap<>();
  private final Executor blocking;
  /** Where chat templates render (xla-actors.http.chat-template.dispatcher): never on the routes' own threads. */
  private final Executor renderer;
  private final Duration generationTimeout;
  private final long created = System.currentTimeMillis() / 1000;
  private final HttpMetrics metrics;

  /**
   * Routes over the language models {@code generators} and the embedding models {@code embedders} (names
   * unique across both; a request names its model by it), with {@code settings} (body limits, timeouts).
   */
  public OpenAiRoutes(ActorSystem<?> system, HttpSettings settings, List<CompletionEndpoint> generators, List<EmbeddingEndpoint> embedders) {
    this(system, settings, generators, embedders, new io.micrometer.core.instrument.simple.SimpleMeterRegistry());
  }

  /** As {@link #OpenAiRoutes(ActorSystem, HttpSettings, List, List)}, the embeddings counted in {@code registry} ({@code xla_openai_embeddings_*}). */
  public OpenAiRoutes(ActorSystem<?> system, HttpSettings settings, List<CompletionEndpoint> generators, List<EmbeddingEndpoint> embedders,
      io.micrometer.core.instrument.MeterRegistry registry) {
    this.system = system;
    this.metrics = new HttpMetrics(registry);
    this.settings = settings;
    this.blocking = system.dispatchers().lookup(DispatcherSelector.blocking());
    this.generationTimeout = GenerationSettings.create(system).defaultTimeout();
    if (generationTimeout.compareTo(settings.maxRequestTimeout()) > 0) {
      throw new InvalidArgumentException("xla-actors.actors.generation.default-timeout (" + generationTimeout + ") is longer than "
          + HttpSettings.ROOT + ".max-request-timeout (" + settings.maxRequestTimeout() + "), above which HTTP connections may be "
          + "closed as idle: shorten the first or raise the second");
    }
    ChatTemplateSettings chatSettings = ChatTemplateSettings.create(system);
    this.renderer = system.dispatchers().lookup(DispatcherSelector.fromConfig(chatSettings.dispatcher()));
    Set<String> names = new HashSet<>();
    for (CompletionEndpoint e : generators) {
      if (!names.add(e.name())) {
        throw new InvalidArgumentException("two models are named '" + e.name() + "': give each model its own name");
      }
      this.generators.put(e.name(), e);
      LanguageModel lm = e.generator().model();
      lm.chatTemplate().ifPresent(t -> templates.put(e.name(), new ChatTemplate(e.name(), t, specialTokens(lm), chatSettings,
          java.time.Clock.systemDefaultZone())));
    }
    for (EmbeddingEndpoint m : embedders) {
      if (!names.add(m.name())) {
        throw new InvalidArgumentException("two models are named '" + m.name() + "': give each model its own name");
      }
      this.embedders.put(m.name(), m);
    }
  }

  /**
   * The special-token texts a chat template sees: the package's {@code special_tokens} (from the checkpoint's
   * tokenizer_config.json, as {@code apply_chat_template} passes them); for a package imported before it had
   * them, the text of its {@code bos_token_id} and first EOS id.
   */
  private static Map<String, String> specialTokens(LanguageModel lm) {
    Map<String, String> tokens = lm.modelPackage().specialTokens();
    if (!tokens.isEmpty()) {
      return tokens;
    }
    Map<String, String> derived = new LinkedHashMap<>();
    Integer bos = lm.modelPackage().generation().bosTokenId();
    List<Integer> eos = lm.modelPackage().generation().eosTokenIds();
    if (bos != null) {
      derived.put("bos_token", lm.tokenizer().decode(new int[] {bos}));
    }
    if (eos != null && !eos.isEmpty()) {
      derived.put("eos_token", lm.tokenizer().decode(new int[] {eos.get(0)}));
    }
    return derived;
  }

  /** The language models (completions), in order. */
  List<String> completionModels() {
    return List.copyOf(generators.keySet());
  }

  /** The language models that have a chat template (chat completions), in order. */
  List<String> chatModels() {
    return List.copyOf(templates.keySet());
  }

  /** The lengths of the embedding models' embeddings (what {@code dimensions} may ask for), distinct, in order. */
  List<Integer> embeddingDimensions() {
    return embedders.values().stream().map(e -> e.model().dimensions()).distinct().toList();
  }

  /** The largest vocabulary of the language and embedding models (a token id is below it), 0 with none. */
  int largestVocabulary() {
    int largest = 0;
    for (CompletionEndpoint ep : generators.values()) {
      largest = Math.max(largest, ep.generator().model().vocabulary());
    }
    for (EmbeddingEndpoint e : embedders.values()) {
      largest = Math.max(largest, e.model().modelPackage().limits().vocabulary());
    }
    return largest;
  }

  /** The embedding models, in order. */
  List<String> embeddingModels() {
    return List.copyOf(embedders.keySet());
  }

  /** The route tree. */
  public Route route() {
    return concat(tokenizerRoutes(), pathPrefix("v1", () -> concat(
        path("models", () -> get(() -> complete(models()))),
        path(PathMatchers.segment("models").slash(PathMatchers.segment()), id -> get(() -> complete(model(id)))),
        path("completions", () -> post(() -> withBody(settings.maxGenerateBodyBytes(), "max-generate-body-bytes",
            (body, connection, timeout) -> completions(body, connection, timeout)))),
        path(PathMatchers.segment("chat").slash("completions"), () -> post(() -> withBody(settings.maxGenerateBodyBytes(),
            "max-generate-body-bytes", (body, connection, timeout) -> chat(body, connection, timeout)))),
        path("embeddings", () -> post(() -> withBody(settings.maxBodyBytes(), "max-body-bytes",
            (body, connection, timeout) -> embeddings(body, connection, timeout)))))));
  }

  /**
   * vLLM's tokenizer routes, which lm-eval's API models look for to tokenize on the server (its default,
   * before it falls back to downloading a Hugging Face tokenizer): {@code GET /tokenizer_info},
   * {@code POST /tokenize}, {@code POST /detokenize}. They name no model, as vLLM serves one: with several
   * language models a request names it in {@code model} ({@code ?model=} for tokenizer_info).
   */
  private Route tokenizerRoutes() {
    return concat(
        path("tokenizer_info", () -> get(() -> parameterOptional("model", model -> complete(guarded(() -> tokenizerInfo(model.orElse(null))))))),
        path("tokenize", () -> post(() -> withBody(settings.maxGenerateBodyBytes(), "max-generate-body-bytes",
            (body, connection, timeout) -> CompletableFuture.completedFuture(tokenize(body))))),
        path("detokenize", () -> post(() -> withBody(settings.maxGenerateBodyBytes(), "max-generate-body-bytes",
            (body, connection, timeout) -> CompletableFuture.completedFuture(detokenize(body))))));
  }

  private HttpResponse guarded(java.util.function.Supplier<HttpResponse> answer) {
    try {
      return answer.get();
    } catch (RuntimeException e) {
      return errorResponse(e);
    }
  }

  /** The language model a tokenizer request means: the one it names, else the only one served. */
  private LanguageModel tokenizerModel(String model, String endpoint) {
    if (model != null) {
      return generator(model, endpoint).generator().model();
    }
    if (generators.size() != 1) {
      throw OpenAiError.invalid("model", endpoint + " without 'model' tokenizes for the one language model served; "
          + (generators.isEmpty() ? "none is served" : generators.size() + " are (" + String.join(", ", generators.keySet())
          + "): name one in 'model'"));
    }
    return generators.values().iterator().next().generator().model();
  }

  private HttpResponse tokenizerInfo(String model) {
    LanguageModel lm = tokenizerModel(model, "GET /tokenizer_info");
    return json(TensorJson.object(g -> {
      g.writeStringField("model", lm.name());
      Map<String, String> special = specialTokens(lm); // as the chat template sees them
      for (String name : List.of("bos_token", "eos_token", "pad_token")) {
        if (special.get(name) == null) {
          g.writeNullField(name);
        } else {
          g.writeStringField(name, special.get(name));
        }
      }
      if (lm.chatTemplate().isPresent()) {
        g.writeStringField("chat_template", lm.chatTemplate().get());
      } else {
        g.writeNullField("chat_template");
      }
      g.writeNumberField("model_max_length", lm.contextLength());
    }));
  }

  private HttpResponse tokenize(byte[] body) {
    OpenAiRequest.Tokenize request = OpenAiRequest.tokenize(parse(body));
    LanguageModel lm = tokenizerModel(request.model(), "POST /tokenize");
    int[] ids = request.addSpecialTokens() ? lm.encode(request.prompt()) : lm.tokenizer().encode(request.prompt(), false);
    return json(TensorJson.object(g -> {
      g.writeNumberField("count", ids.length);
      g.writeNumberField("max_model_len", lm.contextLength());
      g.writeArrayFieldStart("tokens");
      for (int id : ids) {
        g.writeNumber(id);
      }
      g.writeEndArray();
    }));
  }

  private HttpResponse detokenize(byte[] body) {
    OpenAiRequest.Detokenize request = OpenAiRequest.detokenize(parse(body));
    LanguageModel lm = tokenizerModel(request.model(), "POST /detokenize");
    String text = lm.tokenizer().decode(checked(request.tokens(), lm, "tokens"));
    return json(TensorJson.object(g -> g.writeStringField("prompt", text)));
  }

  /** What a route makes of a request's body, its client's connection (null: not known) and its HTTP timeout (null: none). */
  @FunctionalInterface
  private interface BodyHandler {
    CompletionStage<HttpResponse> apply(byte[] body, ClientConnection connection, org.apache.pekko.http.javadsl.TimeoutAccess timeout);
  }

  /** Reads the whole body (at most {@code limit} bytes, the setting {@code key}: 413 naming it beyond) and answers with {@code handler}'s response. */
  private Route withBody(long limit, String key, BodyHandler handler) {
    return optionalAttribute(ClientConnection.KEY, connection -> optionalHeaderValueByType(TimeoutAccess.class, access ->
        extractRequestEntity(entity -> extractMaterializer(materializer ->
            completeWithFuture(entity.withSizeLimit(limit).toStrict(STRICT_TIMEOUT_MS, materializer)
                .thenCompose(strict -> handler.apply(strict.getData().toArray(), connection.orElse(null),
                    access.map(TimeoutAccess::timeoutAccess).orElse(null)))
                .exceptionally(thrown -> error(OpenAiError.of(thrown), limit, key)))))));
  }

  // ------------------------------------------------------------------------------------------ models

  private HttpResponse models() {
    return json(TensorJson.object(g -> {
      g.writeStringField("object", "list");
      g.writeArrayFieldStart("data");
      for (String id : modelIds()) {
        writeModel(g, id);
      }
      g.writeEndArray();
    }));
  }

  private List<String> modelIds() {
    List<String> ids = new ArrayList<>(generators.keySet());
    ids.addAll(embedders.keySet());
    return ids;
  }

  private HttpResponse model(String id) {
    if (!generators.containsKey(id) && !embedders.containsKey(id)) {
      return error(notFound(id));
    }
    return json(TensorJson.object(g -> writeModelFields(g, id)));
  }

  private void writeModel(com.fasterxml.jackson.core.JsonGenerator g, String id) throws java.io.IOException {
    g.writeStartObject();
    writeModelFields(g, id);
    g.writeEndObject();
  }

  private void writeModelFields(com.fasterxml.jackson.core.JsonGenerator g, String id) throws java.io.IOException {
    g.writeStringField("id", id);
    g.writeStringField("object", "model");
    g.writeNumberField("created", created);
    g.writeStringField("owned_by", "xla-actors");
    CompletionEndpoint e = generators.get(id);
    if (e != null) {
      g.writeNumberField("max_model_len", e.generator().model().contextLength()); // as vLLM reports it
    }
  }

  private OpenAiError notFound(String model) {
    return new OpenAiError(404, OpenAiError.INVALID_REQUEST, "model", "model_not_found", "The model '" + model + "' does not exist; "
        + "models served: " + (modelIds().isEmpty() ? "none" : String.join(", ", modelIds())));
  }

  private CompletionEndpoint generator(String model, String endpoint) {
    CompletionEndpoint e = generators.get(model);
    if (e != null) {
      return e;
    }
    if (embedders.containsKey(model)) {
      throw OpenAiError.invalid("model", "model '" + model + "' is an embedding model: it serves POST /v1/embeddings, not " + endpoint);
    }
    throw notFound(model);
  }

  // ------------------------------------------------------------------------------------------ completions

  /**
   * One generation of a response: its choice index, its prompt, its sampling (null: nothing to generate,
   * {@code max_tokens} 0), and for a completion with echo the text it repeats and that prompt's
   * log-probabilities (null: not asked for).
   */
  private record Job(int index, int promptIndex, int[] prompt, SamplingParams params, String echo, PromptLogprobs promptLogprobs) {}

  private CompletionStage<HttpResponse> completions(byte[] body, ClientConnection connection,
      org.apache.pekko.http.javadsl.TimeoutAccess timeout) {
    JsonNode root = parse(body);
    OpenAiRequest.Completion request = OpenAiRequest.completion(root);
    CompletionEndpoint ep = generator(request.model(), "POST /v1/completions");
    LanguageModel lm = ep.generator().model();
    List<int[]> promptIds = new ArrayList<>();
    List<Integer> maxTokens = new ArrayList<>();
    for (int p = 0; p < request.prompts().size(); p++) {
      OpenAiRequest.Prompt prompt = request.prompts().get(p);
      String field = request.prompts().size() == 1 ? "prompt" : "prompt[" + p + "]";
      int[] ids = prompt.tokens() != null ? checked(prompt.tokens(), lm, field)
          : Boolean.FALSE.equals(request.extensions().addSpecialTokens()) ? lm.tokenizer().encode(prompt.text(), false)
          : lm.encode(prompt.text());
      maxTokens.add(maxTokens(ep, ids.length, request.sampling().maxTokens(), Math.min(lm.defaults().maxTokens(),
          lm.contextLength() - ids.length), field));
      promptIds.add(ids);
    }
    checkLogitBias(request.sampling(), lm);
    OpenAiResponses writer = new OpenAiResponses(OpenAiResponses.Api.COMPLETIONS, request.model(), lm.tokenizer(), request.logprobs(),
        request.streaming().includeUsage());
    boolean scorePrompts = request.echo() && request.logprobs() != null;
    // The prompts' own log-probabilities come from the score program: a blocking run, so not on this thread.
    CompletableFuture<List<PromptLogprobs>> scored = !scorePrompts ? CompletableFuture.completedFuture(null)
        : CompletableFuture.supplyAsync(() -> promptIds.stream().map(ids -> PromptLogprobs.of(ids, lm.score(ids), request.logprobs()))
            .toList(), blocking);
    if (scorePrompts) {
      // A long prompt is scored by chunks before anything is generated (2,000 tokens of a 135 M Llama took longer
      // than Pekko's 20 s on 2 cores): the generation's deadline holds from here.
      waitForTheGeneration(ep, timeout, () -> scored.cancel(true));
    }
    // A response format's grammar, made off this thread as a chat's (see there).
    CompletableFuture<TokenGrammar> grammar = request.responseFormat() == null ? CompletableFuture.completedFuture(null)
        : CompletableFuture.supplyAsync(() -> grammar(lm, request.responseFormat(), "response_format"), blocking);
    return scored.thenCombine(grammar, (logprobs, constraint) -> {
      List<Job> jobs = new ArrayList<>();
      for (int p = 0; p < promptIds.size(); p++) {
        OpenAiRequest.Prompt prompt = request.prompts().get(p);
        int[] ids = promptIds.get(p);
        String echo = request.echo() ? (prompt.text() != null ? prompt.text() : lm.tokenizer().decode(ids)) : null;
        int top = request.logprobs() == null ? 0 : request.logprobs();
        for (int c = 0; c < request.sampling().n(); c++) {
          SamplingParams params = maxTokens.get(p) == 0 ? null
              : request.extensions().apply(request.sampling().over(lm.defaults(), maxTokens.get(p), top, c));
          if (params != null && constraint != null) {
            params = constrained(lm, params, constraint, lm.defaults().stopTokenIds(), "response_format");
          }
          jobs.add(new Job(jobs.size(), p, ids, params, echo, logprobs == null ? null : logprobs.get(p)));
        }
      }
      return jobs;
    }).thenCompose(jobs -> run(ep, jobs, promptTokens(promptIds), writer, request.streaming(), request.extensions(), connection,
        timeout));
  }

  private CompletionStage<HttpResponse> chat(byte[] body, ClientConnection connection, org.apache.pekko.http.javadsl.TimeoutAccess timeout) {
    JsonNode root = parse(body);
    OpenAiRequest.Chat request = OpenAiRequest.chat(root);
    CompletionEndpoint ep = generator(request.model(), "POST /v1/chat/completions");
    LanguageModel lm = ep.generator().model();
    ChatTemplate template = templates.get(request.model());
    if (template == null) {
      throw new OpenAiError(400, OpenAiError.INVALID_REQUEST, "model", "no_chat_template", "model '" + request.model() + "' has no chat "
          + "template (its checkpoint's tokenizer_config.json has no chat_template, and there is no chat_template.jinja), so it "
          + "cannot turn messages into a prompt: use POST /v1/completions with a prompt, or import a checkpoint that has one");
    }
    checkLogitBias(request.sampling(), lm);
    List<OpenAiRequest.Tool> tools = request.tools() == null ? List.of() : request.tools().functions();
    // With tools the answer is a call or words in ToolCallFormat's JSON (a response_format's schema inside it).
    boolean toolCalls = request.tools() != null && request.tools().mayCall();
    return template.renderAsync(request.messages(), true, tools, renderer).thenCompose(prompt -> {
      // As Hugging Face's apply_chat_template: the template writes the special tokens, the tokenizer adds none (unless asked to, as vLLM).
      int[] ids = lm.tokenizer().encode(prompt, Boolean.TRUE.equals(request.extensions().addSpecialTokens()));
      int maxTokens = maxTokens(ep, ids.length, request.sampling().maxTokens(), lm.contextLength() - ids.length, "messages");
      OpenAiResponses writer = new OpenAiResponses(OpenAiResponses.Api.CHAT, request.model(), lm.tokenizer(),
          request.logprobs() ? request.topLogprobs() : null, request.streaming().includeUsage());
      // A response format's grammar: the vocabulary is read once per model (seconds for 150,000 tokens) and the schema
      // compiled once per schema (cached), both blocking, so not on this thread.
      if (toolCalls) {
        writer.withToolCalls();
      }
      // The tools' schemas are checked and compiled there too (a large schema takes a while).
      CompletableFuture<TokenGrammar> grammar = toolCalls
          ? CompletableFuture.supplyAsync(() -> grammar(lm, new OpenAiRequest.ResponseFormat(ToolCallFormat.schema(request.tools(),
              request.responseFormat()), "tools"), "tools"), blocking)
          : request.responseFormat() == null ? CompletableFuture.completedFuture(null)
          : CompletableFuture.supplyAsync(() -> grammar(lm, request.responseFormat(), "response_format"), blocking);
      return grammar.thenCompose(constraint -> {
        List<Job> jobs = new ArrayList<>();
        for (int c = 0; c < request.sampling().n(); c++) {
          SamplingParams params = request.sampling().over(lm.defaults(), maxTokens, request.topLogprobs(), c);
          Set<Integer> stops = chatStops(lm, template, params);
          // ignore_eos drops the template's end of turn too.
          params = request.extensions().apply(params.withStopTokenIds(stops));
          if (constraint != null) {
            params = constrained(lm, params, constraint, stops, toolCalls ? "tools" : "response_format");
          }
          jobs.add(new Job(c, 0, ids, params, null, null));
        }
        return run(ep, jobs, ids.length, writer, request.streaming(), request.extensions(), connection, timeout);
      });
    });
  }

  /**
   * {@code params} constrained by {@code grammar}, ending at {@code stops} whatever {@code ignore_eos} says (the grammar's
   * end is one of them), and without stop strings: a stop string inside the answer (a quote, a brace, a word of a
   * value) would cut it short of parsing, so a constrained answer ends where the grammar says it is whole, never at a
   * stop string (vLLM applies them and can return JSON cut short; we do not). {@code min_tokens} is dropped too: held-back
   * end tokens would leave a whole answer (a closed object) nothing to draw.
   */
  private static SamplingParams constrained(LanguageModel lm, SamplingParams params, TokenGrammar grammar, Set<Integer> stops,
      String param) {
    if (stops.isEmpty()) {
      throw OpenAiError.invalid(param, "model '" + lm.name() + "' has no end-of-text token, so a constrained"
          + " answer cannot end: import it with its generation_config.json's eos_token_id");
    }
    List<dev.xlaactors.lm.sampling.LogitsProcessor> kept = params.processors().stream()
        .filter(p -> !(p instanceof dev.xlaactors.lm.sampling.MinTokens)).toList();
    return params.withStopTokenIds(stops).withStopStrings(List.of()).withProcessors(kept)
        .withProcessor(new GrammarProcessor(grammar, stops));
  }

  private static int promptTokens(List<int[]> prompts) {
    return prompts.stream().mapToInt(p -> p.length).sum();
  }

  /**
   * The grammar of a chat's or a completion's {@code response_format} for {@code lm}: any JSON object, or JSON valid for the schema; a
   * schema outside the subset the grammar compiles is refused naming the keyword.
   */
  private static TokenGrammar grammar(LanguageModel lm, OpenAiRequest.ResponseFormat format, String param) {
    TokenVocabulary vocabulary = TokenVocabulary.of(lm.tokenizer());
    TokenGrammar grammar;
    try {
      grammar = format.schema() == null ? TokenGrammar.cached("json_object", vocabulary, JsonSchemaAutomaton::anyObject)
          : TokenGrammar.cached(format.schema(), vocabulary, () -> JsonSchemaAutomaton.compile(format.schema()));
    } catch (UnsupportedSchemaException e) {
      throw OpenAiError.invalid(param, e.getMessage());
    }
    return grammar;
  }

  /** Refuses a {@code logit_bias} naming a token outside the model's vocabulary. */
  private static void checkLogitBias(OpenAiRequest.Sampling sampling, LanguageModel lm) {
    for (int id : sampling.logitBias().keySet()) {
      if (id >= lm.vocabulary()) {
        throw OpenAiError.invalid("logit_bias", "token " + id + " is outside the vocabulary of model '" + lm.name() + "' (0.."
            + (lm.vocabulary() - 1) + ")");
      }
    }
  }

  /**
   * The tokens a chat answer stops at: the request's (the package's EOS ids, from generation_config.json)
   * and the template's {@code eos_token}, the end of an assistant turn in the templates that close turns
   * with it (Llama 3 Instruct's {@code <|eot_id|>}, ChatML's {@code <|im_end|>} in Qwen2.5's
   * tokenizer_config.json), as vLLM adds the tokenizer's EOS to generation_config's.
   */
  private static Set<Integer> chatStops(LanguageModel lm, ChatTemplate template, SamplingParams params) {
    String eos = template.specialTokens().get("eos_token");
    java.util.OptionalInt id = eos == null ? java.util.OptionalInt.empty() : lm.tokenizer().tokenId(eos);
    if (id.isEmpty() || params.stopTokenIds().contains(id.getAsInt())) {
      return params.stopTokenIds();
    }
    Set<Integer> stops = new HashSet<>(params.stopTokenIds());
    stops.add(id.getAsInt());
    return stops;
  }

  /** {@code ids} when each is in the model's vocabulary; else 400 naming the first that is not. */
  private static int[] checked(int[] ids, LanguageModel lm, String field) {
    for (int i = 0; i < ids.length; i++) {
      if (ids[i] >= lm.vocabulary()) {
        throw OpenAiError.invalid(field + "[" + i + "]", "token " + ids[i] + " is outside the vocabulary of model '" + lm.name() + "' (0.."
            + (lm.vocabulary() - 1) + ")");
      }
    }
    return ids;
  }

  /**
   * The tokens to generate after a prompt of {@code promptLength}: {@code requested}, else {@code dflt};
   * refused when the prompt is empty or longer than the model takes, or prompt and tokens exceed its context.
   */
  private static int maxTokens(CompletionEndpoint ep, int promptLength, Integer requested, int dflt, String field) {
    LanguageModel lm = ep.generator().model();
    if (promptLength < 1 || promptLength > ep.maxPromptLength() || promptLength >= lm.contextLength()) {
      throw OpenAiError.invalid(field, "model '" + lm.name() + "' takes prompts of 1.." + Math.min(ep.maxPromptLength(),
          lm.contextLength() - 1) + " tokens, got " + promptLength);
    }
    // In long: a max_tokens near 2^31 must not wrap around to a small or negative sum.
    if (requested != null && (long) promptLength + requested > lm.contextLength()) { // (0 only with echo: scoring the prompt)
      throw OpenAiError.invalid("max_tokens", "the maximum context length of model '" + lm.name() + "' is " + lm.contextLength()
          + " tokens; you requested " + ((long) promptLength + requested) + " (" + promptLength + " in the prompt, " + requested
          + " in the completion): ask for at most " + (lm.contextLength() - promptLength));
    }
    return requested != null ? requested : Math.max(1, dflt);
  }

  /**
   * Runs {@code jobs} on the model's generation server, all at once (they batch), and answers with the
   * whole response or its stream; cancels the rest when one fails, and all when the client goes away.
   */
  private CompletionStage<HttpResponse> run(CompletionEndpoint ep, List<Job> jobs, int promptTokens, OpenAiResponses writer,
      OpenAiRequest.Streaming streaming, OpenAiRequest.Extensions extensions, ClientConnection connection,
      org.apache.pekko.http.javadsl.TimeoutAccess timeout) {
    TextGenerator.TextOptions text = new TextGenerator.TextOptions(extensions.skipSpecialTokens(), extensions.includeStopString());
    Generations generations = streaming.stream()
        ? new StreamedGenerations(ep, jobs, promptTokens, writer, text, streaming)
        : new Generations(ep, jobs, promptTokens, writer, text);
    generations.start();
    if (connection != null) {
      connection.cancelOnClose(generations.done, generations::cancel);
    }
    waitForTheGeneration(ep, timeout, generations::cancel);
    return generations.response();
  }

  /**
   * Pekko's request-timeout (20 s) would cut a long generation, or a long prompt's scoring, short: the HTTP layer
   * waits for the server's own deadline instead (generation's default-timeout plus request-timeout-margin, counted
   * from the request's arrival however often it is set), then runs {@code cancel} and answers 504.
   */
  private void waitForTheGeneration(CompletionEndpoint ep, org.apache.pekko.http.javadsl.TimeoutAccess timeout, Runnable cancel) {
    if (timeout == null) {
      return;
    }
    Duration wait = generationTimeout.plus(settings.requestTimeoutMargin());
    timeout.update(wait, request -> {
      cancel.run();
      return error(new OpenAiError(504, "timeout_error", null, "timeout", "model '" + ep.name() + "' did not answer within "
          + wait.toMillis() + " ms (xla-actors.actors.generation.default-timeout plus " + HttpSettings.ROOT
          + ".request-timeout-margin): the request was cancelled"));
    });
  }

  /** One request's generations, answered whole when all have finished. */
  private class Generations {
    final CompletionEndpoint ep;
    final List<Job> jobs;
    final int promptTokens;
    final OpenAiResponses writer;
    final TextGenerator.TextOptions text;
    final List<CompletableFuture<TextGenerator.Result>> results = new ArrayList<>();
    /** Completes when every generation has ended (any way): the client's connection no longer matters then. */
    final CompletableFuture<Void> done = new CompletableFuture<>();
    /** The first failure that was not a cancel of ours: what the response answers with. */
    final java.util.concurrent.atomic.AtomicReference<Throwable> failure = new java.util.concurrent.atomic.AtomicReference<>();

    Generations(CompletionEndpoint ep, List<Job> jobs, int promptTokens, OpenAiResponses writer, TextGenerator.TextOptions text) {
      this.ep = ep;
      this.jobs = jobs;
      this.promptTokens = promptTokens;
      this.writer = writer;
      this.text = text;
    }

    void start() {
      AtomicInteger left = new AtomicInteger(jobs.size());
      for (Job job : jobs) {
        CompletableFuture<TextGenerator.Result> r = job.params() == null
            ? CompletableFuture.completedFuture(new TextGenerator.Result(job.prompt(), new int[0], "", TextGenerator.FinishReason.LENGTH,
                List.of())) // max_tokens 0: the echo is the whole answer
            : ep.generator().generate(job.prompt(), job.params(), null, text, piece -> onPiece(job, piece)).toCompletableFuture();
        results.add(r);
      }
      for (int i = 0; i < jobs.size(); i++) {
        Job job = jobs.get(i);
        results.get(i).whenComplete((result, failure) -> {
          if (failure != null && !(failure instanceof java.util.concurrent.CancellationException)) {
            this.failure.compareAndSet(null, failure);
          }
          if (failure != null) {
            cancel(); // one choice failed: the response fails, the others would compute for nothing
          }
          onEnd(job, result, failure);
          if (left.decrementAndGet() == 0) {
            onAllEnded();
            done.complete(null);
          }
        });
      }
    }

    void onPiece(Job job, TextGenerator.Piece piece) {}

    void onEnd(Job job, TextGenerator.Result result, Throwable failure) {}

    void onAllEnded() {}

    void cancel() {
      results.forEach(r -> r.cancel(true));
    }

    OpenAiResponses.Usage usage() {
      int generated = 0;
      for (CompletableFuture<TextGenerator.Result> r : results) {
        if (r.isDone() && !r.isCompletedExceptionally()) {
          generated += r.join().tokens().length;
        }
      }
      return new OpenAiResponses.Usage(promptTokens, generated);
    }

    CompletionStage<HttpResponse> response() {
      return done.thenApply(v -> {
        if (failure.get() != null) {
          return errorResponse(failure.get());
        }
        if (results.stream().anyMatch(CompletableFuture::isCancelled)) { // the client left or the HTTP timeout fired: nobody reads this
          return error(new OpenAiError(503, OpenAiError.SERVER_ERROR, null, OpenAiError.CANCELLED, "the request was cancelled"));
        }
        List<OpenAiResponses.Choice> choices = new ArrayList<>();
        for (int i = 0; i < jobs.size(); i++) {
          choices.add(new OpenAiResponses.Choice(jobs.get(i).index(), results.get(i).join(), jobs.get(i).echo(),
              jobs.get(i).promptLogprobs()));
        }
        return json(writer.response(choices, usage()));
      }).exceptionally(OpenAiRoutes.this::errorResponse);
    }
  }

  /**
   * One request's generations streamed as server-sent events: a chunk per piece of text, as it comes,
   * into a bounded queue (it holds every chunk the request can make, so nothing waits on a slow client);
   * the response starts with the first piece, or is the error of a request refused before it.
   */
  private final class StreamedGenerations extends Generations {
    private final boolean includeUsage;
    private final boolean continuousUsage;
    private final BoundedSourceQueue<ByteString> queue;
    private final Source<ByteString, NotUsed> source;
    private final CompletableFuture<Void> started = new CompletableFuture<>();
    private final int[] textOffsets;
    private final int[] generated; // tokens so far per choice, for continuous usage; guarded by this
    private final ToolCallFormat.Decoder[] answers; // per choice when the answers follow ToolCallFormat; guarded by this
    private boolean failed; // guarded by this

    StreamedGenerations(CompletionEndpoint ep, List<Job> jobs, int promptTokens, OpenAiResponses writer, TextGenerator.TextOptions text,
        OpenAiRequest.Streaming streaming) {
      super(ep, jobs, promptTokens, writer, text);
      this.includeUsage = streaming.includeUsage();
      // As vLLM: usage on every chunk only when the client asked for usage at all.
      this.continuousUsage = streaming.includeUsage() && streaming.continuousUsage();
      int capacity = 8;
      for (Job job : jobs) {
        capacity += (job.params() == null ? 0 : job.params().maxTokens()) + 4;
      }
      Pair<BoundedSourceQueue<ByteString>, Source<ByteString, NotUsed>> q = Source.<ByteString>queue(capacity).preMaterialize(system);
      this.queue = q.first();
      // The client went away (Pekko HTTP cancels the entity) or the stream ended: no generation goes on for nobody.
      this.source = q.second().watchTermination((mat, ended) -> {
        ended.whenComplete((d, e) -> cancel());
        return mat;
      }).keepAlive(settings.sseKeepAlive(), () -> OpenAiResponses.KEEP_ALIVE).mapMaterializedValue(m -> NotUsed.getInstance());
      this.textOffsets = new int[jobs.size()];
      this.generated = new int[jobs.size()];
      this.answers = new ToolCallFormat.Decoder[writer.toolCalls() ? jobs.size() : 0];
      for (int i = 0; i < answers.length; i++) {
        answers[i] = new ToolCallFormat.Decoder(OpenAiResponses.callId());
      }
    }

    /** The chunks of what a choice's answer decoder found: a call's start, its arguments, words. */
    private void offerAnswer(Job job, List<ToolCallFormat.Event> events) {
      for (ToolCallFormat.Event e : events) {
        if (e instanceof ToolCallFormat.CallStart s) {
          offer(writer.toolCallChunk(job.index(), s.id(), s.name(), "", usageSoFar(job)));
        } else if (e instanceof ToolCallFormat.ArgumentsDelta a) {
          offer(writer.toolCallChunk(job.index(), null, null, a.text(), usageSoFar(job)));
        } else if (e instanceof ToolCallFormat.ContentDelta c) {
          offer(writer.chunk(job.index(), c.text(), null, textOffsets[job.index()], (String) null, usageSoFar(job)));
          textOffsets[job.index()] += c.text().length();
        }
      }
    }

    /** The usage of choice {@code job} so far, as vLLM's continuous usage stats count it (null: not asked for). */
    private OpenAiResponses.Usage usageSoFar(Job job) {
      return continuousUsage ? new OpenAiResponses.Usage(job.prompt().length, generated[job.index()]) : null;
    }

    @Override
    void start() {
      for (Job job : jobs) { // a chat choice opens with the assistant's role, an echoed completion with its prompt
        if (writer.api() == OpenAiResponses.Api.CHAT) {
          offer(writer.roleChunk(job.index(), usageSoFar(job)));
        } else if (job.echo() != null) {
          offer(writer.echoChunk(job.index(), job.echo(), job.promptLogprobs(), usageSoFar(job)));
          textOffsets[job.index()] = job.echo().length();
        }
      }
      super.start();
    }

    @Override
    synchronized void onPiece(Job job, TextGenerator.Piece piece) {
      started.complete(null);
      if (piece.token() >= 0) {
        generated[job.index()]++;
      }
      if (answers.length > 0) {
        if (!failed) {
          offerAnswer(job, answers[job.index()].feed(piece.text()));
        }
        return;
      }
      if (failed || (piece.text().isEmpty() && (piece.sample() == null || !writer.reportsLogprobs()))) {
        return; // nothing to show yet: a character or a possible stop string is held back
      }
      offer(writer.chunk(job.index(), piece.text(), piece.sample(), textOffsets[job.index()], (String) null, usageSoFar(job)));
      textOffsets[job.index()] += piece.text().length();
    }

    @Override
    synchronized void onEnd(Job job, TextGenerator.Result result, Throwable failure) {
      if (failure == null) {
        started.complete(null);
        if (!failed && answers.length > 0) {
          ToolCallFormat.Decoder answer = answers[job.index()];
          offerAnswer(job, answer.finish());
          offer(writer.chunk(job.index(), "", null, textOffsets[job.index()], OpenAiResponses.finishReason(result.finishReason(),
              answer.isWholeCall()), usageSoFar(job)));
        } else if (!failed) {
          offer(writer.chunk(job.index(), "", null, textOffsets[job.index()], result.finishReason(), usageSoFar(job)));
        }
        return;
      }
      if (!started.isDone()) {
        // Refused before any text (overloaded, timed out, invalid): the response is an HTTP error.
        started.completeExceptionally(this.failure.get() != null ? this.failure.get() : failure);
      } else if (!failed && !(failure instanceof java.util.concurrent.CancellationException)) {
        offer(OpenAiResponses.errorEvent(OpenAiError.of(failure)));
      }
      failed = true;
    }

    @Override
    synchronized void onAllEnded() {
      if (!failed && includeUsage) {
        offer(writer.usageChunk(usage()));
      }
      offer(OpenAiResponses.DONE);
      queue.complete();
    }

    private void offer(ByteString chunk) {
      queue.offer(chunk); // Enqueued, or QueueClosed once the client went away; never full (sized for the whole request)
    }

    @Override
    CompletionStage<HttpResponse> response() {
      return started.thenApply(v -> HttpResponse.create().withEntity(HttpEntities.create(EVENT_STREAM, source)))
          .exceptionally(OpenAiRoutes.this::errorResponse);
    }
  }

  // ------------------------------------------------------------------------------------------ embeddings

  /**
   * One row per input on the model's server ({@link EmbeddingEndpoint#inference()}), as {@code /v2} runs
   * rows: batched with everyone else's, refused at once when its queue is full (503 with Retry-After), each
   * with the server's deadline (504), cancelled when the client leaves or another row fails; pooled here.
   */
  private CompletionStage<HttpResponse> embeddings(byte[] body, ClientConnection connection,
      org.apache.pekko.http.javadsl.TimeoutAccess timeout) {
    JsonNode root = parse(body);
    OpenAiRequest.Embeddings request = OpenAiRequest.embeddings(root);
    EmbeddingEndpoint ep = embedders.get(request.model());
    if (ep == null) {
      if (generators.containsKey(request.model())) {
        throw OpenAiError.invalid("model", "model '" + request.model() + "' is a language model: it serves /v1/completions and "
            + "/v1/chat/completions, not POST /v1/embeddings (serve an embedding package for that)");
      }
      throw notFound(request.model());
    }
    EmbeddingModel model = ep.model();
    if (request.inputs().size() > ep.serve().queueCapacity()) {
      // Every input is a request to the model's server, queued at once: more than its queue holds could never all be admitted.
      throw OpenAiError.invalid("input", "model '" + model.name() + "' takes at most " + ep.serve().queueCapacity() + " inputs in one "
          + "request (xla-actors.actors.serve.models." + model.name() + ".queue-capacity), got " + request.inputs().size()
          + ": send fewer per request or raise that key");
    }
    List<int[]> sequences = new ArrayList<>();
    int tokens = 0;
    int vocabulary = model.modelPackage().limits().vocabulary();
    for (int i = 0; i < request.inputs().size(); i++) {
      OpenAiRequest.Prompt in = request.inputs().get(i);
      String field = request.inputs().size() == 1 ? "input" : "input[" + i + "]";
      int[] ids;
      if (in.tokens() != null) {
        ids = in.tokens();
        for (int t = 0; t < ids.length; t++) {
          if (ids[t] >= vocabulary) {
            throw OpenAiError.invalid(field + "[" + t + "]", "token " + ids[t] + " is outside the vocabulary of model '" + model.name()
                + "' (0.." + (vocabulary - 1) + ")");
          }
        }
      } else {
        ids = model.encode(in.text());
      }
      if (ids.length < 1 || ids.length > model.maxLength()) {
        throw OpenAiError.invalid(field, "model '" + model.name() + "' embeds inputs of 1.." + model.maxLength() + " tokens, got "
            + ids.length);
      }
      sequences.add(ids);
      tokens += ids.length;
    }
    int promptTokens = tokens;
    long started = System.nanoTime();
    CompletableFuture<float[][]> embedded = embed(ep, sequences, connection, timeout);
    embedded.whenComplete((v, e) -> metrics.embeddings(model.name(), e == null ? "ok" : outcome(e),
        Duration.ofNanos(System.nanoTime() - started)));
    return embedded.thenApply(vectors -> {
      if (request.dimensions() != null && vectors.length > 0 && vectors[0].length != request.dimensions()) {
        throw OpenAiError.invalid("dimensions", "model '" + model.name() + "' makes embeddings of " + vectors[0].length + " dimensions "
            + "and cannot shorten them; leave dimensions out or give " + vectors[0].length);
      }
      return json(TensorJson.object(g -> {
        g.writeStringField("object", "list");
        g.writeArrayFieldStart("data");
        for (int i = 0; i < vectors.length; i++) {
          g.writeStartObject();
          g.writeStringField("object", "embedding");
          g.writeNumberField("index", i);
          if (request.base64()) {
            ByteBuffer b = ByteBuffer.allocate(vectors[i].length * 4).order(ByteOrder.LITTLE_ENDIAN);
            for (float f : vectors[i]) {
              b.putFloat(f);
            }
            g.writeStringField("embedding", Base64.getEncoder().encodeToString(b.array()));
          } else {
            g.writeArrayFieldStart("embedding");
            for (float f : vectors[i]) {
              g.writeNumber(f);
            }
            g.writeEndArray();
          }
          g.writeEndObject();
        }
        g.writeEndArray();
        g.writeStringField("model", model.name());
        g.writeObjectFieldStart("usage");
        g.writeNumberField("prompt_tokens", promptTokens);
        g.writeNumberField("total_tokens", promptTokens);
        g.writeEndObject();
      }));
    });
  }

  /**
   * The embeddings of {@code sequences}, one row each on {@code ep}'s server; fails at the first failed row
   * (cancelling the others). Rows are closed once answered; the Pekko HTTP timeout follows the rows' deadline.
   */
  private CompletableFuture<float[][]> embed(EmbeddingEndpoint ep, List<int[]> sequences, ClientConnection connection,
      org.apache.pekko.http.javadsl.TimeoutAccess timeout) {
    List<String> ids = new ArrayList<>();
    List<CompletableFuture<float[]>> answers = new ArrayList<>();
    Runnable cancelAll = () -> ids.forEach(rowId -> ep.inference().cancel(rowId, "another input of its request failed, "
        + "or the request was given up")); // ignored for rows already answered
    List<List<HostTensor>> rows = new ArrayList<>();
    try { // every row made before any is sent: a refused sequence leaves nothing running
      for (int s = 0; s < sequences.size(); s++) {
        rows.add(ep.model().row(s, sequences.get(s)));
      }
    } catch (RuntimeException e) {
      rows.forEach(r -> r.forEach(HostTensor::close));
      throw e;
    }
    for (int s = 0; s < sequences.size(); s++) {
      int tokens = sequences.get(s).length;
      List<HostTensor> row = rows.get(s);
      String rowId = ModelServer.newRequestId();
      ids.add(rowId);
      CompletableFuture<float[]> answer = ep.inference().infer(rowId, row, null).toCompletableFuture()
          .whenComplete((p, f) -> row.forEach(HostTensor::close))
          .thenApply(p -> {
            try {
              return ep.model().pooled(p.outputs().get(0), tokens);
            } finally {
              p.outputs().forEach(HostTensor::close);
            }
          });
      answers.add(answer);
      if (connection != null) { // after the ask, which has sent the Infer, so that the Cancel comes after it
        connection.cancelOnClose(answer, () -> ep.inference().cancel(rowId, "its HTTP client closed the connection"));
      }
    }
    if (timeout != null) {
      // The server answers at the deadline; this fires only for one that does not (Pekko's request-timeout would otherwise apply).
      Duration wait = ep.serve().defaultTimeout().plus(settings.requestTimeoutMargin());
      timeout.update(wait, request -> {
        cancelAll.run();
        return error(new OpenAiError(504, "timeout_error", null, "timeout", "model '" + ep.name() + "' did not answer within "
            + wait.toMillis() + " ms (xla-actors.actors.serve.models." + ep.name() + ".default-timeout plus " + HttpSettings.ROOT
            + ".request-timeout-margin): the request was cancelled"));
      });
    }
    CompletableFuture<float[][]> all = new CompletableFuture<>();
    AtomicInteger pending = new AtomicInteger(answers.size());
    for (CompletableFuture<float[]> a : answers) {
      a.whenComplete((v, failure) -> {
        if (failure != null) {
          if (all.completeExceptionally(failure)) {
            cancelAll.run();
          }
        } else if (pending.decrementAndGet() == 0) {
          all.complete(answers.stream().map(CompletableFuture::join).toArray(float[][]::new));
        }
      });
    }
    return all;
  }

  /** The outcome label of a failed embeddings request: its HTTP status's reason. */
  private static String outcome(Throwable failure) {
    int status = OpenAiError.of(failure).status();
    return switch (status) {
      case 503 -> OpenAiError.CANCELLED.equals(OpenAiError.of(failure).code()) ? "cancelled" : "unavailable";
      case 504 -> "timeout";
      default -> status < 500 ? "refused" : "failed";
    };
  }

  // ------------------------------------------------------------------------------------------ JSON and errors

  private static JsonNode parse(byte[] body) {
    try {
      // Prompts, token ids and messages are bounded by the body's size; the count bounds the tree built from it.
      return TensorJson.parseObject(body, body.length / 2 + STRUCTURE_VALUES, "a request of this size holds");
    } catch (BadRequestException e) {
      throw new OpenAiError(400, OpenAiError.INVALID_REQUEST, null, null, "the body is not a JSON object: " + e.getMessage());
    }
  }

  private static HttpResponse json(byte[] body) {
    return HttpResponse.create().withStatus(StatusCodes.OK).withEntity(HttpEntities.create(ContentTypes.APPLICATION_JSON, body));
  }

  private HttpResponse errorResponse(Throwable thrown) {
    OpenAiError e = OpenAiError.of(thrown);
    if (OpenAiError.CANCELLED.equals(e.code())) {
      system.log().debug("OpenAI request cancelled: {}", e.getMessage()); // the client left (or its HTTP timeout fired): expected
    } else if (e.status() == 500) {
      system.log().warn("OpenAI request failed unexpectedly", thrown);
    }
    return error(e);
  }

  private HttpResponse error(OpenAiError e, long limit, String key) {
    if (e.status() == 413 && "request_too_large".equals(e.code()) && e.getMessage().startsWith("the request body")) {
      e = new OpenAiError(413, OpenAiError.INVALID_REQUEST, null, "request_too_large", "the request body is larger than " + limit
          + " bytes, the limit of this route (" + HttpSettings.ROOT + "." + key + "; raise it there to accept larger requests)");
    }
    return errorResponse(e);
  }

  private static HttpResponse error(OpenAiError e) {
    HttpResponse r = HttpResponse.create().withStatus(e.status()).withEntity(HttpEntities.create(ContentTypes.APPLICATION_JSON, e.body()));
    return e.status() == 503 ? r.addHeader(RetryAfter.create(1L)) : r;
  }
}
