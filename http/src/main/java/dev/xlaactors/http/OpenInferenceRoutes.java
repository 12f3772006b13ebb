package dev.xlaactors.http;

import com.fasterxml.jackson.databind.JsonNode;
import dev.xlaactors.actors.serve.ModelServer;
import dev.xlaactors.actors.serve.ServeSettings;
import dev.xlaactors.error.ErrorCode;
import dev.xlaactors.error.InvalidArgumentException;
import dev.xlaactors.error.XlaException;
import dev.xlaactors.runtime.HostTensor;
import dev.xlaactors.runtime.TensorType;
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
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.http.javadsl.model.ContentTypes;
import org.apache.pekko.http.javadsl.model.HttpEntities;
import org.apache.pekko.http.javadsl.model.HttpResponse;
import org.apache.pekko.http.javadsl.model.StatusCode;
import org.apache.pekko.http.javadsl.model.StatusCodes;
import org.apache.pekko.http.javadsl.model.headers.RawHeader;
import org.apache.pekko.http.javadsl.model.headers.RetryAfter;
import org.apache.pekko.http.javadsl.model.headers.TimeoutAccess;
import org.apache.pekko.http.javadsl.server.AllDirectives;
import org.apache.pekko.http.javadsl.server.PathMatchers;
import org.apache.pekko.http.javadsl.server.Route;
import org.apache.pekko.http.scaladsl.model.EntityStreamSizeException;

/**
 * The Open Inference Protocol (KServe v2, as Triton and KServe speak it over HTTP/JSON) over the
 * {@link TensorInference} of {@link InferenceEndpoint}s (a model server of this JVM, or the cluster node that
 * holds the model):
 * <ul>
 *   <li>{@code GET /v2}: server metadata {@code {"name", "version", "extensions": []}};
 *   <li>{@code GET /v2/health/live}: 200 while the process serves HTTP; {@code GET /v2/health/ready}: 200
 *       when every model server answers its status within {@code xla-actors.http.ready-timeout} and accepts
 *       requests, else 400 (the protocol's "4xx is false") naming those that do not;
 *   <li>{@code GET /v2/models/<m>[/versions/1]}: model metadata {@code {"name", "versions": ["1"],
 *       "platform": "xla", "inputs", "outputs"}}, each tensor {@code {"name", "datatype", "shape"}} with -1
 *       for the batch dimension; {@code GET /v2/models/<m>[/versions/1]/ready}: 200 or 400;
 *   <li>{@code POST /v2/models/<m>[/versions/1]/infer}: {@code {"id"?, "parameters"?: {"timeout"?: µs},
 *       "inputs": [{"name", "shape", "datatype", "parameters"?, "data"}], "outputs"?: [{"name",
 *       "parameters"?}]}} answered {@code {"model_name", "model_version", "id"?, "parameters", "outputs":
 *       [{"name", "datatype", "shape", "data"}]}}.
 * </ul>
 *
 * <p>Batching: every input's first dimension is the batch. A request of n rows is n rows to the endpoint's
 * {@link TensorInference} (a {@link ModelServer} batches them with everyone else's; n = 1 is one request), answered as one
 * response whose outputs stack the n answers in order; if any row fails the others are cancelled and the
 * request is answered with that failure. The response's {@code parameters} say how the rows ran ({@code
 * rows}, the largest {@code batch_size} and {@code requests_in_batch}, the longest {@code queued_ms} and
 * {@code computed_ms}).
 *
 * <p>Names: inputs and outputs are named after the exported function's paths ({@link OpenInferenceNames}).
 * Outputs are all answered, in the model's order, unless {@code outputs} selects some (in its order). Data
 * are JSON or, with the binary tensor data extension ({@code Inference-Header-Content-Length}, tritonclient's
 * default), raw bytes after the JSON, in both directions: an output is binary when its {@code binary_data}
 * says so, else when the request's {@code binary_data_output} does. Shared memory is refused with 400.
 * Request parameters: {@code timeout} (microseconds, tritonclient's {@code timeout=}) is the rows' deadline;
 * {@code binary_data_output} as said; {@code priority} is accepted and has no effect; any other is refused.
 *
 * <p>Limits and errors: a body over {@code xla-actors.http.max-body-bytes} is 413, and so is one holding
 * more JSON values than the model's rows can; every error answers {@code {"error": "..."}}, the message
 * naming the field, expected vs got: 400 for a bad request, 404 for an unknown model or version, 503 (with
 * {@code Retry-After}) when the server is overloaded or stopped, 504 past the deadline, 500 for a failed
 * batch. As on {@code /v1}, a client that closes its connection cancels its rows, and the HTTP layer waits
 * for the answer up to the deadline plus {@code request-timeout-margin}. Thread-safe.
 */
