package dev.xlaactors.http;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.xlaactors.lm.sampling.SamplingParams;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import org.apache.pekko.http.javadsl.model.ContentTypes;
import org.apache.pekko.http.javadsl.model.HttpEntities;
import org.apache.pekko.http.javadsl.model.HttpResponse;
import org.apache.pekko.http.javadsl.server.AllDirectives;
import org.apache.pekko.http.javadsl.server.Route;

/**
 * The OpenAPI 3.0 document of every route {@link ServingRoutes} and {@link OpenAiRoutes} serve, made from
 * the models they serve (their names are the enums of the path parameters and {@code model} fields), and
 * served at {@code GET /openapi.json} by {@link #route()}. Written by hand as data, beside the routes it
 * describes: request bodies with their required fields, types and ranges as the routes check them;
 * responses with every status a route answers and its body, the error shapes included (ours
 * {@code {"error", "code", "field"?}}, OpenAI's {@code {"error": {...}}}, the Open Inference Protocol's
 * {@code {"error"}}); streams as {@code text/event-stream}. {@code OpenApiDocumentTest} checks that every
 * route of the tree is in it and nothing else; {@code bench/run.sh serve-fuzz} checks the live server
 * against it with schemathesis. Immutable.
 */
public final class OpenApiDocument extends AllDirectives {
  private static final JsonNodeFactory F = JsonNodeFactory.instance;
  private static final String JSON = "application/json";
  private static final String OURS = "#/components/schemas/Error";
  private static final String OPENAI = "#/components/schemas/OpenAiError";
  private static final String V2 = "#/components/schemas/InferenceError";

  private final ObjectNode document;
  private final byte[] bytes;

  private OpenApiDocument(ObjectNode document) {
    this.document = document;
    try {
      this.bytes = TensorJson.MAPPER.writeValueAsBytes(document);
    } catch (com.fasterxml.jackson.core.JsonProcessingException e) {
      throw new IllegalStateException("the OpenAPI document does not serialize: " + e.getMessage(), e); // a tree of plain nodes always does
    }
  }

