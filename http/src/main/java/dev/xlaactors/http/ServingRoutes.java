package dev.xlaactors.http;

import com.fasterxml.jackson.databind.JsonNode;
import dev.xlaactors.actors.serve.GenerationServer;
import dev.xlaactors.actors.serve.GenerationSettings;
import dev.xlaactors.actors.serve.ModelServer;
import dev.xlaactors.error.BatchFailedException;
import dev.xlaactors.error.ErrorCode;
import dev.xlaactors.error.InvalidArgumentException;
import dev.xlaactors.error.OverloadedException;
import dev.xlaactors.error.RequestTimeoutException;
import dev.xlaactors.error.ServingException;
import dev.xlaactors.error.XlaException;
import dev.xlaactors.lm.SamplingTokenSampler;
import dev.xlaactors.lm.sampling.SamplingParams;
import io.micrometer.prometheusmetrics.PrometheusMeterRegistry;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ExecutionException;
import org.apache.pekko.Done;
import org.apache.pekko.NotUsed;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.actor.typed.javadsl.AskPattern;
import org.apache.pekko.http.javadsl.model.ContentType;
import org.apache.pekko.http.javadsl.model.ContentTypes;
import org.apache.pekko.http.javadsl.model.HttpEntities;
import org.apache.pekko.http.javadsl.model.HttpEntity;
import org.apache.pekko.http.javadsl.model.HttpResponse;
import org.apache.pekko.http.javadsl.model.MediaTypes;
import org.apache.pekko.http.javadsl.model.StatusCode;
import org.apache.pekko.http.javadsl.model.StatusCodes;
import org.apache.pekko.http.javadsl.model.headers.RetryAfter;
import org.apache.pekko.http.javadsl.model.headers.TimeoutAccess;
import org.apache.pekko.http.javadsl.server.AllDirectives;
import org.apache.pekko.http.javadsl.server.PathMatchers;
import org.apache.pekko.http.javadsl.server.Route;
import org.apache.pekko.http.scaladsl.model.EntityStreamSizeException;
import org.apache.pekko.japi.Pair;
import org.apache.pekko.stream.KillSwitches;
import org.apache.pekko.stream.UniqueKillSwitch;
import org.apache.pekko.stream.javadsl.Keep;
import org.apache.pekko.stream.javadsl.Sink;
import org.apache.pekko.stream.javadsl.Source;
import org.apache.pekko.util.ByteString;

/**
 * The HTTP routes over model and generation servers (Pekko HTTP):
 * <ul>
 *   <li>{@code /v2/...}: the Open Inference Protocol (KServe v2) over the models' {@link ModelServer}s,
 *       {@link OpenInferenceRoutes}: tensors in and out, {@code POST /v2/models/<name>/infer};
 *   <li>{@code POST /v1/models/<name>/generate}: JSON {@code {"tokens": [...] | "prompt": "text",
 *       "max_tokens", "stop_tokens", "temperature", "top_k", "seed", "timeout_ms"}} to the model's
 *       {@link GenerationServer}; the answer is a stream of server-sent events: {@code token} events
 *       ({@code {"index", "token", "text"}}; a character split across byte-level tokens is in the text of the
 *       token that completes it), then one {@code done} ({@code {"reason", "tokens"}}) or
 *       {@code error} ({@code {"status", "code", "error"}});
 *   <li>{@code GET /v1/endpoints}: the models, their routes, and their inputs as {@code /v2} names them or
 *       their generation limits ({@code GET /v1/models} is the OpenAI API's list, {@link OpenAiRoutes});
 *       {@code GET /health}: the process answers;
 *       {@code GET /ready}: every server answers its status within {@code xla-actors.http.ready-timeout}
 *       and accepts requests (else 503 naming the ones that do not); {@code GET /metrics}: the meters of
 *       {@code registry} in Prometheus's text format.
 * </ul>
 *
 * <p>Bound by {@link HttpServer}, a client that closes its connection cancels its requests still waiting
 * for an answer: an {@code infer} (of {@code /v2}) still queued is never computed, one whose batch runs loses
 * its row ({@link ModelServer.Cancel}); a generation, waiting for a slot or decoding, is dropped by its server (its
 * events' stream is shut down, which stops the receiving actor the server watches). Bound otherwise, a
 * generation is still cancelled when Pekko HTTP fails to write its next event to the closed connection.
 *
 * <p>Nothing reaches a server unchecked: a body over {@code xla-actors.http.max-generate-body-bytes}
 * (generate; {@code max-body-bytes} bounds {@code /v2}'s infer) is 413, and so is one holding more JSON values than the
 * model's request can (counted while parsing, so no tree of them is built),
 * malformed JSON, unknown fields, wrong dtypes, shapes, counts, ranges, tokens outside the vocabulary and
 * unknown models are 400 or 404 with a message naming the field ({@link BadRequestException}). Errors of
 * the servers map to statuses: invalid 400, overloaded 503 with {@code Retry-After}, timed out 504, a
 * failed batch 500, a stopped server 503. Every error body here is {@code {"error", "code", "field"?}}; {@code /v2}
 * answers the protocol's {@code {"error"}}.
 */