public final class OpenInferenceRoutes extends AllDirectives {
  /** The only version of every model: models are served as loaded, one at a time. */
  static final String VERSION = "1";
  private static final long STRICT_TIMEOUT_MS = 30_000;
  /** JSON values of a request beyond its data: the objects, lists and single fields around it (generous). */
  private static final long STRUCTURE_VALUES = 64;
  /** The binary tensor data extension's header: the length of the JSON that starts the body. */
  static final String HEADER_LENGTH = "Inference-Header-Content-Length";
  private static final Set<String> REQUEST_PARAMETERS = Set.of("timeout", "binary_data_output", "priority");

  private final ActorSystem<?> system;
  private final HttpSettings settings;
  private final ServeSettings serveSettings;
  private final Map<String, Served> models = new LinkedHashMap<>();

  /** An endpoint and its tensors' protocol names. */
  private record Served(InferenceEndpoint endpoint, List<String> inputs, List<String> outputs) {}

  /**
   * Routes over {@code endpoints} (names unique) with {@code settings}. An endpoint with an input or output
   * whose dtype the protocol has no datatype for (complex, 8-bit floats) is refused here, naming it.
   */
  public OpenInferenceRoutes(ActorSystem<?> system, HttpSettings settings, List<InferenceEndpoint> endpoints) {
    this.system = system;
    this.settings = settings;
    this.serveSettings = ServeSettings.create(system);
    for (InferenceEndpoint e : endpoints) {
      List<TensorType> all = new ArrayList<>(e.inputTypes());
      all.addAll(e.outputTypes());
      for (TensorType t : all) {
        if (!InferenceTensorJson.hasDatatype(t.dtype())) {
          throw new InvalidArgumentException("model '" + e.name() + "' has a tensor of type " + t + ", which the Open Inference "
              + "Protocol has no datatype for (BOOL, INT8..INT64, UINT8..UINT64, FP16, BF16, FP32, FP64)");
        }
      }
      Served s = new Served(e, OpenInferenceNames.inputs(e.inputNames()), OpenInferenceNames.outputs(e.outputPaths(), e.outputTypes().size()));
      if (models.put(e.name(), s) != null) {
        throw new InvalidArgumentException("two endpoints are named '" + e.name() + "': give each model its own name");
      }
    }
  }

  /** The route tree, all under {@code /v2}. */
  public Route route() {
    return pathPrefix("v2", () -> concat(
        pathEnd(() -> get(() -> complete(serverMetadata()))),
        pathPrefix("health", () -> concat(
            path("live", () -> get(() -> complete(json(StatusCodes.OK, g -> g.writeBooleanField("live", true))))),
            path("ready", () -> get(() -> completeWithFuture(serverReady()))))),
        pathPrefix("models", () -> pathPrefix(PathMatchers.segment(), model -> concat(
            modelRoutes(model, null),
            pathPrefix("versions", () -> pathPrefix(PathMatchers.segment(), version -> modelRoutes(model, version))))))));
  }

  /** Metadata, readiness and inference of {@code model} at {@code version} (null: none named). */
  private Route modelRoutes(String model, String version) {
    return concat(
        pathEnd(() -> get(() -> complete(known(model, version, s -> modelMetadata(s))))),
        path("ready", () -> get(() -> completeWithFuture(modelReady(model, version)))),
        path("infer", () -> post(() -> inferRoute(model, version))));
  }