  /**
   * The document of {@code serving}'s and {@code openAi}'s routes over the models they serve: the generate
   * route's limits are the largest of its models' (a request within them may still be too long for the
   * model it names: 400), and each operation on a model has an example request that the first model
   * answers with 200 (schemathesis's examples phase sends them).
   */
  public static OpenApiDocument of(ServingRoutes serving, OpenAiRoutes openAi) {
    List<InferenceEndpoint> inference = serving.inferenceEndpoints();
    List<GenerationEndpoint> generation = serving.generationEndpoints();
    ObjectNode doc = tree(inference.stream().map(InferenceEndpoint::name).toList(), generation.stream().map(GenerationEndpoint::name).toList(),
        openAi.completionModels(), openAi.chatModels(), openAi.embeddingModels());
    ObjectNode paths = (ObjectNode) doc.get("paths");
    if (!generation.isEmpty()) {
      int vocabulary = generation.stream().mapToInt(GenerationEndpoint::vocabulary).max().orElseThrow();
      int prompt = generation.stream().mapToInt(GenerationEndpoint::maxPromptLength).max().orElseThrow();
      int context = generation.stream().mapToInt(GenerationEndpoint::contextLength).max().orElseThrow();
      ObjectNode generate = (ObjectNode) paths.at("/~1v1~1models~1{model}~1generate/post");
      ObjectNode fields = (ObjectNode) generate.at("/requestBody/content/application~1json/schema/properties");
      ((ObjectNode) fields.get("tokens")).put("maxItems", prompt);
      ((ObjectNode) fields.get("tokens").get("items")).put("maximum", vocabulary - 1);
      ((ObjectNode) fields.get("stop_tokens")).put("maxItems", context);
      ((ObjectNode) fields.get("stop_tokens").get("items")).put("maximum", vocabulary - 1);
      ((ObjectNode) fields.get("max_tokens")).put("maximum", context);
      ((ObjectNode) fields.get("top_k")).put("maximum", vocabulary);
      example(generate, generation.get(0).name(), F.objectNode().put("prompt", "Hello").put("max_tokens", 4));
    }
    // Deadlines: at most xla-actors.http.max-request-timeout, as the routes check them.
    long maxTimeoutMs = serving.settings().maxRequestTimeout().toMillis();
    ((ObjectNode) paths.at("/~1v1~1models~1{model}~1generate/post/requestBody/content/application~1json/schema/properties/timeout_ms"))
        .put("maximum", maxTimeoutMs);
    for (String prefix : List.of("/~1v2~1models~1{model}", "/~1v2~1models~1{model}~1versions~1{version}")) {
      ((ObjectNode) paths.at(prefix + "~1infer/post/requestBody/content/application~1json/schema/properties/parameters/properties/timeout"))
          .put("maximum", maxTimeoutMs * 1000);
    }
    int vocabulary = openAi.largestVocabulary();
    if (vocabulary > 0) {
      for (String at : List.of("/~1v1~1completions/post", "/~1v1~1embeddings/post")) {
        ObjectNode body = (ObjectNode) paths.at(at + "/requestBody/content/application~1json/schema/properties");
        for (JsonNode form : body.get(at.contains("embeddings") ? "input" : "prompt").get("oneOf")) {
          JsonNode items = form.path("items"); // token ids: [id] or [[id]]; text has none
          JsonNode id = items.has("items") ? items.get("items") : items;
          if (id instanceof ObjectNode o && "integer".equals(o.path("type").asText())) {
            o.put("maximum", vocabulary - 1);
          }
        }
      }
      // vLLM's detokenize: ids of the model's vocabulary too (the largest one's: a smaller model's is a model limit).
      ((ObjectNode) paths.at("/~1detokenize/post/requestBody/content/application~1json/schema/properties/tokens/items"))
          .put("maximum", vocabulary - 1);
    }
    List<String> ids = new java.util.ArrayList<>(openAi.completionModels());
    ids.addAll(openAi.embeddingModels());
    if (!ids.isEmpty()) {
      example((ObjectNode) paths.at("/~1v1~1models~1{id}/get"), ids.get(0), null);
    }
    if (!openAi.completionModels().isEmpty()) {
      example((ObjectNode) paths.at("/~1v1~1completions/post"), null, F.objectNode().put("model", openAi.completionModels().get(0))
          .put("prompt", "Hello").put("max_tokens", 4));
    }
    if (!openAi.chatModels().isEmpty()) {
      ObjectNode chat = F.objectNode().put("model", openAi.chatModels().get(0)).put("max_tokens", 4);
      chat.putArray("messages").addObject().put("role", "user").put("content", "Hi");
      example((ObjectNode) paths.at("/~1v1~1chat~1completions/post"), null, chat);
    }
    if (!openAi.embeddingModels().isEmpty()) {
      ObjectNode dimensions = (ObjectNode) paths.at("/~1v1~1embeddings/post/requestBody/content/application~1json/schema/properties/dimensions");
      ArrayNode lengths = arr(openAi.embeddingDimensions().toArray());
      dimensions.set("enum", lengths.addNull()); // null: as absent (nullable)
      dimensions.put("description", "The length of the model's embeddings, which it cannot shorten (leave it out for the same).");
      example((ObjectNode) paths.at("/~1v1~1embeddings/post"), null, F.objectNode().put("model", openAi.embeddingModels().get(0))
          .put("input", "Hello"));
    }
    if (!inference.isEmpty()) {
      InferenceEndpoint first = inference.get(0);
      ObjectNode infer = F.objectNode();
      ArrayNode inputs = infer.putArray("inputs");
      List<String> names = OpenInferenceNames.inputs(first.inputNames());
      for (int i = 0; i < first.inputTypes().size(); i++) {
        dev.xlaactors.runtime.TensorType t = first.inputTypes().get(i);
        ObjectNode in = inputs.addObject().put("name", names.get(i)).put("datatype", InferenceTensorJson.datatype(t.dtype()));
        ArrayNode shape = in.putArray("shape").add(1);
        for (long dim : t.shape().dims()) {
          shape.add(dim);
        }
        ArrayNode data = in.putArray("data");
        for (long k = 0; k < t.shape().elementCount(); k++) {
          if (InferenceTensorJson.datatype(t.dtype()).equals("BOOL")) {
            data.add(false);
          } else {
            data.add(0);
          }
        }
      }
      for (String prefix : List.of("/v2/models/{model}", "/v2/models/{model}/versions/{version}")) {
        for (String op : List.of("", "/ready", "/infer")) {
          ObjectNode operation = (ObjectNode) paths.get(prefix + op).elements().next();
          example(operation, first.name(), op.equals("/infer") ? infer : null);
        }
      }
    }
    return new OpenApiDocument(doc);
  }

  /** Gives {@code operation}'s first path parameter the example {@code model} and its body the example {@code body} (null: leave). */
  private static void example(ObjectNode operation, String model, ObjectNode body) {
    if (model != null) {
      ((ObjectNode) operation.get("parameters").get(0)).put("example", model);
    }
    if (body != null) {
      ((ObjectNode) operation.at("/requestBody/content/application~1json")).set("example", body);
    }
  }

  /** The document over these model names: {@code /v2} models, generate models, completion, chat and embedding models. */
  static OpenApiDocument of(List<String> inference, List<String> generation, List<String> completion, List<String> chat,
      List<String> embedding) {
    return new OpenApiDocument(tree(inference, generation, completion, chat, embedding));
  }

