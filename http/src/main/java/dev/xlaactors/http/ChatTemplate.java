package dev.xlaactors.http;

import com.hubspot.jinjava.Jinjava;
import com.hubspot.jinjava.JinjavaConfig;
import com.hubspot.jinjava.LegacyOverrides;
import com.hubspot.jinjava.el.JinjavaInterpreterResolver;
import com.hubspot.jinjava.el.JinjavaProcessors;
import com.hubspot.jinjava.interpret.JinjavaInterpreter;
import com.hubspot.jinjava.interpret.OutputTooBigException;
import com.hubspot.jinjava.interpret.RenderResult;
import com.hubspot.jinjava.interpret.TemplateError;
import com.hubspot.jinjava.lib.fn.ELFunctionDefinition;
import com.hubspot.jinjava.tree.Node;
import java.time.Clock;
import java.time.ZonedDateTime;
import java.time.format.TextStyle;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.Executor;
import jinjava.javax.el.CompositeELResolver;
import jinjava.javax.el.ELResolver;

/**
 * A model's chat template (the Jinja of its {@code tokenizer_config.json} or {@code chat_template.jinja}),
 * rendered as Hugging Face's {@code apply_chat_template} renders it: with {@code messages} (each
 * {@code {"role", "content"}}), {@code add_generation_prompt}, the tokenizer's special-token texts
 * ({@code bos_token}, {@code eos_token}, {@code unk_token}, {@code pad_token}, ... as its
 * {@code tokenizer_config.json} names them), {@code tools} when the request has them, {@code raise_exception(msg)},
 * {@code strftime_now(format)} and transformers' {@code tojson} (Python's {@code json.dumps}, {@link PythonJsonFilter}),
 * with Jinja's {@code trim_blocks} and {@code lstrip_blocks} on. The engine is HubSpot's Jinjava.
 *
 * <p>The template is the checkpoint's code; the messages are the client's data and stay data. Jinjava
 * (before 3.0) renders again any output that holds {@code {{} or {@code {%} ("nested interpretation"): a
 * message "{{ 7*7 }}" would reach the model as "49", and a message of nested loops would run. That is off
 * here. A render is bounded too ({@link ChatTemplateSettings}): in time (checked before each node the
 * template renders) and in output size; {@link #renderAsync} runs it on the dispatcher named there.
 *
 * <p>The template's variables are made in one place ({@link #variables}). Immutable and thread-safe (every
 * render has its own interpreter).
 */
final class ChatTemplate {
  /** The render on this thread: its deadline and clock (Jinjava's hooks are static, so they find it here). */
  private static final ThreadLocal<Render> CURRENT = new ThreadLocal<>();

  private final String model;
  private final String template;
  private final Map<String, String> specialTokens;
  private final ChatTemplateSettings settings;
  private final Jinjava jinjava;
  private final Clock clock;

  /**
   * The template {@code template} of {@code model}, with its tokenizer's special-token texts
   * ({@code specialTokens}: {@code bos_token -> "<s>"}, ...; a token the tokenizer does not have is left out
   * and renders empty), bounded by {@code settings}; {@code strftime_now} reads {@code clock}.
   */
  ChatTemplate(String model, String template, Map<String, String> specialTokens, ChatTemplateSettings settings, Clock clock) {
    this.model = model;
    // Jinja drops one newline at the end of a template (keep_trailing_newline is off in Hugging Face's
    // environment); Jinjava's option of that name trims the output instead, so the source is trimmed here.
    // Two forms of Jinja that Jinjava parses otherwise (keyword values, [::-1]) are rewritten: see JinjaSource.
    this.template = JinjaSource.forJinjava(template.endsWith("\r\n") ? template.substring(0, template.length() - 2)
        : template.endsWith("\n") || template.endsWith("\r") ? template.substring(0, template.length() - 1) : template);
    this.specialTokens = Map.copyOf(specialTokens);
    this.settings = settings;
    this.jinjava = jinjava(settings);
    this.clock = clock;
  }