  // ------------------------------------------------------------------------------------------ metadata, health

  private HttpResponse serverMetadata() {
    String version = OpenInferenceRoutes.class.getPackage().getImplementationVersion();
    return json(StatusCodes.OK, g -> {
      g.writeStringField("name", "xla-actors");
      g.writeStringField("version", version != null ? version : "development");
      g.writeArrayFieldStart("extensions");
      g.writeString("binary_tensor_data");
      g.writeEndArray();
    });
  }

  /** What {@code answer} makes of the model, or 404 when there is no such model or version. */
  private HttpResponse known(String model, String version, java.util.function.Function<Served, HttpResponse> answer) {
    Served s = models.get(model);
    if (s == null) {
      return error(StatusCodes.NOT_FOUND, "no model '" + model + "'; models: " + (models.isEmpty() ? "none" : String.join(", ", models.keySet())));
    }
    if (version != null && !version.equals(VERSION)) {
      return error(StatusCodes.NOT_FOUND, "model '" + model + "' has no version '" + version + "'; its versions: " + VERSION);
    }
    return answer.apply(s);
  }

  private HttpResponse modelMetadata(Served s) {
    InferenceEndpoint e = s.endpoint();
    return json(StatusCodes.OK, g -> {
      g.writeStringField("name", e.name());
      g.writeArrayFieldStart("versions");
      g.writeString(VERSION);
      g.writeEndArray();
      g.writeStringField("platform", "xla");
      g.writeArrayFieldStart("inputs");
      for (int i = 0; i < e.inputTypes().size(); i++) {
        InferenceTensorJson.writeMetadata(g, s.inputs().get(i), e.inputTypes().get(i));
      }
      g.writeEndArray();
      g.writeArrayFieldStart("outputs");
      for (int i = 0; i < e.outputTypes().size(); i++) {
        InferenceTensorJson.writeMetadata(g, s.outputs().get(i), e.outputTypes().get(i));
      }
      g.writeEndArray();
    });
  }

  /** Null when the endpoint's inference answers that it computes rows, within the ready timeout; else why not. */
  private CompletableFuture<String> notReady(InferenceEndpoint e) {
    Duration wait = settings.readyTimeout();
    return e.inference().notReady(wait).toCompletableFuture()
        .completeOnTimeout("no status within " + wait.toMillis() + " ms", wait.toMillis() + 1000, java.util.concurrent.TimeUnit.MILLISECONDS)
        .exceptionally(t -> "no status within " + wait.toMillis() + " ms");
  }

  private CompletionStage<HttpResponse> serverReady() {
    Map<String, CompletableFuture<String>> checks = new LinkedHashMap<>();
    models.forEach((name, s) -> checks.put(name, notReady(s.endpoint())));
    return CompletableFuture.allOf(checks.values().toArray(CompletableFuture[]::new)).thenApply(v -> {
      List<String> not = new ArrayList<>();
      checks.forEach((name, f) -> {
        if (f.join() != null) {
          not.add(name + ": " + f.join());
        }
      });
      return not.isEmpty() ? json(StatusCodes.OK, g -> g.writeBooleanField("ready", true))
          : error(StatusCodes.BAD_REQUEST, "not ready: " + String.join("; ", not));
    });
  }

  private CompletionStage<HttpResponse> modelReady(String model, String version) {
    HttpResponse unknown = known(model, version, s -> null);
    if (unknown != null) {
      return CompletableFuture.completedFuture(unknown);
    }
    return notReady(models.get(model).endpoint()).thenApply(why -> why == null
        ? json(StatusCodes.OK, g -> {
          g.writeStringField("name", model);
          g.writeBooleanField("ready", true);
        })
        : error(StatusCodes.BAD_REQUEST, "model '" + model + "' is not ready: " + why));
  }

  // ------------------------------------------------------------------------------------------ infer