public final class ServingRoutes extends AllDirectives {
  /** Prometheus's text exposition format 0.0.4. */
  private static final ContentType PROMETHEUS = ContentTypes.parse("text/plain; version=0.0.4; charset=utf-8");
  private static final ContentType EVENT_STREAM = ContentTypes.create(MediaTypes.TEXT_EVENT_STREAM);
  private static final long STRICT_TIMEOUT_MS = 30_000;
  private static final int DEFAULT_MAX_TOKENS = 16;
  /** JSON values of a request beyond its data: the objects, lists and single fields around it (generous). */
  private static final long STRUCTURE_VALUES = 32;

  private final ActorSystem<?> system;
  private final HttpSettings settings;
  private final PrometheusMeterRegistry registry;
  private final Map<String, InferenceEndpoint> inference = new LinkedHashMap<>();
  private final Map<String, GenerationEndpoint> generation = new LinkedHashMap<>();
  private final Duration generationTimeout; // the generation servers' default timeout
  private final OpenInferenceRoutes openInference; // /v2: the Open Inference Protocol over the same model servers

  /**
   * Routes over {@code inference} and {@code generation} endpoints (names unique across both), with
   * {@code settings}; {@code /metrics} scrapes {@code registry} (give the servers the same registry).
   */
  public ServingRoutes(ActorSystem<?> system, HttpSettings settings, PrometheusMeterRegistry registry, List<InferenceEndpoint> inference,
      List<GenerationEndpoint> generation) {
    this.system = system;
    this.settings = settings;
    this.registry = registry;
    this.generationTimeout = GenerationSettings.create(system).defaultTimeout();
    Set<String> names = new HashSet<>();
    for (InferenceEndpoint e : inference) {
      if (!names.add(e.name())) {
        throw new InvalidArgumentException("two endpoints are named '" + e.name() + "': give each model its own name");
      }
      this.inference.put(e.name(), e);
    }
    for (GenerationEndpoint e : generation) {
      if (!names.add(e.name())) {
        throw new InvalidArgumentException("two endpoints are named '" + e.name() + "': give each model its own name");
      }
      this.generation.put(e.name(), e);
    }
    this.openInference = new OpenInferenceRoutes(system, settings, inference);
  }

  /** The models served at {@code /v2} (the Open Inference Protocol), in order. */
  List<InferenceEndpoint> inferenceEndpoints() {
    return List.copyOf(inference.values());
  }

  /** The models served at {@code /v1/models/<name>/generate}, in order. */
  List<GenerationEndpoint> generationEndpoints() {
    return List.copyOf(generation.values());
  }