  /** The document's tree over these model names, without limits or examples. */
  private static ObjectNode tree(List<String> inference, List<String> generation, List<String> completion, List<String> chat,
      List<String> embedding) {
    ObjectNode doc = F.objectNode();
    doc.put("openapi", "3.0.3");
    String version = OpenApiDocument.class.getPackage().getImplementationVersion();
    doc.putObject("info").put("title", "xla-actors serve").put("version", version != null ? version : "development")
        .put("description", "Model serving over HTTP: the project's own routes, the OpenAI API and the Open Inference Protocol "
            + "(KServe v2). See docs/http.md. A method a path does not list is answered 405 with an Allow header naming those it does. "
            + "Limits of a model that depend on its tokenizer or its tensors (a prompt's tokens against its context, /v2 inputs "
            + "against the model of the path) are stated in words and answered 400 naming the field.");
    ObjectNode paths = doc.putObject("paths");
    List<String> openAiModels = new java.util.ArrayList<>(completion);
    openAiModels.addAll(embedding);

    // ---- the project's own
    paths.putObject("/openapi.json").set("get", op("This document.", null,
        ok(JSON, obj(null)), null));
    paths.putObject("/health").set("get", op("The process answers.", null,
        ok(JSON, obj(req("status"), "status", str().set("enum", arr("ok")))), null));
    ObjectNode ready = obj(req("ready", "models"), "ready", bool(), "models", array(str()), "error", str());
    ObjectNode readyResponses = ok(JSON, ready);
    readyResponses.set("503", response("A server does not answer or does not accept requests; the error names it.", JSON, ready));
    paths.putObject("/ready").set("get", op("Every model server answers its status in time and accepts requests.", null,
        readyResponses, null));
    paths.putObject("/metrics").set("get", op("The meters in Prometheus's text format 0.0.4.", null,
        ok("text/plain", str()), null));
    ObjectNode endpoint = obj(req("name", "kind", "url"), "name", str(), "kind", str().set("enum", arr("infer", "generate")),
        "url", str(), "inputs", array(tensorMetadata()), "vocabulary", integer(), "max_prompt_tokens", integer(),
        "context", integer(), "text", bool());
    paths.putObject("/v1/endpoints").set("get", op("The served models, their routes, and their inputs or generation limits.", null,
        ok(JSON, obj(req("models"), "models", array(endpoint))), null));
    ObjectNode generate = closed(obj(null,
        "tokens", array(integer().put("minimum", 0)).put("minItems", 1),
        "prompt", str().put("minLength", 1).put("description", "Text, for a model with a tokenizer; give it or tokens. Its tokens "
            + "must fit the model's prompt length (GET /v1/endpoints: max_prompt_tokens): 400 when they do not."),
        "max_tokens", integer().put("minimum", 1),
        "stop_tokens", array(integer().put("minimum", 0)),
        "temperature", temperature(100),
        "top_k", integer().put("minimum", 0),
        "seed", integer().put("format", "int64"),
        "timeout_ms", integer().put("minimum", 1).put("maximum", 86_400_000L)));
    generate.put("description", "Exactly one of tokens and prompt.");
    generate.set("oneOf", arr(obj(req("tokens")), obj(req("prompt"))));
    paths.putObject("/v1/models/{model}/generate").set("post", op("Generates tokens, streamed as server-sent events: token events "
        + "{index, token, text?}, then one done {reason, tokens, text?} or error {status, code, error}.",
        List.of(pathParameter("model", generation)), stream(errors(OURS, 400, 404, 413, 500, 503, 504)), generate));

    // ---- OpenAI
    ObjectNode model = obj(req("id", "object", "created", "owned_by"), "id", str(), "object", str().set("enum", arr("model")),
        "created", integer(), "owned_by", str(), "max_model_len", integer());
    // vLLM's tokenizer routes, which lm-eval's local-completions reads before it scores. Their model is
    // optional only when one language model is served (the server then takes it); with more it is required.
    boolean modelRequired = completion.size() > 1;
    ObjectNode tokenizeRequest = nullExtras(obj(modelRequired ? req("model", "prompt") : req("prompt"), "model", modelName(completion),
        "prompt", str(), "add_special_tokens", nullable(bool())));
    ObjectNode tokenIds = array(integer().put("minimum", 0));
    ObjectNode tokenized = ok(JSON, obj(req("tokens", "count", "max_model_len"), "tokens", tokenIds, "count", integer(),
        "max_model_len", integer()));
    tokenized.setAll(errors(OPENAI, 400, 404));
    paths.putObject("/tokenize").set("post", op("vLLM's tokenize: the prompt's token ids (model optional when one language model is "
        + "served).", null, tokenized, tokenizeRequest));
    ObjectNode detokenizeRequest = nullExtras(obj(modelRequired ? req("model", "tokens") : req("tokens"), "model", modelName(completion),
        "tokens", tokenIds.deepCopy()));
    ObjectNode detokenized = ok(JSON, obj(req("prompt"), "prompt", str()));
    detokenized.setAll(errors(OPENAI, 400, 404));
    paths.putObject("/detokenize").set("post", op("vLLM's detokenize: the text of token ids.", null, detokenized, detokenizeRequest));
    ObjectNode info = ok(JSON, F.objectNode().put("type", "object"));
    info.setAll(errors(OPENAI, 400, 404));
    ObjectNode infoModel = F.objectNode().put("name", "model").put("in", "query").put("required", modelRequired);
    infoModel.set("schema", modelName(completion));
    paths.putObject("/tokenizer_info").set("get", op("vLLM's tokenizer_info: the model's tokenizer kind, special tokens and limits "
        + "(?model= optional when one language model is served).", List.of(infoModel), info, null));
    paths.putObject("/v1/models").set("get", op("The served models in OpenAI's list shape.", null,
        ok(JSON, obj(req("object", "data"), "object", str().set("enum", arr("list")), "data", array(model))), null));
    ObjectNode oneModel = ok(JSON, model);
    oneModel.setAll(errors(OPENAI, 404));
    paths.putObject("/v1/models/{id}").set("get", op("One served model.", List.of(pathParameter("id", openAiModels)), oneModel, null));
    ObjectNode completionRequest = sampling(completion);
    props(completionRequest).set("prompt", prompt(1));
    props(completionRequest).set("logprobs", nullable(integer().put("minimum", 0).put("maximum", 20)));
    props(completionRequest).set("echo", nullable(bool()));
    props(completionRequest).set("response_format", responseFormat());
    completionRequest.set("required", arr("model", "prompt"));
    completionRequest.put("description", "max_tokens 0 (the prompt scored, nothing generated) only with echo true. The prompt's tokens"
        + " and max_tokens must fit the model's context (GET /v1/models: max_model_len): 400 when they do not. response_format as on"
        + " chat completions (vLLM takes it here too).");
    completionRequest.set("allOf", arr(anyOf(obj(req("echo"), "echo", bool().set("enum", arr(true))),
        obj(null, "max_tokens", nullable(integer().put("minimum", 1)))), streamOptionsOnlyWithStream()));
    paths.putObject("/v1/completions").set("post", op("Continues prompts (OpenAI's completions); streamed when stream is true.", null,
        completions(completionResponse("text_completion", false)), completionRequest));
    ObjectNode chatRequest = sampling(chat);
    ObjectNode part = obj(req("type", "text"), "type", str().set("enum", arr("text")), "text", str());
    part.put("additionalProperties", false);
    ObjectNode content = F.objectNode();
    content.set("oneOf", arr(str(), array(part)));
    content.put("nullable", true);
    ObjectNode callFunction = closed(obj(req("name", "arguments"), "name", str(), "arguments", str().put("description",
        "The call's arguments: a JSON text (the template gets it as an object; a text that is not JSON stays text).")));
    ObjectNode call = closed(obj(req("id", "function"), "id", str(), "type", str().set("enum", arr("function")), "function",
        callFunction));
    // One schema per kind of message: an assistant's may hold tool_calls, a tool's must hold tool_call_id (400 naming it otherwise).
    ObjectNode message = oneOf(
        closed(obj(req("role"), "role", str().set("enum", arr("system", "developer", "user")), "content", content, "name",
            nullable(str()))),
        closed(obj(req("role"), "role", str().set("enum", arr("assistant")), "content", content.deepCopy(), "name", nullable(str()),
            "tool_calls", nullable(array(call)))),
        closed(obj(req("role", "tool_call_id"), "role", str().set("enum", arr("tool")), "content", content.deepCopy(), "name",
            nullable(str()), "tool_call_id", str())));
    props(chatRequest).set("messages", array(message).put("minItems", 1));
    props(chatRequest).set("max_tokens", nullable(integer().put("minimum", 1).put("maximum", Integer.MAX_VALUE)));
    props(chatRequest).set("max_completion_tokens", nullable(integer().put("minimum", 1).put("maximum", Integer.MAX_VALUE)));
    props(chatRequest).set("logprobs", nullable(bool()));
    props(chatRequest).set("top_logprobs", nullable(integer().put("minimum", 0).put("maximum", 20)));
    props(chatRequest).set("response_format", responseFormat());
    ObjectNode function = closed(obj(req("name"), "name", str().put("pattern", "^[A-Za-z0-9_-]{1,64}$"), "description", nullable(str()),
        "parameters", nullable(F.objectNode().put("type", "object").put("description", "The JSON schema of the arguments: the subset"
            + " of response_format's (other keywords are refused naming the tool and them).")), "strict", nullable(bool())));
    ObjectNode tool = closed(obj(req("type", "function"), "type", str().set("enum", arr("function")), "function", function));
    props(chatRequest).set("tools", nullable(array(tool).put("minItems", 1).put("maxItems", OpenAiRequest.MAX_TOOLS)
        .put("description", "The functions the model may call; names unique (400 naming the second otherwise).")));
    ObjectNode named = closed(obj(req("type", "function"), "type", str().set("enum", arr("function")), "function",
        closed(obj(req("name"), "name", str()))));
    props(chatRequest).set("tool_choice", nullable(oneOf(str().set("enum", arr("none", "auto", "required")), named)
        .put("description", "none, auto (the default with tools), required, or a function of tools by name; only with tools but"
            + " none (400 otherwise).")));
    props(chatRequest).set("parallel_tool_calls", nullable(bool()));
    chatRequest.set("required", arr("model", "messages"));
    chatRequest.put("description", "max_tokens and max_completion_tokens: one at most; top_logprobs above 0 needs logprobs true. The "
        + "rendered messages' tokens and max_tokens must fit the model's context (GET /v1/models: max_model_len): 400 when they do not. "
        + "response_format json_schema: the subset of JSON Schema in docs/http.md (other keywords are refused naming them).");
    ObjectNode withLogprobs = obj(req("logprobs"), "logprobs", bool().set("enum", arr(true)));
    ObjectNode withoutTop = obj(null, "top_logprobs", nullable(integer().put("maximum", 0)));
    ObjectNode notBoth = F.objectNode();
    notBoth.set("not", obj(req("max_tokens", "max_completion_tokens")));
    chatRequest.set("allOf", arr(anyOf(withLogprobs, withoutTop), notBoth, streamOptionsOnlyWithStream()));
    paths.putObject("/v1/chat/completions").set("post", op("Answers messages rendered by the model's chat template (OpenAI's chat "
        + "completions); streamed when stream is true.", null, completions(completionResponse("chat.completion", true)), chatRequest));
    ObjectNode embeddingsRequest = nullExtras(obj(null, "model", modelName(embedding), "input", prompt(0), // an encoder takes "" (its special tokens alone)
        // null in the enum too: OpenAPI 3.0 reads nullable as a type, which an enum without null still refuses
        "encoding_format", nullable(str().set("enum", arr("float", "base64").addNull())),
        "dimensions", nullable(integer().put("minimum", 1).put("maximum", 1 << 20)), "user", nullable(str())));
    embeddingsRequest.set("required", arr("model", "input"));
    ObjectNode embedding0 = F.objectNode();
    embedding0.set("oneOf", arr(array(number()), str()));
    ObjectNode embeddingsResponse = obj(req("object", "data", "model", "usage"), "object", str().set("enum", arr("list")),
        "data", array(obj(req("object", "index", "embedding"), "object", str().set("enum", arr("embedding")), "index", integer(),
            "embedding", embedding0)),
        "model", str(), "usage", obj(req("prompt_tokens", "total_tokens"), "prompt_tokens", integer(), "total_tokens", integer()));
    ObjectNode embeddingsResponses = ok(JSON, embeddingsResponse);
    embeddingsResponses.setAll(errors(OPENAI, 400, 404, 413, 500, 503, 504));
    paths.putObject("/v1/embeddings").set("post", op("One embedding per input, as floats or base64 (little-endian float32).", null,
        embeddingsResponses, embeddingsRequest));

    // ---- Open Inference Protocol (KServe v2)
    paths.putObject("/v2").set("get", op("Server metadata.", null, ok(JSON, obj(req("name", "version", "extensions"), "name", str(),
        "version", str(), "extensions", array(str()))), null));
    paths.putObject("/v2/health/live").set("get", op("The process serves HTTP.", null,
        ok(JSON, obj(req("live"), "live", bool())), null));
    ObjectNode v2Ready = ok(JSON, obj(req("ready"), "ready", bool()));
    v2Ready.setAll(errors(V2, 400));
    paths.putObject("/v2/health/ready").set("get", op("Every model server accepts requests (400, the protocol's false, when not).",
        null, v2Ready, null));
    for (String prefix : List.of("/v2/models/{model}", "/v2/models/{model}/versions/{version}")) {
      List<ObjectNode> params = prefix.contains("version")
          ? List.of(pathParameter("model", inference), pathParameter("version", List.of(OpenInferenceRoutes.VERSION)))
          : List.of(pathParameter("model", inference));
      ObjectNode tensor = tensorMetadata();
      ObjectNode metadata = ok(JSON, obj(req("name", "versions", "platform", "inputs", "outputs"), "name", str(), "versions", array(str()),
          "platform", str(), "inputs", array(tensor), "outputs", array(tensor)));
      metadata.setAll(errors(V2, 404));
      paths.putObject(prefix).set("get", op("Model metadata: its tensors, -1 for the batch dimension.", params, metadata, null));
      ObjectNode modelReady = ok(JSON, obj(req("name", "ready"), "name", str(), "ready", bool()));
      modelReady.setAll(errors(V2, 400, 404));
      paths.putObject(prefix + "/ready").set("get", op("The model accepts requests (400 when not).", params, modelReady, null));
      ObjectNode infer = ok(JSON, inferResponse());
      // Outputs asked for as binary (the binary tensor data extension): the JSON, then their raw bytes.
      ((ObjectNode) infer.at("/200/content")).putObject("application/octet-stream").set("schema", str().put("format", "binary"));
      infer.setAll(errors(V2, 400, 404, 413, 500, 503, 504));
      paths.putObject(prefix + "/infer").set("post", op("Runs the model on a batch of rows; data as JSON (or the binary tensor data "
          + "extension, with the Inference-Header-Content-Length header).", params, infer, inferRequest()));
    }

    ObjectNode schemas = doc.putObject("components").putObject("schemas");
    ObjectNode ours = obj(req("error", "code"), "error", str(), "code", str(), "field", str());
    ours.put("description", "An error of the project's own routes: the message, its ErrorCode, and the field at fault.");
    schemas.set("Error", ours);
    ObjectNode openAiError = obj(req("error"), "error", obj(req("message", "type", "param", "code"), "message", str(), "type", str(),
        "param", nullable(str()), "code", nullable(str())));
    openAiError.put("description", "An error of the OpenAI API.");
    schemas.set("OpenAiError", openAiError);
    ObjectNode v2Error = obj(req("error"), "error", str());
    v2Error.put("description", "An error of the Open Inference Protocol.");
    schemas.set("InferenceError", v2Error);
    return doc;
  }