  /** Reads the body (at most {@code max-body-bytes}) and answers the inference; every error mapped. */
  private Route inferRoute(String model, String version) {
    return optionalAttribute(ClientConnection.KEY, connection -> optionalHeaderValueByType(TimeoutAccess.class, access ->
        optionalHeaderValueByName(HEADER_LENGTH, jsonLength ->
            extractRequestEntity(entity -> extractMaterializer(materializer -> {
              HttpDeadline deadline = new HttpDeadline(access.map(TimeoutAccess::timeoutAccess).orElse(null));
              long limit = settings.maxBodyBytes();
              return completeWithFuture(entity.withSizeLimit(limit).toStrict(STRICT_TIMEOUT_MS, materializer)
                  .thenCompose(strict -> infer(model, version, strict.getData().toArray(), jsonLength.orElse(null), connection.orElse(null),
                      deadline))
                  .exceptionally(thrown -> error(thrown, limit)));
            })))));
  }

  /**
   * Answers the request {@code body}: all JSON, or (the binary tensor data extension) {@code jsonLength}
   * bytes of JSON followed by the inputs' raw bytes.
   */
  private CompletionStage<HttpResponse> infer(String model, String version, byte[] body, String jsonLength, ClientConnection connection,
      HttpDeadline httpDeadline) {
    HttpResponse unknown = known(model, version, s -> null);
    if (unknown != null) {
      return CompletableFuture.completedFuture(unknown);
    }
    Served s = models.get(model);
    InferenceEndpoint ep = s.endpoint();
    ServeSettings.Model serve = serveSettings.forModel(model);
    int maxRows = serve.queueCapacity();
    long perRow = STRUCTURE_VALUES;
    for (TensorType t : ep.inputTypes()) {
      perRow += t.shape().elementCount() + t.shape().rank() + 1;
    }
    byte[] binary = new byte[0];
    if (jsonLength != null) {
      long n;
      try {
        n = Long.parseLong(jsonLength.strip());
      } catch (NumberFormatException e) {
        n = -1;
      }
      if (n < 0 || n > body.length) {
        throw new BadRequestException(HEADER_LENGTH, "expected the length of the request's JSON, 0.." + body.length + " (the body's), got '"
            + jsonLength + "'");
      }
      binary = java.util.Arrays.copyOfRange(body, (int) n, body.length);
      body = java.util.Arrays.copyOf(body, (int) n);
    }
    JsonNode root = TensorJson.parseObject(body, STRUCTURE_VALUES * (4 + ep.outputTypes().size()) + perRow * maxRows,
        "a request to model '" + model + "' of at most " + maxRows + " rows holds");
    TensorJson.onlyFields(root, "", Set.of("id", "parameters", "inputs", "outputs"));
    JsonNode idNode = root.get("id");
    if (idNode != null && !idNode.isTextual()) {
      throw new BadRequestException("id", "expected a string, got " + TensorJson.kind(idNode));
    }
    String id = idNode == null ? null : idNode.asText();
    RequestParameters parameters = requestParameters(root.get("parameters"), settings.maxRequestTimeout().toNanos() / 1000);
    Duration timeout = parameters.timeout();
    List<Selected> selected = selectedOutputs(root.get("outputs"), s, parameters.binaryOutput());
    List<List<HostTensor>> rows = InferenceTensorJson.rows(root.get("inputs"), model, s.inputs(), ep.inputTypes(), maxRows, binary);

    List<String> ids = new ArrayList<>();
    List<CompletableFuture<ModelServer.Prediction>> answers = new ArrayList<>();
    for (List<HostTensor> row : rows) {
      String rowId = ModelServer.newRequestId();
      ids.add(rowId);
      CompletableFuture<ModelServer.Prediction> answer = ep.inference().infer(rowId, row, timeout).toCompletableFuture();
      answers.add(answer);
      if (connection != null) { // after the ask, which has sent the Infer, so that the Cancel comes after it
        connection.cancelOnClose(answer, () -> ep.inference().cancel(rowId, "its HTTP client closed the connection"));
      }
    }
    Runnable cancelAll = () -> ids.forEach(rowId -> ep.inference().cancel(rowId, "another row of its request failed, "
        + "or the request was given up")); // ignored for rows already answered
    httpDeadline.follow(model, timeout != null ? timeout : serve.defaultTimeout(), cancelAll);

    // Fails at the first failed row (cancelling the others); else completes with every row's prediction.
    CompletableFuture<List<ModelServer.Prediction>> all = new CompletableFuture<>();
    AtomicInteger pending = new AtomicInteger(answers.size());
    for (CompletableFuture<ModelServer.Prediction> a : answers) {
      a.whenComplete((p, failure) -> {
        if (failure != null) {
          if (all.completeExceptionally(failure)) {
            cancelAll.run();
          }
        } else if (pending.decrementAndGet() == 0) {
          all.complete(answers.stream().map(CompletableFuture::join).toList());
        }
      });
    }
    // Once every row has its answer: close the inputs and, when the request failed, the outputs of the rows
    // no response will carry. Chained on `all`, so that its outcome is known here.
    all.whenComplete((predictions, failure) -> CompletableFuture.allOf(answers.toArray(CompletableFuture[]::new)).whenComplete((v, f) -> {
      rows.forEach(row -> row.forEach(HostTensor::close));
      if (failure != null) {
        answers.stream().filter(a -> !a.isCompletedExceptionally()).forEach(a -> a.join().outputs().forEach(HostTensor::close));
      }
    }));
    return all.thenApply(predictions -> response(s, id, selected, predictions));
  }