  /** The route tree. */
  public Route route() {
    return concat(
        openInference.route(),
        path("health", () -> get(() -> complete(json(StatusCodes.OK, g -> g.writeStringField("status", "ok"))))),
        path("ready", () -> get(() -> completeWithFuture(ready()))),
        path("metrics", () -> get(() -> complete(HttpResponse.create().withEntity(
            HttpEntities.create(PROMETHEUS, registry.scrape().getBytes(StandardCharsets.UTF_8)))))),
        // The listing of this API's own endpoints; GET /v1/models is OpenAI's list (OpenAiRoutes).
        path(PathMatchers.segment("v1").slash("endpoints"), () -> get(() -> complete(models()))),
        pathPrefix("v1", () -> pathPrefix("models", () -> concat(
            pathPrefix(PathMatchers.segment(), model -> concat(
                path("generate", () -> post(() -> withBody(settings.maxGenerateBodyBytes(), "max-generate-body-bytes",
                    (body, connection, timeout) -> generate(model, body, connection, timeout))))))))));
  }

  /**
   * Reads the whole body (at most {@code limit} bytes, the setting {@code key}: a larger one is 413 naming
   * it, at once when its Content-Length says so) and answers with what {@code handler} makes of it and of
   * the request's {@link ClientConnection} (null when not bound by {@link HttpServer}); every error mapped.
   */
  private Route withBody(long limit, String key, BodyHandler handler) {
    return optionalAttribute(ClientConnection.KEY, connection -> optionalHeaderValueByType(TimeoutAccess.class, access ->
        extractRequestEntity(entity -> extractMaterializer(materializer -> {
          RequestTimeout timeout = new RequestTimeout(access.map(TimeoutAccess::timeoutAccess).orElse(null));
          return completeWithFuture(entity.withSizeLimit(limit).toStrict(STRICT_TIMEOUT_MS, materializer)
              .thenCompose(strict -> handler.apply(strict.getData().toArray(), connection.orElse(null), timeout))
              .exceptionally(thrown -> error(thrown, limit, key)));
        }))));
  }

  /** What a route makes of a request's body, its client's connection (null: not known) and its HTTP timeout. */
  @FunctionalInterface
  private interface BodyHandler {
    CompletionStage<HttpResponse> apply(byte[] body, ClientConnection connection, RequestTimeout timeout);
  }

  /**
   * The HTTP timeout of one request (Pekko's {@code request-timeout}, 20 s by default), moved to follow the
   * request's own deadline: a server answers every request at its deadline (up to 24 h), so the HTTP layer
   * waits that long plus {@code request-timeout-margin}. If it fires even so (the server did not answer), it
   * cancels the request's work in its server and answers 504 with a JSON error. Does nothing when the
   * server-level timeout is off (infinite: no TimeoutAccess).
   */
  private final class RequestTimeout {
    /** The longest delay Pekko's scheduler can time (2^31 - 1 ticks of 10 ms). */
    private static final Duration LONGEST = Duration.ofSeconds(21_474_836);
    private final org.apache.pekko.http.javadsl.TimeoutAccess access; // null: no request-timeout
    private volatile HttpResponse answered; // the 504, once the timeout fired

    RequestTimeout(org.apache.pekko.http.javadsl.TimeoutAccess access) {
      this.access = access;
    }

    /**
     * Waits {@code deadline} (the request's) plus the margin for the answer; past it runs {@code cancel} and
     * answers 504 naming {@code model} and {@code requestId} (null: the request has no id of its own yet).
     */
    void follow(String model, String requestId, Duration deadline, Runnable cancel) {
      if (access == null) {
        return;
      }
      Duration wait = deadline.plus(settings.requestTimeoutMargin());
      if (wait.compareTo(LONGEST) > 0) {
        wait = LONGEST;
      }
      Duration waited = wait;
      access.update(wait, request -> {
        // Set before the cancel, whose own answer (an ended stream, say) may race this one to the client.
        answered = error(StatusCodes.GATEWAY_TIMEOUT, null, ErrorCode.DEADLINE_EXCEEDED, "model '" + model + "' did not answer "
            + (requestId == null ? "the request" : "request '" + requestId + "'") + " within " + waited.toMillis()
            + " ms (its deadline of " + deadline.toMillis() + " ms plus " + HttpSettings.ROOT + ".request-timeout-margin): the request was cancelled in its server");
        cancel.run();
        return answered;
      });
    }