  /**
   * This document for a server that requires {@code keys} ({@link ApiKeys#guard}): a bearer security scheme,
   * required by every operation but the probes ({@link ApiKeys#OPEN}), each of which may then answer 401 in its
   * protocol's error shape. Itself when no key is required.
   */
  public OpenApiDocument withApiKeys(ApiKeys keys) {
    if (!keys.required()) {
      return this;
    }
    ObjectNode doc = document.deepCopy();
    ObjectNode scheme = ((ObjectNode) doc.get("components")).putObject("securitySchemes").putObject("apiKey");
    scheme.put("type", "http").put("scheme", "bearer").put("description", "An API key of the server (xla-actors.http.api-key, "
        + "api-keys-file, serve --api-key), sent as Authorization: Bearer <key>, as OpenAI's clients send their api_key.");
    for (Iterator<Map.Entry<String, JsonNode>> paths = doc.get("paths").fields(); paths.hasNext(); ) {
      Map.Entry<String, JsonNode> path = paths.next();
      if (ApiKeys.OPEN.contains(path.getKey())) {
        continue;
      }
      String schema = path.getKey().startsWith("/v2") ? V2 : ApiKeys.openAiPath(path.getKey()) ? OPENAI : OURS;
      for (JsonNode operation : path.getValue()) {
        ((ObjectNode) operation).putArray("security").addObject().putArray("apiKey");
        ((ObjectNode) operation.get("responses")).set("401", response("No API key, or not one of the server's.", JSON, ref(schema)));
      }
    }
    return new OpenApiDocument(doc);
  }