  /** A request's parameters: its deadline (null: the server's default), whether outputs are binary unless they say. */
  private record RequestParameters(Duration timeout, boolean binaryOutput) {}

  /** An output asked for: its position among the model's, and whether its data go binary. */
  private record Selected(int output, boolean binary) {}

  /** The request's {@code parameters}: {@code timeout} (µs) and {@code binary_data_output}. */
  private static RequestParameters requestParameters(JsonNode p, long maxTimeoutMicros) {
    if (p == null) {
      return new RequestParameters(null, false);
    }
    if (!p.isObject()) {
      throw new BadRequestException("parameters", "expected an object, got " + TensorJson.kind(p));
    }
    for (var it = p.fieldNames(); it.hasNext(); ) {
      String name = it.next();
      if (!REQUEST_PARAMETERS.contains(name)) {
        throw new BadRequestException("parameters." + name, "not supported; parameters this server takes: timeout (microseconds), "
            + "binary_data_output (true: outputs binary unless they say) and priority (no effect)");
      }
    }
    boolean binary = bool(p, "binary_data_output", "parameters.binary_data_output", false);
    JsonNode t = p.get("timeout");
    if (t == null) {
      return new RequestParameters(null, binary);
    }
    if (!t.isIntegralNumber() || !t.canConvertToLong() || t.asLong() < 1 || t.asLong() > maxTimeoutMicros) {
      throw new BadRequestException("parameters.timeout", "expected the request's deadline in microseconds, 1 to " + maxTimeoutMicros
          + " (" + HttpSettings.ROOT + ".max-request-timeout), got " + t);
    }
    return new RequestParameters(Duration.ofNanos(Math.multiplyExact(t.asLong(), 1000L)), binary);
  }

  /** The boolean {@code name} of {@code p} (at {@code path}), {@code dflt} when absent. */
  private static boolean bool(JsonNode p, String name, String path, boolean dflt) {
    JsonNode b = p.get(name);
    if (b == null) {
      return dflt;
    }
    if (!b.isBoolean()) {
      throw new BadRequestException(path, "expected true or false, got " + b);
    }
    return b.asBoolean();
  }