    /** The 504 the timeout answered with, or null while it has not fired. */
    HttpResponse answered() {
      return answered;
    }
  }

  // ------------------------------------------------------------------------------------------ generate

  /**
   * Starts the generation; when its client's {@code connection} (null: not known) ends before the last
   * event, the events' stream is shut down, which stops its receiving actor: the server drops the request,
   * waiting or decoding.
   */
  private CompletionStage<HttpResponse> generate(String model, byte[] body, ClientConnection connection, RequestTimeout httpTimeout) {
    GenerationEndpoint ep = generation.get(model);
    if (ep == null) {
      return CompletableFuture.completedFuture(unknownModel(model, "generate"));
    }
    // tokens and stop_tokens hold at most a context each; the other fields are single values.
    JsonNode root = TensorJson.parseObject(body, 2L * ep.contextLength() + STRUCTURE_VALUES,
        "a generate request to model '" + model + "' holds");
    TensorJson.onlyFields(root, "", Set.of("tokens", "prompt", "max_tokens", "stop_tokens", "temperature", "top_k", "seed", "timeout_ms"));
    int[] prompt = prompt(root, ep);
    int maxTokens = (int) whole(root, "max_tokens", DEFAULT_MAX_TOKENS, 1, ep.contextLength());
    Set<Integer> stops = new HashSet<>();
    JsonNode stopNode = root.get("stop_tokens");
    if (stopNode != null) {
      for (int t : tokenList(stopNode, "stop_tokens", ep, 0)) {
        stops.add(t);
      }
    }
    double temperature = 0;
    JsonNode temp = root.get("temperature");
    if (temp != null) {
      double t = temp.asDouble();
      if (!temp.isNumber() || !(t >= 0) || t > 100 || (t > 0 && t < SamplingParams.MIN_TEMPERATURE)) {
        throw new BadRequestException("temperature", "expected a number from 0 (greedy) to 100, and none between 0 and "
            + SamplingParams.MIN_TEMPERATURE + " (dividing logits by less overflows their softmax), got " + temp
            + ": use 0 for greedy decoding, or at least " + SamplingParams.MIN_TEMPERATURE);
      }
      temperature = t;
    }
    int topK = (int) whole(root, "top_k", 0, 0, ep.vocabulary());
    long seed = whole(root, "seed", 0, Long.MIN_VALUE, Long.MAX_VALUE);
    Duration timeout = timeout(root, settings.maxRequestTimeout());
    // Serving's one sampler (lm's): the route's fields are a subset of SamplingParams, checked above.
    SamplingTokenSampler sampler = new SamplingTokenSampler(
        SamplingParams.defaults().withTemperature(temperature).withTopK(topK).withSeed(seed), prompt);

    Source<GenerationServer.Event, NotUsed> events = GenerationServer.events(ep.server(), prompt, maxTokens, stops, sampler, timeout);
    // The first event decides the status: a refusal or an invalid request is an HTTP error, a token starts the stream.
    Pair<Pair<CompletionStage<Done>, UniqueKillSwitch>, CompletionStage<Pair<List<GenerationServer.Event>,
        Source<GenerationServer.Event, NotUsed>>>> run = events
        .watchTermination(Keep.right())
        .viaMat(KillSwitches.single(), Keep.both())
        .prefixAndTail(1)
        .toMat(Sink.head(), Keep.both())
        .run(system);
    UniqueKillSwitch kill = run.first().second();
    if (connection != null) {
      // Completes the events (nobody reads them any more) and cancels their source; an abort would fail the
      // response stream, which Pekko HTTP logs as an error.
      connection.cancelOnClose(run.first().first(), kill::shutdown);
    }
    // Until its first event the request waits (for a slot, say) at most its deadline; an HTTP timeout past
    // that drops it from the server the same way (its place is freed, it never decodes for nobody).
    httpTimeout.follow(model, null, timeout != null ? timeout : generationTimeout, kill::shutdown);
    return run.second().thenApply(first -> stream(ep, prompt, first, httpTimeout));
  }

