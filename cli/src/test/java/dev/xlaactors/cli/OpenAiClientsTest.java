package dev.xlaactors.cli;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.langchain4j.data.embedding.Embedding;
import dev.langchain4j.data.message.UserMessage;
import dev.langchain4j.data.segment.TextSegment;
import dev.langchain4j.model.chat.request.ChatRequest;
import dev.langchain4j.model.chat.response.ChatResponse;
import dev.langchain4j.model.chat.response.StreamingChatResponseHandler;
import dev.langchain4j.model.openai.OpenAiChatModel;
import dev.langchain4j.model.openai.OpenAiEmbeddingModel;
import dev.langchain4j.model.openai.OpenAiStreamingChatModel;
import dev.langchain4j.model.output.FinishReason;
import dev.xlaactors.runtime.model.ModelPackage;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.io.PrintStream;
import java.net.Socket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The OpenAI API of {@code bin/xla-actors serve} (the same {@link ServeCommand.Serving}, in process) over
 * the tiny Hugging Face test checkpoints, imported once into target/: gpt2 (no chat template), llama (a
 * chat template) and bert (embeddings), checked with the clients people use: openai-python
 * ({@code tools/openai_client_check.py} in the venv of {@code tools/openai-env.sh}) and LangChain4j's
 * OpenAI module (chat, streaming chat, embeddings, AI services with a record result and with tools); and over plain HTTP
 * what clients do not show: the body limit and a client that disconnects mid-stream cancelling its generations.
 */
class OpenAiClientsTest {
  private static final ObjectMapper JSON = new ObjectMapper();
  private static final Path HOME = Path.of("..").toAbsolutePath().normalize();
  private static final Path FIXTURES = Path.of("src/test/resources/hf");
  /** Reused across runs (an import takes ~15 s); imported again when tools/hf_import.py is newer. */
  private static final Path PACKAGES = Path.of("target/openai-packages");
  private static final HttpClient HTTP = HttpClient.newHttpClient();

  private static ServeCommand.Serving serving;
  private static String url;

  @BeforeAll
  static void serve() throws IOException {
    System.setProperty("dev.xlaactors.cli.home", HOME.toString());
    List<ModelPackage> packages = new ArrayList<>();
    for (String name : List.of("gpt2", "llama", "bert")) {
      packages.add(ModelPackage.open(imported(name)));
    }
    packages.add(ModelPackage.open(turnsVariant(imported("llama"))));
    serving = ServeCommand.Serving.start(packages, "127.0.0.1", 0);
    url = serving.url();
  }

  @AfterAll
  static void stop() {
    if (serving != null) {
      serving.close();
    }
  }

  /** The turn-end token of {@code llama-turns}' template: not generation_config's EOS (id 2, {@code </s>}). */
  private static final String TURN_END = "<unk>";

  /**
   * {@code llama} as {@code llama-turns}: its template closes turns with {@link #TURN_END}, not its generation EOS
   * (as Llama 3 Instruct's {@code <|eot_id|>} differs from {@code <|end_of_text|>}), and a message "loop" makes
   * it loop for a while (to see which thread renders it). Written next to the import, from it, each run.
   */
  private static Path turnsVariant(Path llama) throws IOException {
    Path pkg = PACKAGES.resolve("llama-turns").toAbsolutePath();
    deleteTree(pkg);
    Files.createDirectories(pkg);
    try (var files = Files.list(llama)) {
      for (Path f : files.toList()) {
        Files.copy(f, pkg.resolve(f.getFileName()));
      }
    }
    com.fasterxml.jackson.databind.node.ObjectNode manifest = (com.fasterxml.jackson.databind.node.ObjectNode) JSON.readTree(
        pkg.resolve("xla-model.json").toFile());
    manifest.put("name", "llama-turns");
    ((com.fasterxml.jackson.databind.node.ObjectNode) manifest.get("special_tokens")).put("eos_token", TURN_END);
    JSON.writeValue(pkg.resolve("xla-model.json").toFile(), manifest);
    String template = Files.readString(pkg.resolve(manifest.get("chat_template").asText()));
    Files.writeString(pkg.resolve(manifest.get("chat_template").asText()), "{% if messages[0]['content'] == 'loop' %}"
        + "{% for a in range(100) %}{% for b in range(1000) %}{% if b == -1 %}x{% endif %}{% endfor %}{% endfor %}{% endif %}" + template);
    return pkg;
  }