  /** The document as a JSON tree (a copy). */
  public JsonNode json() {
    return document.deepCopy();
  }

  /** {@code GET /openapi.json}: the document. */
  public Route route() {
    return path("openapi.json", () -> get(() -> complete(HttpResponse.create()
        .withEntity(HttpEntities.create(ContentTypes.APPLICATION_JSON, bytes)))));
  }

  // ------------------------------------------------------------------------------------------ the parts

  private static ObjectNode op(String summary, List<ObjectNode> parameters, ObjectNode responses, ObjectNode body) {
    ObjectNode op = F.objectNode();
    op.put("summary", summary);
    if (parameters != null) {
      ArrayNode p = op.putArray("parameters");
      parameters.forEach(p::add);
    }
    if (body != null) {
      ObjectNode rb = op.putObject("requestBody");
      rb.put("required", true);
      rb.putObject("content").putObject(JSON).set("schema", body);
    }
    op.set("responses", responses);
    return op;
  }

  private static ObjectNode pathParameter(String name, List<String> values) {
    ObjectNode p = F.objectNode();
    p.put("name", name).put("in", "path").put("required", true);
    p.set("schema", values.isEmpty() ? str() : str().set("enum", arr(values.toArray())));
    return p;
  }

  private static ObjectNode modelName(List<String> values) {
    ObjectNode s = str().put("description", "A served model's name (GET /v1/models lists them).");
    return values.isEmpty() ? s : (ObjectNode) s.set("enum", arr(values.toArray()));
  }