  /** As {@link #ChatTemplate(String, String, Map, ChatTemplateSettings, Clock)} with the default bounds and the system clock. */
  ChatTemplate(String model, String template, Map<String, String> specialTokens) {
    this(model, template, specialTokens, ChatTemplateSettings.DEFAULTS, Clock.systemDefaultZone());
  }

  private static Jinjava jinjava(ChatTemplateSettings settings) {
    // Jinjava's corrections towards Python's Jinja (which the templates are written for): {{- -}} trims around
    // expressions too (templates such as Qwen2.5's and Llama 3's rely on it), Python's operator precedence,
    // dict literals with evaluated keys, iteration over a dict's keys, Python's rendering of lists and dicts.
    LegacyOverrides python = LegacyOverrides.newBuilder().withUseTrimmingForNotesAndExpressions(true).withUseNaturalOperatorPrecedence(true)
        .withEvaluateMapKeys(true).withIterateOverMapKeys(true).withUsePyishObjectMapper(true).build();
    Jinjava j = new Jinjava(JinjavaConfig.newBuilder().withTrimBlocks(true).withLstripBlocks(true)
        // Output is text for the model, never template code again (Jinjava's default before 3.0 re-renders it).
        .withNestedInterpretationEnabled(false)
        .withMaxOutputSize(settings.maxOutputChars()).withMaxStringLength(settings.maxOutputChars())
        .withElResolver(resolver())
        .withProcessors(JinjavaProcessors.newBuilder().withNodePreProcessor(ChatTemplate::beforeNode).build())
        .withFailOnUnknownTokens(false).withLegacyOverrides(python).build());
    j.getGlobalContext().registerFunction(new ELFunctionDefinition("", "raise_exception", ChatTemplate.class, "raiseException",
        String.class));
    j.getGlobalContext().registerFunction(new ELFunctionDefinition("", "strftime_now", ChatTemplate.class, "strftimeNow",
        String.class));
    // Python's json.dumps, as transformers' tojson writes (", " and ": " separators): Jinjava's own is compact.
    j.getGlobalContext().registerFilter(new PythonJsonFilter());
    return j;
  }

  /** Python's string methods first (templates call them), then Jinjava's own resolver (read-only, its default). */
  private static ELResolver resolver() {
    CompositeELResolver r = new CompositeELResolver();
    r.add(new PythonStringMethods());
    r.add(JinjavaInterpreterResolver.DEFAULT_RESOLVER_READ_ONLY);
    return r;
  }

  /** The state of one render on its thread. */
  private record Render(long deadlineNanos, Clock clock) {}

  /** Before each node: a render past its deadline stops there (a loop of loops cannot hold the thread). */
  private static void beforeNode(Node node, JinjavaInterpreter interpreter) {
    Render r = CURRENT.get();
    if (r != null && System.nanoTime() - r.deadlineNanos() > 0) {
      throw new RenderTimedOut();
    }
  }

  /** What a template's {@code raise_exception(msg)} calls: the render fails with {@code message}. */
  public static Object raiseException(String message) {
    throw new TemplateRaised(message);
  }