  private HttpResponse stream(GenerationEndpoint ep, int[] prompt, Pair<List<GenerationServer.Event>,
      Source<GenerationServer.Event, NotUsed>> first, RequestTimeout httpTimeout) {
    if (first.first().isEmpty() && httpTimeout.answered() != null) {
      return httpTimeout.answered(); // the HTTP timeout ended the events: the same answer, whichever reaches the client
    }
    if (first.first().isEmpty()) {
      return error(new ServingException(ErrorCode.UNAVAILABLE, ep.name(), null, "generation server '" + ep.name() + "' ended the "
          + "request without an answer: is it running?"));
    }
    GenerationServer.Event head = first.first().get(0);
    if (head instanceof GenerationServer.Failed f) {
      if (f.error() instanceof ServingException s && s.code() == ErrorCode.UNAVAILABLE && s.model() == null) {
        // GenerationServer.events found the server stopped: say which model, so the client knows what is down.
        return error(new ServingException(ErrorCode.UNAVAILABLE, ep.name(), s.requestId(), "model '" + ep.name()
            + "': its generation server has stopped; the request was not computed (restart the server, or use another model)", s));
      }
      return error(f.error());
    }
    // This response's: its stream is materialized once.
    TextCodec.Pieces text = ep.text() == null ? null : ep.text().pieces(prompt);
    Source<ByteString, NotUsed> sse = Source.single(head).concat(first.second()).map(e -> ByteString.fromString(sse(text, e)))
        .keepAlive(settings.sseKeepAlive(), () -> OpenAiResponses.KEEP_ALIVE);
    return HttpResponse.create().withEntity(HttpEntities.create(EVENT_STREAM, sse));
  }

  /**
   * The text of one generation's tokens, token by token: the bytes of a character split across tokens (a
   * byte-level tokenizer) are held back until the token that completes it, so no event carries half a
   * character (which JSON would turn into U+FFFD). Used by one stream at a time.
   */
  static final class TokenText implements TextCodec.Pieces {
    private final TextCodec codec;
    private byte[] pending = new byte[0];

    TokenText(TextCodec codec) {
      this.codec = codec;
    }

    @Override
    public String next(int token) {
      byte[] bytes = codec.decodeBytes(token);
      byte[] all = java.util.Arrays.copyOf(pending, pending.length + bytes.length);
      System.arraycopy(bytes, 0, all, pending.length, bytes.length);
      int whole = completePrefix(all);
      pending = java.util.Arrays.copyOfRange(all, whole, all.length);
      return new String(all, 0, whole, StandardCharsets.UTF_8);
    }

    @Override
    public String rest() {
      String rest = new String(pending, StandardCharsets.UTF_8);
      pending = new byte[0];
      return rest;
    }

    /** How many bytes of {@code b} are whole characters: all but an incomplete last one. */
    private static int completePrefix(byte[] b) {
      int i = b.length - 1;
      int back = 0;
      while (i >= 0 && back < 3 && (b[i] & 0xC0) == 0x80) { // continuation bytes back to the lead byte
        i--;
        back++;
      }
      if (i < 0) {
        return b.length; // only continuation bytes: not UTF-8 we could complete, send them (as U+FFFD)
      }
      int lead = b[i] & 0xFF;
      int need = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1;
      return b.length - i >= need ? b.length : i;
    }
  }

  /** One server-sent event (UTF-8 text, ends with a blank line); {@code text} renders token text (null: none). */
  private static String sse(TextCodec.Pieces text, GenerationServer.Event e) {
    String name;
    byte[] data;
    if (e instanceof GenerationServer.Token t) {
      name = "token";
      data = TensorJson.object(g -> {
        g.writeNumberField("index", t.index());
        g.writeNumberField("token", t.token());
        if (text != null) {
          g.writeStringField("text", text.next(t.token()));
        }
      });
    } else if (e instanceof GenerationServer.Finished f) {
      name = "done";
      data = TensorJson.object(g -> {
        g.writeStringField("reason", f.reason().name().toLowerCase(java.util.Locale.ROOT));
        g.writeNumberField("tokens", f.tokens());
        String rest = text == null ? "" : text.rest();
        if (!rest.isEmpty()) {
          g.writeStringField("text", rest); // the bytes of a character the generation never completed
        }
      });
    } else {
      XlaException x = ((GenerationServer.Failed) e).error();
      name = "error";
      data = TensorJson.object(g -> {
        g.writeNumberField("status", status(x).intValue());
        g.writeStringField("code", x.code().name());
        g.writeStringField("error", x.getMessage());
      });
    }
    return "event: " + name + "\ndata: " + OpenAiResponses.sseSafe(new String(data, StandardCharsets.UTF_8)) + "\n\n";
  }