  static Path imported(String name) throws IOException {
    // Test classes share these packages and run in two JVMs at once (surefire's forkCount in cli/pom.xml):
    // one imports while the other waits on the lock, then finds the package made.
    Files.createDirectories(PACKAGES);
    try (java.nio.channels.FileChannel lock = java.nio.channels.FileChannel.open(PACKAGES.resolve(".lock"),
        java.nio.file.StandardOpenOption.CREATE, java.nio.file.StandardOpenOption.WRITE);
        var held = lock.lock()) {
      return importedHoldingTheLock(name);
    }
  }

  private static Path importedHoldingTheLock(String name) throws IOException {
    Path pkg = PACKAGES.resolve(name).toAbsolutePath();
    Path manifest = pkg.resolve("xla-model.json");
    if (Files.exists(manifest) && Files.getLastModifiedTime(manifest).compareTo(
        Files.getLastModifiedTime(HOME.resolve("tools/hf_import.py"))) > 0) {
      return pkg;
    }
    deleteTree(pkg); // made by an older importer: import refuses a non-empty --out
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    ByteArrayOutputStream err = new ByteArrayOutputStream();
    int status = XlaActorsCli.run(List.of("import", "hf", FIXTURES.resolve(name).toString(), "--out", pkg.toString()),
        new PrintStream(out, true, StandardCharsets.UTF_8), new PrintStream(err, true, StandardCharsets.UTF_8));
    if (status != 0) {
      fail("import hf " + name + " exited " + status + ":\n" + err.toString(StandardCharsets.UTF_8) + out.toString(StandardCharsets.UTF_8));
    }
    return pkg;
  }

  private static void deleteTree(Path dir) throws IOException {
    if (Files.exists(dir)) {
      try (var paths = Files.walk(dir)) {
        for (Path p : paths.sorted(java.util.Comparator.reverseOrder()).toList()) {
          Files.delete(p);
        }
      }
    }
  }

  // ------------------------------------------------------------------------------------------ openai-python

