package dev.xlaactors.http;

import com.hubspot.jinjava.Jinjava;
import com.hubspot.jinjava.JinjavaConfig;
import com.hubspot.jinjava.LegacyOverrides;
import com.hubspot.jinjava.interpret.RenderResult;
import com.hubspot.jinjava.interpret.TemplateError;
import com.hubspot.jinjava.lib.fn.ELFunctionDefinition;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * A model's chat template (the Jinja of its {@code tokenizer_config.json} or {@code chat_template.jinja}),
 * rendered as Hugging Face's {@code apply_chat_template} renders it: with {@code messages} (each
 * {@code {"role", "content"}}), {@code add_generation_prompt}, {@code bos_token}, {@code eos_token},
 * {@code raise_exception(msg)}, and Jinja's {@code trim_blocks} and {@code lstrip_blocks} on. The engine is
 * HubSpot's Jinjava. Immutable and thread-safe (every render has its own interpreter).
 */
final class ChatTemplate {
  /** The most characters a rendered prompt may have (a template that loops away is stopped). */
  private static final long MAX_OUTPUT = 4L << 20;
  private static final Jinjava JINJAVA = jinjava();

  private final String model;
  private final String template;
  private final String bosToken;
  private final String eosToken;

  /** The template {@code template} of {@code model}, with its tokenizer's special token texts ({@code ""} when it has none). */
  ChatTemplate(String model, String template, String bosToken, String eosToken) {
    this.model = model;
    this.template = template;
    this.bosToken = bosToken;
    this.eosToken = eosToken;
  }

  private static Jinjava jinjava() {
    // Jinjava's corrections towards Python's Jinja (which the templates are written for): {{- -}} trims around
    // expressions too (templates such as Qwen2.5's and Llama 3's rely on it), Python's operator precedence,
    // dict literals with evaluated keys, iteration over a dict's keys, Python's rendering of lists and dicts.
    LegacyOverrides python = LegacyOverrides.newBuilder().withUseTrimmingForNotesAndExpressions(true).withUseNaturalOperatorPrecedence(true)
        .withEvaluateMapKeys(true).withIterateOverMapKeys(true).withUsePyishObjectMapper(true).build();
    Jinjava j = new Jinjava(JinjavaConfig.newBuilder().withTrimBlocks(true).withLstripBlocks(true).withMaxOutputSize(MAX_OUTPUT)
        .withFailOnUnknownTokens(false).withLegacyOverrides(python).build());
    j.getGlobalContext().registerFunction(new ELFunctionDefinition("", "raise_exception", ChatTemplate.class, "raiseException",
        String.class));
    return j;
  }

  /** What a template's {@code raise_exception(msg)} calls: the render fails with {@code message}. */
  public static Object raiseException(String message) {
    throw new TemplateRaised(message);
  }

  /** A template called {@code raise_exception}: it refuses the conversation (e.g. roles that do not alternate). */
  static final class TemplateRaised extends RuntimeException {
    TemplateRaised(String message) {
      super(message);
    }
  }

  /**
   * The prompt text of {@code messages}, ending with the assistant's turn opened when
   * {@code addGenerationPrompt}. A template that fails or refuses the messages is an {@link OpenAiError}
   * (400, param {@code messages}) quoting its error.
   */
  String render(List<OpenAiRequest.Message> messages, boolean addGenerationPrompt) {
    List<Map<String, Object>> list = new ArrayList<>();
    for (OpenAiRequest.Message m : messages) {
      Map<String, Object> map = new LinkedHashMap<>();
      map.put("role", m.role());
      map.put("content", m.content());
      list.add(map);
    }
    Map<String, Object> context = new HashMap<>();
    context.put("messages", list);
    context.put("add_generation_prompt", addGenerationPrompt);
    context.put("bos_token", bosToken);
    context.put("eos_token", eosToken);
    RenderResult result;
    try {
      result = JINJAVA.renderForResult(template, context);
    } catch (RuntimeException e) {
      throw failed(e.getMessage());
    }
    for (TemplateError e : result.getErrors()) {
      if (e.getSeverity() == TemplateError.ErrorType.FATAL) {
        throw failed(raised(e.getException()).orElse(e.getMessage()));
      }
    }
    return result.getOutput();
  }

  /** The message of a {@code raise_exception} among the causes of {@code thrown} (Jinjava wraps it in its own). */
  private static java.util.Optional<String> raised(Throwable thrown) {
    for (Throwable t = thrown; t != null && t.getCause() != t; t = t.getCause()) {
      if (t instanceof TemplateRaised r) {
        return java.util.Optional.of(r.getMessage());
      }
    }
    return java.util.Optional.empty();
  }

  private OpenAiError failed(String why) {
    return OpenAiError.invalid("messages", "the chat template of model '" + model + "' refused these messages: " + why);
  }
}