  /** The prompt's tokens: {@code tokens} (ids), or {@code prompt} (text, when the model has a tokenizer). */
  private static int[] prompt(JsonNode root, GenerationEndpoint ep) {
    JsonNode tokens = root.get("tokens");
    JsonNode text = root.get("prompt");
    if ((tokens == null) == (text == null)) {
      throw new BadRequestException(tokens == null ? "tokens" : "prompt", "give either \"tokens\" (token ids) or \"prompt\" (text), "
          + (tokens == null ? "got neither" : "not both"));
    }
    int[] prompt;
    String field;
    if (tokens != null) {
      field = "tokens";
      prompt = tokenList(tokens, field, ep, 1);
    } else {
      field = "prompt";
      if (ep.text() == null) {
        throw new BadRequestException("prompt", "model '" + ep.name() + "' has no tokenizer: give \"tokens\", a list of token ids 0.."
            + (ep.vocabulary() - 1));
      }
      if (!text.isTextual()) {
        throw new BadRequestException("prompt", "expected a string, got " + TensorJson.kind(text));
      }
      prompt = ep.text().encode(text.asText());
    }
    if (prompt.length < 1 || prompt.length > ep.maxPromptLength()) {
      throw new BadRequestException(field, "model '" + ep.name() + "' takes prompts of 1.." + ep.maxPromptLength() + " tokens, got "
          + prompt.length);
    }
    return prompt;
  }

  /** A list of token ids at {@code field}, each in the vocabulary, at least {@code min} of them. */
  private static int[] tokenList(JsonNode node, String field, GenerationEndpoint ep, int min) {
    if (!node.isArray()) {
      throw new BadRequestException(field, "expected a list of token ids, got " + TensorJson.kind(node));
    }
    if (node.size() < min || node.size() > ep.contextLength()) {
      throw new BadRequestException(field, "expected " + min + ".." + ep.contextLength() + " token ids, got " + node.size());
    }
    int[] out = new int[node.size()];
    for (int i = 0; i < out.length; i++) {
      JsonNode t = node.get(i);
      if (!t.isIntegralNumber() || !t.canConvertToInt() || t.asInt() < 0 || t.asInt() >= ep.vocabulary()) {
        throw new BadRequestException(field + "[" + i + "]", "expected a token id 0.." + (ep.vocabulary() - 1) + " (the vocabulary of model '"
            + ep.name() + "'), got " + t);
      }
      out[i] = t.asInt();
    }
    return out;
  }

  /** The whole number at {@code field} of {@code root}, {@code dflt} when absent, refused outside {@code min..max}. */
  private static long whole(JsonNode root, String field, long dflt, long min, long max) {
    JsonNode n = root.get(field);
    if (n == null) {
      return dflt;
    }
    if (!n.isIntegralNumber() || !n.canConvertToLong() || n.asLong() < min || n.asLong() > max) {
      throw new BadRequestException(field, "expected a whole number from " + min + " to " + max + ", got " + n);
    }
    return n.asLong();
  }

  /** The request's {@code timeout_ms} (null when absent: the server's default), at most {@code max} (max-request-timeout). */
  private static Duration timeout(JsonNode root, Duration max) {
    JsonNode n = root.get("timeout_ms");
    if (n != null && n.isIntegralNumber() && n.canConvertToLong() && n.asLong() > max.toMillis()) {
      throw new BadRequestException("timeout_ms", "expected a deadline of 1 to " + max.toMillis() + " ms (" + HttpSettings.ROOT
          + ".max-request-timeout; raise it there for longer requests), got " + n.asLong());
    }
    return n == null ? null : Duration.ofMillis(whole(root, "timeout_ms", 0, 1, max.toMillis()));
  }