  private static ObjectNode response(String description, String mediaType, ObjectNode schema) {
    ObjectNode r = F.objectNode();
    r.put("description", description);
    r.putObject("content").putObject(mediaType).set("schema", schema);
    return r;
  }

  private static ObjectNode ok(String mediaType, ObjectNode schema) {
    ObjectNode rs = F.objectNode();
    rs.set("200", response("OK", mediaType, schema));
    return rs;
  }

  /**
   * One server-sent event named one of {@code names} ({@code message} when the stream names none), its data a
   * line of text: before OpenAPI 3.2's {@code itemSchema}, the schema of {@code text/event-stream} describes
   * each event (as schemathesis reads it), {@code {"event", "data", "id"?, "retry"?}}.
   */
  private static ObjectNode event(String... names) {
    return obj(req("data"), "event", str().set("enum", arr((Object[]) names)), "data", str(), "id", str(), "retry", integer());
  }

  /** 200 as server-sent events, and {@code errors}. */
  private static ObjectNode stream(ObjectNode errors) {
    ObjectNode rs = F.objectNode();
    rs.set("200", response("A stream of server-sent events.", "text/event-stream", event("token", "done", "error")));
    rs.setAll(errors);
    return rs;
  }

  /** 200 as JSON or (stream: true) server-sent events {@code data: {chunk}} ending with {@code data: [DONE]}; OpenAI's errors. */
  private static ObjectNode completions(ObjectNode whole) {
    ObjectNode ok = response("The whole answer, or with stream: true its chunks as server-sent events ending with data: [DONE].", JSON,
        whole);
    ((ObjectNode) ok.get("content")).putObject("text/event-stream").set("schema", event("message"));
    ObjectNode rs = F.objectNode();
    rs.set("200", ok);
    rs.setAll(errors(OPENAI, 400, 404, 413, 500, 503, 504));
    return rs;
  }