  /**
   * What a template's {@code strftime_now(format)} calls (Llama 3's templates date their system prompt):
   * the render's clock formatted as Python's {@code datetime.now().strftime} in the C locale does.
   */
  public static String strftimeNow(String format) {
    Render r = CURRENT.get();
    ZonedDateTime now = ZonedDateTime.now(r != null ? r.clock() : Clock.systemDefaultZone());
    StringBuilder out = new StringBuilder();
    for (int i = 0; i < format.length(); i++) {
      char c = format.charAt(i);
      if (c != '%' || i + 1 == format.length()) {
        out.append(c);
        continue;
      }
      char d = format.charAt(++i);
      switch (d) {
        case 'd' -> out.append(String.format(Locale.ROOT, "%02d", now.getDayOfMonth()));
        case 'm' -> out.append(String.format(Locale.ROOT, "%02d", now.getMonthValue()));
        case 'Y' -> out.append(now.getYear());
        case 'y' -> out.append(String.format(Locale.ROOT, "%02d", now.getYear() % 100));
        case 'H' -> out.append(String.format(Locale.ROOT, "%02d", now.getHour()));
        case 'M' -> out.append(String.format(Locale.ROOT, "%02d", now.getMinute()));
        case 'S' -> out.append(String.format(Locale.ROOT, "%02d", now.getSecond()));
        case 'b' -> out.append(now.getMonth().getDisplayName(TextStyle.SHORT, Locale.ENGLISH));
        case 'B' -> out.append(now.getMonth().getDisplayName(TextStyle.FULL, Locale.ENGLISH));
        case 'a' -> out.append(now.getDayOfWeek().getDisplayName(TextStyle.SHORT, Locale.ENGLISH));
        case 'A' -> out.append(now.getDayOfWeek().getDisplayName(TextStyle.FULL, Locale.ENGLISH));
        case 'j' -> out.append(String.format(Locale.ROOT, "%03d", now.getDayOfYear()));
        case '%' -> out.append('%');
        default -> out.append('%').append(d); // as Python leaves a directive it does not know
      }
    }
    return out.toString();
  }

  /** A template called {@code raise_exception}: it refuses the conversation (e.g. roles that do not alternate). */
  static final class TemplateRaised extends RuntimeException {
    TemplateRaised(String message) {
      super(message);
    }
  }

  /** A render ran past its deadline. */
  private static final class RenderTimedOut extends RuntimeException {
    RenderTimedOut() {
      super(null, null, false, false);
    }
  }

  /** The special-token texts the template sees ({@code bos_token -> "<s>"}, ...). */
  Map<String, String> specialTokens() {
    return specialTokens;
  }

  /**
   * The variables the template renders with, as {@code apply_chat_template} passes them: the one place they
   * are made (tools and documents join them here when requests carry them).
   */
  Map<String, Object> variables(List<OpenAiRequest.Message> messages, boolean addGenerationPrompt) {
    return variables(messages, addGenerationPrompt, List.of());
  }

  /**
   * As {@link #variables(List, boolean)} with {@code tools} (empty: none, the variable is then left out as
   * transformers leaves it): each the request's {@code {"type": "function", "function": {...}}} as sent. An
   * assistant's tool calls are {@code tool_calls: [{id, type, function: {name, arguments}}]} with the arguments
   * as an object (as vLLM passes them: templates such as Qwen2.5's write {@code arguments | tojson}); a tool's
   * answer carries its {@code tool_call_id}.
   */
  Map<String, Object> variables(List<OpenAiRequest.Message> messages, boolean addGenerationPrompt, List<OpenAiRequest.Tool> tools) {
    List<Map<String, Object>> list = new ArrayList<>();
    for (OpenAiRequest.Message m : messages) {
      Map<String, Object> map = new LinkedHashMap<>();
      map.put("role", m.role());
      map.put("content", m.content());
      if (!m.toolCalls().isEmpty()) {
        List<Map<String, Object>> calls = new ArrayList<>();
        for (OpenAiRequest.ToolCall c : m.toolCalls()) {
          Map<String, Object> function = new LinkedHashMap<>();
          function.put("name", c.name());
          function.put("arguments", javaValue(c.arguments()));
          Map<String, Object> call = new LinkedHashMap<>();
          call.put("id", c.id());
          call.put("type", "function");
          call.put("function", function);
          calls.add(call);
        }
        map.put("tool_calls", calls);
      }
      if (m.toolCallId() != null) {
        map.put("tool_call_id", m.toolCallId());
      }
      list.add(map);
    }
    Map<String, Object> context = new HashMap<>(specialTokens);
    context.put("messages", list);
    context.put("add_generation_prompt", addGenerationPrompt);
    if (!tools.isEmpty()) {
      context.put("tools", tools.stream().map(t -> TensorJson.MAPPER.convertValue(t.definition(), Object.class)).toList());
    }
    return context;
  }