  // ------------------------------------------------------------------------------------------ models, ready

  private HttpResponse models() {
    return json(StatusCodes.OK, g -> {
      g.writeArrayFieldStart("models");
      for (InferenceEndpoint e : inference.values()) {
        g.writeStartObject();
        g.writeStringField("name", e.name());
        g.writeStringField("kind", "infer");
        g.writeStringField("url", "/v2/models/" + e.name() + "/infer");
        g.writeArrayFieldStart("inputs");
        List<String> names = OpenInferenceNames.inputs(e.inputNames());
        for (int i = 0; i < e.inputTypes().size(); i++) {
          InferenceTensorJson.writeMetadata(g, names.get(i), e.inputTypes().get(i));
        }
        g.writeEndArray();
        g.writeEndObject();
      }
      for (GenerationEndpoint e : generation.values()) {
        g.writeStartObject();
        g.writeStringField("name", e.name());
        g.writeStringField("kind", "generate");
        g.writeStringField("url", "/v1/models/" + e.name() + "/generate");
        g.writeNumberField("vocabulary", e.vocabulary());
        g.writeNumberField("max_prompt_tokens", e.maxPromptLength());
        g.writeNumberField("context", e.contextLength());
        g.writeBooleanField("text", e.text() != null);
        g.writeEndObject();
      }
      g.writeEndArray();
    });
  }

  /** 200 when every server answers its status in time and accepts requests; else 503 naming those that do not. */
  private CompletionStage<HttpResponse> ready() {
    Map<String, CompletableFuture<String>> checks = new LinkedHashMap<>();
    Duration wait = settings.readyTimeout();
    for (InferenceEndpoint e : inference.values()) {
      checks.put(e.name(), e.inference().notReady(wait).toCompletableFuture()
          .completeOnTimeout("no status within " + wait.toMillis() + " ms", wait.toMillis() + 1000, java.util.concurrent.TimeUnit.MILLISECONDS)
          .exceptionally(t -> "no status within " + wait.toMillis() + " ms"));
    }
    for (GenerationEndpoint e : generation.values()) {
      checks.put(e.name(), AskPattern.<GenerationServer.Command, GenerationServer.Status>ask(e.server(), GenerationServer.GetStatus::new,
              wait, system.scheduler()).toCompletableFuture()
          .thenApply(s -> (String) null).exceptionally(t -> "no status within " + wait.toMillis() + " ms"));
    }
    return CompletableFuture.allOf(checks.values().toArray(CompletableFuture[]::new)).thenApply(v -> {
      List<String> notReady = new ArrayList<>();
      checks.forEach((name, f) -> {
        String why = f.join();
        if (why != null) {
          notReady.add(name + ": " + why);
        }
      });
      return json(notReady.isEmpty() ? StatusCodes.OK : StatusCodes.SERVICE_UNAVAILABLE, g -> {
        g.writeBooleanField("ready", notReady.isEmpty());
        g.writeArrayFieldStart("models");
        for (String name : checks.keySet()) {
          g.writeString(name);
        }
        g.writeEndArray();
        if (!notReady.isEmpty()) {
          g.writeStringField("error", "not ready: " + String.join("; ", notReady));
        }
      });
    });
  }

  // ------------------------------------------------------------------------------------------ errors

  private HttpResponse unknownModel(String model, String kind) {
    List<String> known = new ArrayList<>((kind.equals("infer") ? inference : generation).keySet());
    String other = (kind.equals("infer") ? generation : inference).containsKey(model)
        ? " ('" + model + "' is served at " + (kind.equals("infer") ? "/v1/models/" + model + "/generate" : "/v2/models/" + model + "/infer") + ")"
        : "";
    return error(StatusCodes.NOT_FOUND, "model", ErrorCode.NOT_FOUND, "model: no model '" + model + "' to " + kind + other
        + "; models to " + kind + ": " + (known.isEmpty() ? "none" : String.join(", ", known)));
  }