  private static final java.util.Map<Integer, String> WHY = java.util.Map.of(
      400, "The request is invalid (or, on /v2 health and ready, the protocol's false); the message names the field.",
      404, "No such model (or version).",
      413, "The body is larger than its limit, or holds more values than the model takes.",
      500, "A batch failed while it ran.",
      503, "Overloaded (with Retry-After), stopped, or cancelled.",
      504, "Past the request's deadline.");

  private static ObjectNode errors(String schema, int... statuses) {
    ObjectNode rs = F.objectNode();
    for (int s : statuses) {
      rs.set(String.valueOf(s), response(WHY.get(s), JSON, ref(schema)));
    }
    return rs;
  }

  /** The fields of completions and chat ({@code model} one of {@code models}); additional fields only null (see nullExtras). */
  private static ObjectNode sampling(List<String> models) {
    return nullExtras(obj(null,
        "model", modelName(models),
        "max_tokens", nullable(integer().put("minimum", 0).put("maximum", Integer.MAX_VALUE)),
        "temperature", nullable(number().put("minimum", 0).put("maximum", 2)),
        "top_p", nullable(number().put("exclusiveMinimum", true).put("minimum", 0).put("maximum", 1)),
        "top_k", nullable(integer().put("minimum", -1).put("maximum", Integer.MAX_VALUE)),
        "min_p", nullable(number().put("minimum", 0).put("maximum", 1)),
        "seed", nullable(integer().put("format", "int64")),
        "stop", nullable(oneOf(str().put("minLength", 1), array(str().put("minLength", 1)).put("maxItems", OpenAiRequest.MAX_STOPS))),
        "n", nullable(integer().put("minimum", 1).put("maximum", OpenAiRequest.MAX_CHOICES)),
        "stream", nullable(bool()),
        "stream_options", nullable(nullExtras(obj(null, "include_usage", nullable(bool()), "continuous_usage_stats", nullable(bool())))),
        "user", nullable(str()),
        // vLLM's extensions (docs/http.md), which guidellm and lm-eval send
        "ignore_eos", nullable(bool()),
        "add_special_tokens", nullable(bool()),
        "skip_special_tokens", nullable(bool()),
        "include_stop_str_in_output", nullable(bool()),
        "repetition_penalty", nullable(number().put("exclusiveMinimum", true).put("minimum", 0).put("maximum", 100)),
        "logit_bias", nullable(F.objectNode().put("type", "object").set("additionalProperties", number().put("minimum", -100)
            .put("maximum", 100))),
        "presence_penalty", nullable(number().put("minimum", -2).put("maximum", 2)),
        "frequency_penalty", nullable(number().put("minimum", -2).put("maximum", 2)),
        "min_tokens", nullable(integer().put("minimum", 0))));
  }

  /** {@code stream_options} absent (or null) unless {@code stream} is true. */
  /** {@code response_format}, the same on completions and chat completions. */
  private static ObjectNode responseFormat() {
    ObjectNode jsonSchema = obj(req("schema"), "name", str(), "description", str(), "schema", F.objectNode().put("type", "object"),
        "strict", nullable(bool()));
    jsonSchema.put("additionalProperties", false);
    return nullable(obj(req("type"), "type", str().set("enum", arr("text", "json_object", "json_schema")), "json_schema", jsonSchema));
  }

  private static ObjectNode streamOptionsOnlyWithStream() {
    ObjectNode noOptions = F.objectNode();
    noOptions.set("not", obj(req("stream_options"), "stream_options", obj(null)));
    return anyOf(obj(req("stream"), "stream", bool().set("enum", arr(true))), noOptions);
  }

  private static ObjectNode anyOf(ObjectNode... schemas) {
    ObjectNode o = F.objectNode();
    o.set("anyOf", arr((Object[]) schemas));
    return o;
  }

  /** A string, strings (each at least {@code minLength} characters), token ids, or lists of token ids. */
  private static ObjectNode prompt(int minLength) {
    ObjectNode id = integer().put("minimum", 0);
    ObjectNode text = str().put("minLength", minLength);
    return oneOf(text, array(text.deepCopy()).put("minItems", 1), array(id).put("minItems", 1),
        array(array(id).put("minItems", 1)).put("minItems", 1));
  }

  private static ObjectNode completionResponse(String object, boolean chat) {
    ObjectNode choice = chat
        ? obj(req("index", "message", "finish_reason"), "index", integer(), "message", obj(req("role", "content"),
            "role", str(), "content", nullable(str()), "tool_calls", array(obj(req("id", "type", "function"), "id", str(), "type",
                str(), "function", obj(req("name", "arguments"), "name", str(), "arguments", str())))), "logprobs",
            nullable(obj(null)), "finish_reason", str().set("enum", arr("stop", "length", "tool_calls")))
        : obj(req("index", "text", "finish_reason"), "index", integer(), "text", str(), "logprobs", nullable(obj(null)),
            "finish_reason", str());
    return obj(req("id", "object", "created", "model", "choices", "usage"), "id", str(), "object", str().set("enum", arr(object)),
        "created", integer(), "model", str(), "choices", array(choice),
        "usage", obj(req("prompt_tokens", "completion_tokens", "total_tokens"), "prompt_tokens", integer(),
            "completion_tokens", integer(), "total_tokens", integer()));
  }