  /**
   * The outputs the request asks for, in its order (all, in the model's order, when it names none), binary
   * when their {@code binary_data} says so, else as {@code binaryOutput} (the request's {@code binary_data_output}).
   */
  private static List<Selected> selectedOutputs(JsonNode outputs, Served s, boolean binaryOutput) {
    List<Selected> all = new ArrayList<>();
    if (outputs == null) {
      for (int i = 0; i < s.outputs().size(); i++) {
        all.add(new Selected(i, binaryOutput));
      }
      return all;
    }
    if (!outputs.isArray()) {
      throw new BadRequestException("outputs", "expected a list of {\"name\"}, got " + TensorJson.kind(outputs));
    }
    Set<String> seen = new HashSet<>();
    for (int i = 0; i < outputs.size(); i++) {
      String path = "outputs[" + i + "]";
      JsonNode o = outputs.get(i);
      if (!o.isObject()) {
        throw new BadRequestException(path, "expected {\"name\"}, got " + TensorJson.kind(o));
      }
      TensorJson.onlyFields(o, path, Set.of("name", "parameters"));
      JsonNode n = o.get("name");
      int at = n != null && n.isTextual() ? s.outputs().indexOf(n.asText()) : -1;
      if (at < 0) {
        throw new BadRequestException(path + ".name", "model '" + s.endpoint().name() + "' has no output " + n + "; its outputs: "
            + s.outputs());
      }
      if (!seen.add(n.asText())) {
        throw new BadRequestException(path + ".name", "output '" + n.asText() + "' is asked twice");
      }
      JsonNode p = o.get("parameters");
      boolean binary = binaryOutput;
      if (p != null) {
        if (!p.isObject()) {
          throw new BadRequestException(path + ".parameters", "expected an object, got " + TensorJson.kind(p));
        }
        for (var it = p.fieldNames(); it.hasNext(); ) {
          String name = it.next();
          if (!name.equals("binary_data")) {
            throw new BadRequestException(path + ".parameters." + name, "not supported; outputs take binary_data only");
          }
        }
        binary = bool(p, "binary_data", path + ".parameters.binary_data", binaryOutput);
      }
      all.add(new Selected(at, binary));
    }
    return all;
  }

  /**
   * The answer: JSON, or (when an output goes binary) the JSON followed by the binary outputs' bytes, its
   * length in {@code Inference-Header-Content-Length}.
   */
  private static HttpResponse response(Served s, String id, List<Selected> selected, List<ModelServer.Prediction> predictions) {
    try {
      java.io.ByteArrayOutputStream binary = new java.io.ByteArrayOutputStream();
      byte[] json = TensorJson.object(g -> {
        g.writeStringField("model_name", s.endpoint().name());
        g.writeStringField("model_version", VERSION);
        if (id != null) {
          g.writeStringField("id", id);
        }
        g.writeObjectFieldStart("parameters");
        g.writeNumberField("rows", predictions.size());
        g.writeNumberField("batch_size", predictions.stream().mapToInt(ModelServer.Prediction::batchSize).max().orElse(0));
        g.writeNumberField("requests_in_batch", predictions.stream().mapToInt(ModelServer.Prediction::requestsInBatch).max().orElse(0));
        g.writeNumberField("queued_ms", predictions.stream().mapToDouble(p -> p.queued().toNanos() / 1e6).max().orElse(0));
        g.writeNumberField("computed_ms", predictions.stream().mapToDouble(p -> p.computed().toNanos() / 1e6).max().orElse(0));
        g.writeEndObject();
        g.writeArrayFieldStart("outputs");
        for (Selected o : selected) {
          List<HostTensor> rows = new ArrayList<>();
          for (ModelServer.Prediction p : predictions) {
            rows.add(p.outputs().get(o.output()));
          }
          InferenceTensorJson.write(g, s.outputs().get(o.output()), rows, o.binary() ? binary : null);
        }
        g.writeEndArray();
      });
      if (selected.stream().noneMatch(Selected::binary)) {
        return HttpResponse.create().withEntity(HttpEntities.create(ContentTypes.APPLICATION_JSON, json));
      }
      byte[] all = java.util.Arrays.copyOf(json, json.length + binary.size());
      System.arraycopy(binary.toByteArray(), 0, all, json.length, binary.size());
      return HttpResponse.create().addHeader(RawHeader.create(HEADER_LENGTH, Integer.toString(json.length)))
          .withEntity(HttpEntities.create(ContentTypes.APPLICATION_OCTET_STREAM, all));
    } finally {
      predictions.forEach(p -> p.outputs().forEach(HostTensor::close));
    }
  }