  /** As {@link #error(Throwable)}, for a body read under {@code limit} bytes (setting {@code key}): 413 naming both. */
  private HttpResponse error(Throwable thrown, long limit, String key) {
    Throwable e = unwrapped(thrown);
    if (e instanceof EntityStreamSizeException size) {
      return error(StatusCodes.PAYLOAD_TOO_LARGE, "body", ErrorCode.INVALID_ARGUMENT, "body: larger than " + limit + " bytes, the limit"
          + " of this route (" + HttpSettings.ROOT + "." + key + "; raise it there to accept larger requests)"
          + (size.actualSize().isDefined() ? ": got " + size.actualSize().get() + " bytes" : ""));
    }
    return error(e);
  }

  private static Throwable unwrapped(Throwable thrown) {
    Throwable e = thrown;
    while ((e instanceof CompletionException || e instanceof ExecutionException) && e.getCause() != null) {
      e = e.getCause();
    }
    return e;
  }

  /** The response for a failed request: the status its error maps to and {@code {"error", "code", "field"?}}. */
  private HttpResponse error(Throwable thrown) {
    Throwable e = unwrapped(thrown);
    if (e instanceof TensorJson.TooManyValues) {
      BadRequestException b = (BadRequestException) e;
      return error(StatusCodes.PAYLOAD_TOO_LARGE, b.field(), b.code(), b.getMessage());
    }
    if (e instanceof XlaException x) {
      if (x.code() == ErrorCode.CANCELLED) { // cancelled in the server as its client went away: expected, logged as such
        system.log().debug("request cancelled: {}", x.getMessage());
      }
      HttpResponse r = error(status(x), e instanceof BadRequestException b ? b.field() : null, x.code(), x.getMessage());
      return x instanceof OverloadedException ? r.addHeader(RetryAfter.create(1L)) : r;
    }
    if (e instanceof java.util.concurrent.CancellationException) { // the client went away: expected, nobody reads this answer
      system.log().debug("request cancelled: {}", e.toString());
      return error(StatusCodes.SERVICE_UNAVAILABLE, null, ErrorCode.CANCELLED, "the request was cancelled");
    }
    system.log().warn("request failed unexpectedly", e);
    return error(StatusCodes.INTERNAL_SERVER_ERROR, null, ErrorCode.INTERNAL, "internal error: " + e);
  }

  private static HttpResponse error(StatusCode status, String field, ErrorCode code, String message) {
    return json(status, g -> {
      g.writeStringField("error", message);
      g.writeStringField("code", code.name());
      if (field != null) {
        g.writeStringField("field", field);
      }
    });
  }

  /** The settings these routes were made with. */
  HttpSettings settings() {
    return settings;
  }

  /** The HTTP status of a serving error. */
  static StatusCode status(XlaException x) {
    if (x instanceof InvalidArgumentException || x.code() == ErrorCode.INVALID_ARGUMENT) {
      return StatusCodes.BAD_REQUEST;
    }
    if (x instanceof OverloadedException || x.code() == ErrorCode.RESOURCE_EXHAUSTED) {
      return StatusCodes.SERVICE_UNAVAILABLE;
    }
    if (x instanceof RequestTimeoutException || x.code() == ErrorCode.DEADLINE_EXCEEDED) {
      return StatusCodes.GATEWAY_TIMEOUT;
    }
    if (x instanceof BatchFailedException) {
      return StatusCodes.INTERNAL_SERVER_ERROR;
    }
    if (x.code() == ErrorCode.UNAVAILABLE || x.code() == ErrorCode.CANCELLED) {
      return StatusCodes.SERVICE_UNAVAILABLE;
    }
    return StatusCodes.INTERNAL_SERVER_ERROR;
  }

  private static HttpResponse json(StatusCode status, TensorJson.JsonBody body) {
    HttpEntity.Strict entity = HttpEntities.create(ContentTypes.APPLICATION_JSON, TensorJson.object(body));
    return HttpResponse.create().withStatus(status).withEntity(entity);
  }
}