  private static ObjectNode tensorMetadata() {
    return obj(req("name", "datatype", "shape"), "name", str(), "datatype", str(), "shape", array(integer()));
  }

  private static ObjectNode inferRequest() {
    ObjectNode data = F.objectNode().put("description", "The row-major values, nested or flat, as many as the shape holds, in the"
        + " model's datatype for this input (400 naming the input when not).");
    ObjectNode inputParameters = closed(obj(null));
    inputParameters.put("description", "None in JSON; binary_data_size belongs to the binary tensor data extension, whose body is"
        + " JSON and raw bytes with the Inference-Header-Content-Length header.");
    ObjectNode input = closed(obj(req("name", "shape", "datatype"), "name", str(), "shape", array(integer().put("minimum", 0)),
        "datatype", str().set("enum", arr("BOOL", "UINT8", "UINT16", "UINT32", "UINT64", "INT8", "INT16", "INT32", "INT64", "FP16",
            "BF16", "FP32", "FP64")), "parameters", inputParameters, "data", data));
    input.put("description", "One of the model's inputs (GET /v2/models/{model}: their names, datatypes and shapes, -1 the rows),"
        + " each once.");
    ObjectNode output = closed(obj(req("name"), "name", str(), "parameters", closed(obj(null, "binary_data", bool()))));
    ObjectNode parameters = closed(obj(null, "timeout", integer().put("minimum", 1)
        .put("description", "The request's deadline, microseconds, at most max-request-timeout."), "binary_data_output", bool(),
        "priority", F.objectNode().put("description", "Accepted, without effect.")));
    return closed(obj(req("inputs"), "id", str(), "parameters", parameters, "inputs", array(input).put("minItems", 1),
        "outputs", array(output)));
  }

  private static ObjectNode inferResponse() {
    ObjectNode output = obj(req("name", "datatype", "shape"), "name", str(), "datatype", str(), "shape", array(integer()),
        "data", array(F.objectNode()), "parameters", obj(null));
    return obj(req("model_name", "outputs"), "model_name", str(), "model_version", str(), "id", str(), "parameters", obj(null),
        "outputs", array(output));
  }

  // ------------------------------------------------------------------------------------------ JSON Schema

  private static ObjectNode obj(ArrayNode required, Object... properties) {
    ObjectNode o = F.objectNode().put("type", "object");
    if (required != null) {
      o.set("required", required);
    }
    if (properties.length > 0) {
      ObjectNode p = o.putObject("properties");
      for (int i = 0; i < properties.length; i += 2) {
        p.set((String) properties[i], (JsonNode) properties[i + 1]);
      }
    }
    return o;
  }

  private static ObjectNode props(ObjectNode schema) {
    return (ObjectNode) schema.get("properties");
  }

  private static ObjectNode closed(ObjectNode schema) {
    return schema.put("additionalProperties", false);
  }

  /**
   * An OpenAI-style request body: a field it does not list is refused unless it is null, which the server
   * ignores as clients send unset fields (OpenAiRequest's field check); so the document allows null alone there.
   */
  private static ObjectNode nullExtras(ObjectNode schema) {
    ObjectNode onlyNull = F.objectNode().put("nullable", true);
    onlyNull.set("enum", F.arrayNode().addNull());
    schema.set("additionalProperties", onlyNull);
    return schema;
  }

  private static ArrayNode req(String... names) {
    return arr((Object[]) names);
  }

  private static ArrayNode arr(Object... values) {
    ArrayNode a = F.arrayNode();
    for (Object v : values) {
      if (v instanceof JsonNode n) {
        a.add(n);
      } else if (v instanceof Boolean b) {
        a.add(b);
      } else if (v instanceof Integer i) {
        a.add(i);
      } else {
        a.add(String.valueOf(v));
      }
    }
    return a;
  }

  private static ObjectNode str() {
    return F.objectNode().put("type", "string");
  }

  private static ObjectNode integer() {
    return F.objectNode().put("type", "integer");
  }

  private static ObjectNode number() {
    return F.objectNode().put("type", "number");
  }

  private static ObjectNode bool() {
    return F.objectNode().put("type", "boolean");
  }

  private static ObjectNode array(ObjectNode items) {
    ObjectNode a = F.objectNode().put("type", "array");
    a.set("items", items);
    return a;
  }

  private static ObjectNode oneOf(ObjectNode... schemas) {
    ObjectNode o = F.objectNode();
    o.set("oneOf", arr((Object[]) schemas));
    return o;
  }

  /**
   * A temperature: 0 (greedy) or from {@link SamplingParams#MIN_TEMPERATURE} to {@code max}; between them,
   * dividing logits overflows their softmax, so the generate route refuses it.
   */
  private static ObjectNode temperature(double max) {
    ObjectNode t = number().put("minimum", 0).put("maximum", max);
    t.set("anyOf", arr(number().put("maximum", 0), number().put("minimum", SamplingParams.MIN_TEMPERATURE)));
    return t;
  }

  private static ObjectNode nullable(ObjectNode schema) {
    return schema.put("nullable", true);
  }

  private static ObjectNode ref(String to) {
    return F.objectNode().put("$ref", to);
  }
}