  /**
   * The HTTP timeout of one request, moved to follow the request's deadline (as on {@code /v1}): the server
   * answers at the deadline, so this fires only for one that does not; then it cancels the rows and answers
   * 504. Does nothing when Pekko's request-timeout is off.
   */
  private final class HttpDeadline {
    /** The longest delay Pekko's scheduler can time (2^31 - 1 ticks of 10 ms). */
    private static final Duration LONGEST = Duration.ofSeconds(21_474_836);
    private final org.apache.pekko.http.javadsl.TimeoutAccess access; // null: no request-timeout

    HttpDeadline(org.apache.pekko.http.javadsl.TimeoutAccess access) {
      this.access = access;
    }

    void follow(String model, Duration deadline, Runnable cancel) {
      if (access == null) {
        return;
      }
      Duration wait = deadline.plus(settings.requestTimeoutMargin());
      Duration waited = wait.compareTo(LONGEST) > 0 ? LONGEST : wait;
      access.update(waited, request -> {
        cancel.run();
        return error(StatusCodes.GATEWAY_TIMEOUT, "model '" + model + "' did not answer within " + waited.toMillis() + " ms (its deadline of "
            + deadline.toMillis() + " ms plus " + HttpSettings.ROOT + ".request-timeout-margin): the request was cancelled in its server");
      });
    }
  }

  // ------------------------------------------------------------------------------------------ errors

  /** The response for a failed request whose body was read under {@code limit} bytes. */
  private HttpResponse error(Throwable thrown, long limit) {
    Throwable e = thrown;
    while ((e instanceof CompletionException || e instanceof ExecutionException) && e.getCause() != null) {
      e = e.getCause();
    }
    if (e instanceof EntityStreamSizeException size) {
      return error(StatusCodes.PAYLOAD_TOO_LARGE, "body: larger than " + limit + " bytes, the limit of this route (" + HttpSettings.ROOT
          + ".max-body-bytes; raise it there to accept larger requests)" + (size.actualSize().isDefined() ? ": got "
          + size.actualSize().get() + " bytes" : ""));
    }
    if (e instanceof TensorJson.TooManyValues) {
      return error(StatusCodes.PAYLOAD_TOO_LARGE, e.getMessage());
    }
    if (e instanceof XlaException x) {
      if (x.code() == ErrorCode.CANCELLED) { // cancelled in the server as its client went away: expected, logged as such
        system.log().debug("Open Inference request cancelled: {}", x.getMessage());
      }
      HttpResponse r = error(ServingRoutes.status(x), x.getMessage());
      return ServingRoutes.status(x) == StatusCodes.SERVICE_UNAVAILABLE && x.code() == ErrorCode.RESOURCE_EXHAUSTED
          ? r.addHeader(RetryAfter.create(1L)) : r;
    }
    if (e instanceof java.util.concurrent.CancellationException) { // the client went away: expected, nobody reads this answer
      system.log().debug("Open Inference request cancelled: {}", e.toString());
      return error(StatusCodes.SERVICE_UNAVAILABLE, "the request was cancelled");
    }
    system.log().warn("Open Inference request failed unexpectedly", e);
    return error(StatusCodes.INTERNAL_SERVER_ERROR, "internal error: " + e);
  }

  /** The protocol's error body, {@code {"error": message}}. */
  private static HttpResponse error(StatusCode status, String message) {
    return json(status, g -> g.writeStringField("error", message));
  }

  private static HttpResponse json(StatusCode status, TensorJson.JsonBody body) {
    return HttpResponse.create().withStatus(status).withEntity(HttpEntities.create(ContentTypes.APPLICATION_JSON, TensorJson.object(body)));
  }
}