  @Test
  void theOpenAiPythonClientPassesItsChecks() throws Exception {
    Assumptions.assumeTrue(onPath("python3"), "python3 is not installed: the openai-python checks (tools/openai_client_check.py) "
        + "need it to make their venv (tools/openai-env.sh)");
    Process env = new ProcessBuilder("bash", HOME.resolve("tools/openai-env.sh").toString()).redirectErrorStream(false).start();
    String python = new String(env.getInputStream().readAllBytes(), StandardCharsets.UTF_8).strip();
    String envErr = new String(env.getErrorStream().readAllBytes(), StandardCharsets.UTF_8);
    assertEquals(0, env.waitFor(), "tools/openai-env.sh failed: " + envErr);
    Process check = new ProcessBuilder(python, HOME.resolve("tools/openai_client_check.py").toString(), url,
        "--completion-model", "gpt2", "--chat-model", "llama", "--embedding-model", "bert").redirectErrorStream(true).start();
    CompletableFuture<String> output = CompletableFuture.supplyAsync(() -> {
      try {
        return new String(check.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
      } catch (IOException e) {
        return "cannot read its output: " + e;
      }
    });
    if (!check.waitFor(120, TimeUnit.SECONDS)) {
      check.destroyForcibly();
      fail("tools/openai_client_check.py did not finish within 120 s");
    }
    String printed = output.get(10, TimeUnit.SECONDS);
    assertEquals(0, check.exitValue(), printed);
    assertTrue(printed.contains("openai-python 3.51.0: all checks passed"), printed);
  }

  private static boolean onPath(String program) {
    for (String dir : System.getenv().getOrDefault("PATH", "").split(java.io.File.pathSeparator)) {
      if (Files.isExecutable(Path.of(dir, program))) {
        return true;
      }
    }
    return false;
  }

  // ------------------------------------------------------------------------------------------ LangChain4j

  @Test
  void langChain4jChatsAndStreamsTheSameGreedyText() throws Exception {
    OpenAiChatModel chat = OpenAiChatModel.builder().baseUrl(url + "/v1").apiKey("unused").modelName("llama").temperature(0.0)
        .maxTokens(6).maxRetries(0).build();
    ChatResponse whole = chat.chat(ChatRequest.builder().messages(UserMessage.from("Hello!")).build());
    assertFalse(whole.aiMessage().text().isEmpty());
    assertEquals(FinishReason.LENGTH, whole.metadata().finishReason());
    assertEquals(6, whole.metadata().tokenUsage().outputTokenCount());
    assertTrue(whole.metadata().tokenUsage().inputTokenCount() > 0);

    OpenAiStreamingChatModel streaming = OpenAiStreamingChatModel.builder().baseUrl(url + "/v1").apiKey("unused").modelName("llama")
        .temperature(0.0).maxTokens(6).build();
    StringBuilder partial = new StringBuilder();
    CompletableFuture<ChatResponse> done = new CompletableFuture<>();
    streaming.chat(ChatRequest.builder().messages(UserMessage.from("Hello!")).build(), new StreamingChatResponseHandler() {
      @Override
      public void onPartialResponse(String text) {
        partial.append(text);
      }

      @Override
      public void onCompleteResponse(ChatResponse response) {
        done.complete(response);
      }

      @Override
      public void onError(Throwable error) {
        done.completeExceptionally(error);
      }
    });
    ChatResponse streamed = done.get(60, TimeUnit.SECONDS);
    assertEquals(whole.aiMessage().text(), partial.toString());
    assertEquals(whole.aiMessage().text(), streamed.aiMessage().text());
    assertEquals(FinishReason.LENGTH, streamed.metadata().finishReason());
    assertNotNull(streamed.metadata().tokenUsage(), "the usage chunk LangChain4j asks for");
    assertEquals(6, streamed.metadata().tokenUsage().outputTokenCount());
  }

  /** What the AI service below returns: LangChain4j asks for its JSON schema (name: string, age: integer, both required). */
  // long, not int: LangChain4j's schema of either is an unbounded "integer", which the grammar holds to 15 digits
  // (JsonSchemaAutomaton.MAX_DIGITS), more than an int takes; a random model writes such numbers.
  record Person(String name, long age) {}

  /** An AI service whose answer is a record. */
  interface Extractor {
    Person extract(String text);
  }

  @Test
  void aLangChain4jAiServiceGetsItsRecordFromARandomModel() {
    // With the JSON-schema capability LangChain4j sends response_format json_schema (no format instructions in the
    // prompt): only the grammar makes the random model's answer parse into the record.
    // Seeded: unseeded, a random model's name could run past the 64-token context, an answer cut short of parsing.
    OpenAiChatModel model = OpenAiChatModel.builder().baseUrl(url + "/v1").apiKey("unused").modelName("llama").maxRetries(0)
        .supportedCapabilities(dev.langchain4j.model.chat.Capability.RESPONSE_FORMAT_JSON_SCHEMA).strictJsonSchema(true)
        .seed(11).logRequests(false).build();
    Extractor extractor = dev.langchain4j.service.AiServices.create(Extractor.class, model);
    Person p = extractor.extract("Ann, 41"); // LangChain4j parses the answer into the record, or throws
    assertNotNull(p);
    assertNotNull(p.name());
  }

  /** The tools of the AI service below: what the model called, with which arguments (LangChain4j parsed them into these types). */
  static final class Toolbox {
    final List<String> calls = new java.util.concurrent.CopyOnWriteArrayList<>();

    @dev.langchain4j.agent.tool.Tool("Twice a number")
    public int twice(int x) {
      calls.add("twice(" + x + ")");
      return 2 * x;
    }

    @dev.langchain4j.agent.tool.Tool("Switch the light")
    public String light(boolean on) {
      calls.add("light(" + on + ")");
      return on ? "on" : "off";
    }
  }

  /** What the tool-using AI service returns (one short field: the test model's context is 64 tokens). */
  record Reading(int value) {}

  /** An AI service with tools whose answer is a record. */
  interface Agent {
    Reading read(String text);
  }

  /**
   * A LangChain4j AI service with two {@code @Tool} methods and a record result, on a model of random weights: the
   * tools are called with arguments LangChain4j parses into their parameters, then the record is parsed. LangChain4j
   * 1.19 sends every round of its tool loop with the same tool_choice, and ends the loop only when an answer has no
   * call: with {@code required} throughout it would call tools until its limit. So the request transformer (the
   * client's own switch, applied to each round) asks for {@code required} until a tool's result is in the messages,
   * then {@code none}, when the response format's grammar gives the record. The first invocation lets the model
   * choose between the two tools; the second offers only the other one (LangChain4j's form of a named function).
   */
  @Test
  void aLangChain4jAiServiceCallsItsToolsAndGetsItsRecord() {
    OpenAiChatModel model = OpenAiChatModel.builder().baseUrl(url + "/v1").apiKey("unused").modelName("llama").maxRetries(0).seed(7)
        .supportedCapabilities(dev.langchain4j.model.chat.Capability.RESPONSE_FORMAT_JSON_SCHEMA).strictJsonSchema(true).build();
    Toolbox toolbox = new Toolbox();
    java.util.concurrent.atomic.AtomicReference<String> only = new java.util.concurrent.atomic.AtomicReference<>();
    List<String> rounds = new java.util.concurrent.CopyOnWriteArrayList<>();
    Agent agent = dev.langchain4j.service.AiServices.builder(Agent.class).chatModel(model).tools(toolbox).maxSequentialToolsInvocations(3)
        .chatRequestTransformer(request -> {
          boolean answered = request.messages().stream().anyMatch(m -> m instanceof dev.langchain4j.data.message.ToolExecutionResultMessage);
          List<dev.langchain4j.agent.tool.ToolSpecification> offered = request.parameters().toolSpecifications().stream()
              .filter(t -> only.get() == null || t.name().equals(only.get())).toList();
          dev.langchain4j.model.chat.request.ToolChoice choice = answered ? dev.langchain4j.model.chat.request.ToolChoice.NONE
              : dev.langchain4j.model.chat.request.ToolChoice.REQUIRED;
          rounds.add(choice + " " + offered.stream().map(dev.langchain4j.agent.tool.ToolSpecification::name).sorted().toList());
          return request.toBuilder().parameters(request.parameters().overrideWith(dev.langchain4j.model.chat.request.ChatRequestParameters
              .builder().toolChoice(choice).toolSpecifications(offered).build())).build();
        }).build();

    Reading first = agent.read("Hi");
    assertNotNull(first);
    assertEquals(List.of("REQUIRED [light, twice]", "NONE [light, twice]"), rounds);
    assertEquals(1, toolbox.calls.size(), toolbox.calls.toString());
    String called = toolbox.calls.get(0).replaceAll("\\(.*", "");
    only.set(called.equals("twice") ? "light" : "twice");
    Reading second = agent.read("Hi");
    assertNotNull(second);
    assertEquals(2, toolbox.calls.size(), toolbox.calls.toString());
    assertTrue(toolbox.calls.get(1).startsWith(only.get() + "("), "the other tool: " + toolbox.calls);
  }

  /**
   * A constrained answer parses whatever else the request says: response_format on /v1/completions (vLLM takes it
   * there too), and stop strings every answer would hold ("{" and a quote) do not cut it short of parsing, nor does
   * min_tokens leave a whole answer nothing to draw.
   */
  @Test
  void constrainedAnswersParseOnCompletionsAndPastStopStrings() throws Exception {
    String schema = "{\"type\":\"object\",\"properties\":{\"n\":{\"type\":\"integer\"},\"s\":{\"type\":\"string\",\"maxLength\":4}},"
        + "\"required\":[\"n\",\"s\"]}";
    JsonNode completion = post("/v1/completions", "{\"model\":\"gpt2\",\"prompt\":\"JSON:\",\"max_tokens\":24,\"seed\":3,"
        + "\"stop\":[\"{\",\"\\\"\"],\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"t\",\"schema\":" + schema + "}}}");
    for (JsonNode choice : completion.get("choices")) {
      JsonNode answer = JSON.readTree(choice.get("text").asText());
      assertTrue(answer.get("n").isIntegralNumber() && answer.get("s").isTextual() && answer.get("s").asText().length() <= 4
          && answer.size() == 2, "not valid for the schema: " + choice);
      assertEquals("stop", choice.get("finish_reason").asText(), choice.toString());
    }
    JsonNode chat = post("/v1/chat/completions", "{\"model\":\"llama\",\"messages\":[{\"role\":\"user\",\"content\":\"JSON?\"}],"
        + "\"max_tokens\":24,\"seed\":3,\"stop\":\"{\",\"min_tokens\":24,\"response_format\":{\"type\":\"json_object\"}}");
    String content = chat.at("/choices/0/message/content").asText();
    assertTrue(JSON.readTree(content).isObject(), "not a JSON object: " + chat);
    assertEquals("stop", chat.at("/choices/0/finish_reason").asText(), chat.toString());
  }

  @Test
  void langChain4jEmbedsAsTheHttpApiDoes() throws Exception {
    OpenAiEmbeddingModel model = OpenAiEmbeddingModel.builder().baseUrl(url + "/v1").apiKey("unused").modelName("bert").maxRetries(0)
        .build();
    List<Embedding> embeddings = model.embedAll(List.of(TextSegment.from("hello world"), TextSegment.from("good morning"))).content();
    assertEquals(2, embeddings.size());
    assertEquals(64, embeddings.get(0).dimension()); // the checkpoint's hidden_size
    JsonNode direct = post("/v1/embeddings", "{\"model\":\"bert\",\"input\":\"hello world\"}");
    float[] expected = new float[64];
    for (int i = 0; i < 64; i++) {
      expected[i] = (float) direct.get("data").get(0).get("embedding").get(i).asDouble();
    }
    // A batch of two and a request of one may sum in another order: lammps-jax-pjrt-cpu put them 1.1e-6 apart at
    // 1.62 (7e-7 relative); the other builds closer. Equal to float rounding, not bit for bit.
    assertArrayEquals(expected, embeddings.get(0).vector(), 1e-5f);
    assertFalse(java.util.Arrays.equals(embeddings.get(0).vector(), embeddings.get(1).vector()));
    assertTrue(metric("xla_openai_embeddings_total\\{model=\"bert\",outcome=\"ok\"} ([0-9.eE+]+)") >= 2, "embeddings are counted");
  }

  // ------------------------------------------------------------------------------------------ vLLM's extensions

  /**
   * The fields guidellm and lm-eval send, each changing the answer as vLLM's does. Token 236 is a prompt
   * whose greedy continuation ends at gpt2's end-of-text (id 0) after 6 tokens (found by trying ids
   * 1..400 once; greedy, so the same on every CPU but for a near tie).
   */
  @Test
  void vllmsExtensionsChangeTheAnswerAsVllmDoes() throws Exception {
    JsonNode plain = post("/v1/completions", "{\"model\":\"gpt2\",\"prompt\":[236],\"max_tokens\":10,\"temperature\":0}");
    assertEquals("stop", plain.at("/choices/0/finish_reason").asText(), "the fixture no longer ends at end-of-text: " + plain);
    int untilEos = plain.at("/usage/completion_tokens").asInt();
    assertTrue(untilEos < 10, plain.toString());
    String text = plain.at("/choices/0/text").asText();

    JsonNode ignored = post("/v1/completions", "{\"model\":\"gpt2\",\"prompt\":[236],\"max_tokens\":10,\"temperature\":0,"
        + "\"ignore_eos\":true}");
    assertEquals("length", ignored.at("/choices/0/finish_reason").asText());
    assertEquals(10, ignored.at("/usage/completion_tokens").asInt());
    assertTrue(ignored.at("/choices/0/text").asText().startsWith(text), ignored.toString());
    assertFalse(ignored.at("/choices/0/text").asText().contains("<|endoftext|>"), "special tokens are skipped by default");

    JsonNode special = post("/v1/completions", "{\"model\":\"gpt2\",\"prompt\":[236],\"max_tokens\":10,\"temperature\":0,"
        + "\"ignore_eos\":true,\"skip_special_tokens\":false}");
    assertTrue(special.at("/choices/0/text").asText().startsWith(text + "<|endoftext|>"), special.toString());

    String stop = text.substring(text.length() - 3); // a stop string inside the greedy text
    String stopped = "{\"model\":\"gpt2\",\"prompt\":[236],\"max_tokens\":10,\"temperature\":0,\"stop\":" + JSON.writeValueAsString(stop);
    String without = post("/v1/completions", stopped + "}").at("/choices/0/text").asText();
    String with = post("/v1/completions", stopped + ",\"include_stop_str_in_output\":true}").at("/choices/0/text").asText();
    assertEquals(without + stop, with);
    assertFalse(without.endsWith(stop));

    // The llama tokenizer adds BOS to a completion's prompt unless told not to; a chat's template writes its own.
    assertEquals(post("/v1/completions", "{\"model\":\"llama\",\"prompt\":\"Hello\",\"max_tokens\":1}").at("/usage/prompt_tokens").asInt() - 1,
        post("/v1/completions", "{\"model\":\"llama\",\"prompt\":\"Hello\",\"max_tokens\":1,\"add_special_tokens\":false}")
            .at("/usage/prompt_tokens").asInt());
    String chat = "{\"model\":\"llama\",\"messages\":[{\"role\":\"user\",\"content\":\"Hello!\"}],\"max_tokens\":1";
    assertEquals(post("/v1/chat/completions", chat + "}").at("/usage/prompt_tokens").asInt() + 1,
        post("/v1/chat/completions", chat + ",\"add_special_tokens\":true}").at("/usage/prompt_tokens").asInt());
  }

  /**
   * A chat stops at its template's turn end ({@code eos_token} from tokenizer_config.json) as at generation_config's
   * EOS ids: forced by logit_bias, {@link #TURN_END} ends {@code llama-turns}' answer at once, as the EOS (id 2)
   * ends {@code llama}'s, and is not in its text even with special tokens shown; {@code llama}, whose turn end is
   * its EOS, runs on past it to the token limit.
   */
  @Test
  void theTemplatesTurnEndStopsAChat() throws Exception {
    String chat = "\"messages\":[{\"role\":\"user\",\"content\":\"Hello!\"}],\"max_tokens\":3,\"temperature\":0,"
        + "\"skip_special_tokens\":false,\"logit_bias\":";
    JsonNode eos = post("/v1/chat/completions", "{\"model\":\"llama\"," + chat + "{\"2\":100}}");
    assertEquals("stop", eos.at("/choices/0/finish_reason").asText(), eos.toString());
    JsonNode turns = post("/v1/chat/completions", "{\"model\":\"llama-turns\"," + chat + "{\"0\":100}}");
    assertEquals("stop", turns.at("/choices/0/finish_reason").asText(), turns.toString());
    assertEquals(eos.at("/usage/completion_tokens").asInt(), turns.at("/usage/completion_tokens").asInt(), turns.toString());
    assertEquals("", turns.at("/choices/0/message/content").asText(), turns.toString());
    JsonNode plain = post("/v1/chat/completions", "{\"model\":\"llama\"," + chat + "{\"0\":100}}");
    assertEquals("length", plain.at("/choices/0/finish_reason").asText(), plain.toString());
    assertTrue(plain.at("/choices/0/message/content").asText().contains(TURN_END), plain.toString());
  }

  /**
   * A chat template renders on xla-actors.http.chat-template.dispatcher's threads, never on Pekko's default
   * dispatcher (where a slow template would stall every route): the thread found rendering a looping template.
   */
  @Test
  void chatTemplatesRenderOnTheirOwnDispatcher() throws Exception {
    CompletableFuture<HttpResponse<String>> answer = HTTP.sendAsync(HttpRequest.newBuilder(URI.create(url + "/v1/chat/completions"))
        .header("Content-Type", "application/json").POST(HttpRequest.BodyPublishers.ofString(
            "{\"model\":\"llama-turns\",\"messages\":[{\"role\":\"user\",\"content\":\"loop\"}],\"max_tokens\":1}")).build(),
        HttpResponse.BodyHandlers.ofString());
    String renderer = null;
    while (renderer == null && !answer.isDone()) {
      for (var thread : Thread.getAllStackTraces().entrySet()) {
        for (StackTraceElement frame : thread.getValue()) {
          if (frame.getClassName().equals("dev.xlaactors.http.ChatTemplate") && frame.getMethodName().equals("render")) {
            renderer = thread.getKey().getName();
          }
        }
      }
      Thread.sleep(5);
    }
    assertNotNull(renderer, "the render ended before a thread was seen rendering: " + answer.get(30, TimeUnit.SECONDS).body());
    assertTrue(renderer.contains("xla-actors.http.chat-template.render-dispatcher"), renderer);
    assertTrue(List.of(200, 400).contains(answer.get(30, TimeUnit.SECONDS).statusCode())); // done, or past the render timeout
  }

  /** guidellm's stream options: usage on every chunk (the tokens so far), and usage: null on chunks when only include_usage is asked. */
  @Test
  void streamsCarryUsageOnEveryChunkWhenAsked() throws Exception {
    String chat = "{\"model\":\"llama\",\"messages\":[{\"role\":\"user\",\"content\":\"Hello!\"}],\"max_tokens\":4,"
        + "\"temperature\":0,\"ignore_eos\":true,\"stream\":true,\"stream_options\":{\"include_usage\":true";
    List<JsonNode> continuous = chunks("/v1/chat/completions", chat + ",\"continuous_usage_stats\":true}}");
    int previous = -1;
    for (JsonNode c : continuous) {
      JsonNode usage = c.get("usage");
      assertTrue(usage != null && usage.isObject(), "a chunk without usage: " + c);
      assertTrue(usage.get("completion_tokens").asInt() >= previous, continuous.toString());
      assertEquals(usage.get("prompt_tokens").asInt() + usage.get("completion_tokens").asInt(), usage.get("total_tokens").asInt());
      previous = usage.get("completion_tokens").asInt();
    }
    assertEquals(4, previous);
    assertEquals(0, continuous.get(0).at("/usage/completion_tokens").asInt()); // the role chunk: nothing generated yet

    List<JsonNode> once = chunks("/v1/chat/completions", chat + "}}");
    for (JsonNode c : once.subList(0, once.size() - 1)) {
      assertTrue(c.has("usage") && c.get("usage").isNull(), "OpenAI writes usage: null on each chunk: " + c);
    }
    assertEquals(4, once.get(once.size() - 1).at("/usage/completion_tokens").asInt());
    for (JsonNode c : chunks("/v1/chat/completions", chat.replace(",\"stream_options\":{\"include_usage\":true", "") + "}")) {
      assertFalse(c.has("usage"), "usage not asked for: " + c);
    }
  }

  /**
   * vLLM's tokenizer routes, which lm-eval's local-completions finds and uses by default (bench/run.sh
   * serve-clients runs it), and a max_tokens near 2^31, whose sum with the prompt once wrapped around.
   */
  @Test
  void tokenizerRoutesRoundTripAndAHugeMaxTokensIsRefused() throws Exception {
    HttpResponse<String> unnamed = raw("/tokenize", "{\"prompt\":\"Hello world\"}");
    assertEquals(400, unnamed.statusCode(), unnamed.body()); // three models here: which tokenizer is not guessed
    assertEquals("model", JSON.readTree(unnamed.body()).at("/error/param").asText());

    JsonNode plain = post("/tokenize", "{\"model\":\"llama\",\"prompt\":\"Hello world\",\"add_special_tokens\":false}");
    JsonNode special = post("/tokenize", "{\"model\":\"llama\",\"prompt\":\"Hello world\"}");
    assertEquals(plain.get("tokens").size(), plain.get("count").asInt());
    assertEquals(plain.get("count").asInt() + 1, special.get("count").asInt()); // the tokenizer's BOS
    assertEquals("Hello world", post("/detokenize", "{\"model\":\"llama\",\"tokens\":" + plain.get("tokens") + "}")
        .get("prompt").asText());
    HttpResponse<String> info = HTTP.send(HttpRequest.newBuilder(URI.create(url + "/tokenizer_info?model=gpt2")).build(),
        HttpResponse.BodyHandlers.ofString());
    assertEquals(200, info.statusCode(), info.body());
    assertEquals("<|endoftext|>", JSON.readTree(info.body()).get("eos_token").asText());
    assertEquals(64, JSON.readTree(info.body()).get("model_max_length").asInt());

    HttpResponse<String> huge = raw("/v1/completions", "{\"model\":\"gpt2\",\"prompt\":\"Hi\",\"max_tokens\":2147483647,\"stream\":true}");
    assertEquals(400, huge.statusCode(), huge.body());
    assertEquals("max_tokens", JSON.readTree(huge.body()).at("/error/param").asText());
  }

  private static HttpResponse<String> raw(String path, String body) throws Exception {
    return HTTP.send(HttpRequest.newBuilder(URI.create(url + path)).header("Content-Type", "application/json")
        .POST(HttpRequest.BodyPublishers.ofString(body)).build(), HttpResponse.BodyHandlers.ofString());
  }

  /** The JSON chunks of a stream, up to {@code [DONE]}. */
  private static List<JsonNode> chunks(String path, String body) throws Exception {
    HttpResponse<String> r = HTTP.send(HttpRequest.newBuilder(URI.create(url + path)).header("Content-Type", "application/json")
        .POST(HttpRequest.BodyPublishers.ofString(body)).build(), HttpResponse.BodyHandlers.ofString());
    assertEquals(200, r.statusCode(), r.body());
    List<JsonNode> chunks = new ArrayList<>();
    for (String line : r.body().split("\n")) {
      if (line.startsWith("data: {")) {
        chunks.add(JSON.readTree(line.substring("data: ".length())));
      }
    }
    assertTrue(r.body().endsWith("data: [DONE]\n\n"), r.body());
    return chunks;
  }

  // ------------------------------------------------------------------------------------------ plain HTTP

  @Test
  void aBodyOverTheLimitIsRefusedWith413InOpenAisShape() throws Exception {
    String big = "{\"model\":\"gpt2\",\"prompt\":\"" + "a".repeat(1_100_000) + "\"}";
    HttpResponse<String> r = HTTP.send(HttpRequest.newBuilder(URI.create(url + "/v1/completions")).header("Content-Type",
        "application/json").POST(HttpRequest.BodyPublishers.ofString(big)).build(), HttpResponse.BodyHandlers.ofString());
    assertEquals(413, r.statusCode(), r.body());
    JsonNode error = JSON.readTree(r.body()).get("error");
    assertTrue(error.get("message").asText().contains("xla-actors.http.max-generate-body-bytes"), r.body());
    assertEquals("invalid_request_error", error.get("type").asText());
    assertTrue(metric("xla_http_refusals_total\\{api=\"openai\",status=\"413\"} ([0-9.eE+]+)") >= 1, "the refusal is counted");
  }

  /** The sum of the values of the /metrics lines {@code pattern} matches (its group 1: the value). */
  private static double metric(String pattern) throws Exception {
    String metrics = HTTP.send(HttpRequest.newBuilder(URI.create(url + "/metrics")).build(), HttpResponse.BodyHandlers.ofString()).body();
    Matcher m = Pattern.compile(pattern).matcher(metrics);
    double total = 0;
    while (m.find()) {
      total += Double.parseDouble(m.group(1));
    }
    return total;
  }

  @Test
  void aClientThatDisconnectsMidStreamCancelsItsGenerations() throws Exception {
    double before = cancelled("gpt2");
    // 16 choices on a server of 4 slots: most wait for a slot when the client leaves after the first chunk.
    String body = "{\"model\":\"gpt2\",\"prompt\":\"Hello\",\"max_tokens\":40,\"n\":16,\"stream\":true}";
    try (Socket socket = new Socket("127.0.0.1", URI.create(url).getPort())) {
      OutputStream out = socket.getOutputStream();
      out.write(("POST /v1/completions HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: "
          + body.getBytes(StandardCharsets.UTF_8).length + "\r\n\r\n" + body).getBytes(StandardCharsets.UTF_8));
      out.flush();
      InputStream in = socket.getInputStream();
      StringBuilder seen = new StringBuilder();
      while (!seen.toString().contains("data: {")) {
        int b = in.read();
        if (b < 0) {
          fail("the stream ended before its first chunk: " + seen);
        }
        seen.append((char) b);
      }
      assertTrue(seen.toString().startsWith("HTTP/1.1 200"), seen.toString());
    } // closed: the client left
    long deadline = System.nanoTime() + Duration.ofSeconds(20).toNanos();
    while (cancelled("gpt2") <= before && System.nanoTime() < deadline) {
      Thread.sleep(50);
    }
    assertTrue(cancelled("gpt2") > before, "no generation of the closed stream was cancelled");
  }

  /** The generation requests of {@code model} cancelled so far, from GET /metrics. */
  private static double cancelled(String model) throws Exception {
    String metrics = HTTP.send(HttpRequest.newBuilder(URI.create(url + "/metrics")).build(), HttpResponse.BodyHandlers.ofString()).body();
    Matcher m = Pattern.compile("xla_generate_requests_total\\{[^}]*model=\"" + model + "\"[^}]*outcome=\"cancelled\"[^}]*} ([0-9.eE+]+)")
        .matcher(metrics);
    double total = 0;
    while (m.find()) {
      total += Double.parseDouble(m.group(1));
    }
    return total;
  }

  private static JsonNode post(String path, String body) throws Exception {
    HttpResponse<String> r = HTTP.send(HttpRequest.newBuilder(URI.create(url + path)).header("Content-Type", "application/json")
        .POST(HttpRequest.BodyPublishers.ofString(body)).build(), HttpResponse.BodyHandlers.ofString());
    assertEquals(200, r.statusCode(), r.body());
    return JSON.readTree(r.body());
  }
}