  /**
   * A call's arguments as the maps, lists, strings, numbers and booleans a template reads; a text that is not JSON (a call
   * cut short by max_tokens, sent back) stays the text, as transformers gets a string it is given.
   */
  private static Object javaValue(String json) {
    try {
      return TensorJson.MAPPER.readValue(json, Object.class);
    } catch (java.io.IOException e) {
      return json;
    }
  }

  /** {@link #render} on {@code executor} (the dispatcher of {@link ChatTemplateSettings#dispatcher()}). */
  CompletionStage<String> renderAsync(List<OpenAiRequest.Message> messages, boolean addGenerationPrompt, Executor executor) {
    return renderAsync(messages, addGenerationPrompt, List.of(), executor);
  }

  /** {@link #render(List, boolean, List)} on {@code executor}. */
  CompletionStage<String> renderAsync(List<OpenAiRequest.Message> messages, boolean addGenerationPrompt, List<OpenAiRequest.Tool> tools,
      Executor executor) {
    return CompletableFuture.supplyAsync(() -> render(messages, addGenerationPrompt, tools), executor);
  }

  /**
   * The prompt text of {@code messages}, ending with the assistant's turn opened when
   * {@code addGenerationPrompt}. A template that fails, refuses the messages, runs past the render timeout
   * or writes more than the output limit is an {@link OpenAiError} (400, param {@code messages}) saying so.
   */
  String render(List<OpenAiRequest.Message> messages, boolean addGenerationPrompt) {
    return render(messages, addGenerationPrompt, List.of());
  }

  /** As {@link #render(List, boolean)}, the template given {@code tools} (empty: none). */
  String render(List<OpenAiRequest.Message> messages, boolean addGenerationPrompt, List<OpenAiRequest.Tool> tools) {
    Map<String, Object> context = variables(messages, addGenerationPrompt, tools);
    RenderResult result;
    Render previous = CURRENT.get();
    CURRENT.set(new Render(System.nanoTime() + settings.renderTimeout().toNanos(), clock));
    try {
      result = jinjava.renderForResult(template, context);
    } catch (RuntimeException e) {
      throw failed(e);
    } finally {
      if (previous == null) {
        CURRENT.remove();
      } else {
        CURRENT.set(previous);
      }
    }
    for (TemplateError e : result.getErrors()) {
      if (e.getSeverity() == TemplateError.ErrorType.FATAL) {
        throw failed(e.getException() != null ? e.getException() : new RuntimeException(e.getMessage()));
      }
    }
    return result.getOutput();
  }

  /** The 400 of a render that threw {@code thrown} (Jinjava wraps what a hook threw in its own exceptions). */
  private OpenAiError failed(Throwable thrown) {
    for (Throwable t = thrown; t != null && t.getCause() != t; t = t.getCause()) {
      if (t instanceof TemplateRaised r) {
        return refused(r.getMessage());
      }
      if (t instanceof RenderTimedOut) {
        return refused("rendering took longer than " + settings.renderTimeout().toMillis() + " ms ("
            + ChatTemplateSettings.ROOT + ".render-timeout): shorten the conversation, or raise the limit there");
      }
      if (t instanceof OutputTooBigException) {
        return refused("the prompt grew past " + settings.maxOutputChars() + " characters (" + ChatTemplateSettings.ROOT
            + ".max-output-chars): shorten the conversation, or raise the limit there");
      }
    }
    return refused(Optional.ofNullable(thrown.getMessage()).orElse(thrown.toString()));
  }

  private OpenAiError refused(String why) {
    return OpenAiError.invalid("messages", "the chat template of model '" + model + "' refused these messages: " + why);
  }
}
