package dev.xlaactors.http;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.time.ZoneOffset;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** Chat templates as Hugging Face writes and renders them (Jinja with trim_blocks and lstrip_blocks), by Jinjava. */
class ChatTemplateTest {
  private static final List<OpenAiRequest.Message> MESSAGES = List.of(new OpenAiRequest.Message("system", "Be brief."),
      new OpenAiRequest.Message("user", "Hi!"));

  @Test
  void zephyrStyleTemplateWithEosToken() {
    // The template of the llama test checkpoint (cli/src/test/resources/hf/llama/tokenizer_config.json).
    ChatTemplate t = new ChatTemplate("llama", "{% for message in messages %}{{ '<|' + message['role'] + '|>\\n' + message['content'] "
        + "+ eos_token + '\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>\\n' }}{% endif %}", Map.of("bos_token", "<s>", "eos_token", "</s>"));
    assertEquals("<|system|>\nBe brief.</s>\n<|user|>\nHi!</s>\n<|assistant|>\n", t.render(MESSAGES, true));
    assertEquals("<|system|>\nBe brief.</s>\n<|user|>\nHi!</s>\n", t.render(MESSAGES, false));
  }

  @Test
  void chatMlWithBlockTagsLoopVariablesAndFilters() {
    // trim_blocks and lstrip_blocks: block tags on their own lines leave no blank lines or indentation.
    String chatml = """
        {% for message in messages %}
          {% if loop.first and message.role != 'system' %}
        <|im_start|>system
        You are helpful.<|im_end|>
          {% endif %}
        <|im_start|>{{ message.role }}
        {{ message.content | trim }}<|im_end|>
        {% endfor %}
        {% if add_generation_prompt %}
        <|im_start|>assistant
        {% endif %}
        """;
    ChatTemplate t = new ChatTemplate("qwen", chatml, Map.of("eos_token", "<|im_end|>"));
    assertEquals("<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\n",
        t.render(MESSAGES, true));
    assertEquals("<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\n",
        t.render(List.of(new OpenAiRequest.Message("user", " Hi! ")), true));
  }

  @Test
  void raiseExceptionRefusesTheMessagesWithTheTemplatesWords() {
    ChatTemplate t = new ChatTemplate("strict", "{% for m in messages %}{% if m['role'] == 'system' %}"
        + "{{ raise_exception('System role not supported') }}{% endif %}{{ m['content'] }}{% endfor %}", Map.of());
    OpenAiError e = assertThrows(OpenAiError.class, () -> t.render(MESSAGES, true));
    assertEquals(400, e.status());
    assertEquals("messages", e.param());
    assertTrue(e.getMessage().contains("System role not supported"), e.getMessage());
    assertEquals("Hi!", t.render(List.of(new OpenAiRequest.Message("user", "Hi!")), true));
  }

  @Test
  void keywordValuesAreWholeExpressionsAndTheReversingSliceWorks() {
    // Qwen3's forms: a keyword value with arithmetic on a filter, and messages[::-1]. String literals, a
    // macro's defaults and the messages (data) keep "=" and "[::-1]" as written.
    String template = """
        {%- macro tag(name, sep='=') %}{{ name }}{{ sep }}{% endmacro %}
        {%- set ns = namespace(last=messages|length - 1, text='a=b, c[::-1]', n=(2 * 3)) %}
        {{- ns.last }}|{{ ns.text }}|{{ ns.n }}|{{ tag('k') }}|
        {%- for m in messages[::-1] %}{{ m.content }};{% endfor %}
        {%- set ns.last = ns.last + 10 %}{{ ns.last }}
        """;
    ChatTemplate t = new ChatTemplate("qwen3-style", template, Map.of());
    assertEquals("2|a=b, c[::-1]|6|k=|x=(1)[::-1];Hi!;Be brief.;12", t.render(List.of(new OpenAiRequest.Message("system", "Be brief."),
        new OpenAiRequest.Message("user", "Hi!"), new OpenAiRequest.Message("user", "x=(1)[::-1]")), false));
  }

  @Test
  void qwenStyleTemplateWithWhitespaceControlMethodsAndNamespace() {
    // The constructs of Qwen2.5's and Llama 3's templates: {%- -%}, messages[0]['role'], loop.first, .strip(), namespace().
    String qwen = """
        {%- set ns = namespace(system=false) %}
        {%- for m in messages %}{%- if m.role == 'system' %}{%- set ns.system = true %}{%- endif %}{%- endfor %}
        {%- if not ns.system %}
            {{- '<|im_start|>system\nYou are Qwen.<|im_end|>\n' }}
        {%- endif %}
        {%- for message in messages %}
            {%- if message.role == "assistant" %}
                {{- '<|im_start|>' + message.role + '\n' + message.content.strip() + '<|im_end|>\n' }}
            {%- else %}
                {{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>\n' }}
            {%- endif %}
        {%- endfor %}
        {%- if add_generation_prompt %}
            {{- '<|im_start|>assistant\n' }}
        {%- endif %}
        """;
    ChatTemplate t = new ChatTemplate("qwen2.5", qwen, Map.of("eos_token", "<|im_end|>"));
    assertEquals("<|im_start|>system\nYou are Qwen.<|im_end|>\n<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\nHello.<|im_end|>\n"
        + "<|im_start|>assistant\n", t.render(List.of(new OpenAiRequest.Message("user", "Hi!"),
            new OpenAiRequest.Message("assistant", " Hello. ")), true));
    assertEquals("<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi!<|im_end|>\n", t.render(MESSAGES, false));
  }

  private static final String PLAIN = "{% for m in messages %}[{{ m['role'] }}]{{ m['content'] }}{% endfor %}";

  @Test
  void userContentIsDataNeverTemplateCode() {
    // Jinjava re-renders output holding {{ or {% unless nested interpretation is off: "{{ 7*7 }}" became "49".
    ChatTemplate t = new ChatTemplate("m", PLAIN, Map.of());
    String question = "How do I write {{ name }} or {{ 7*7 }}? And {% if true %}this{% endif %} {# note #}";
    assertEquals("[user]" + question, t.render(List.of(new OpenAiRequest.Message("user", question)), false));
  }

  @Test
  void nestedLoopsInContentDoNotRun() {
    String loops = "{% for a in range(1000) %}{% for b in range(1000) %}{% for c in range(1000) %}x{% endfor %}{% endfor %}{% endfor %}";
    ChatTemplate t = new ChatTemplate("m", PLAIN, Map.of());
    long start = System.nanoTime();
    assertEquals("[user]" + loops, t.render(List.of(new OpenAiRequest.Message("user", loops)), false));
    assertTrue(System.nanoTime() - start < 2_000_000_000L);
  }

  @Test
  void aTemplateThatLoopsAwayStopsAtTheRenderTimeout() {
    String loops = "{% for a in range(1000) %}{% for b in range(1000) %}{% for c in range(1000) %}{% if c == -1 %}x{% endif %}"
        + "{% endfor %}{% endfor %}{% endfor %}";
    ChatTemplateSettings settings = new ChatTemplateSettings(Duration.ofMillis(200), 1 << 20, ChatTemplateSettings.DEFAULTS.dispatcher());
    ChatTemplate t = new ChatTemplate("m", loops, Map.of(), settings, Clock.systemUTC());
    long start = System.nanoTime();
    OpenAiError e = assertThrows(OpenAiError.class, () -> t.render(MESSAGES, true));
    long ms = (System.nanoTime() - start) / 1_000_000;
    assertEquals(400, e.status());
    assertEquals("messages", e.param());
    assertTrue(e.getMessage().contains("xla-actors.http.chat-template.render-timeout"), e.getMessage());
    assertTrue(ms < 1500, "stopped after " + ms + " ms");
  }

  @Test
  void aPromptPastTheOutputLimitIsRefusedNamingIt() {
    ChatTemplateSettings settings = new ChatTemplateSettings(Duration.ofSeconds(2), 4096, ChatTemplateSettings.DEFAULTS.dispatcher());
    ChatTemplate t = new ChatTemplate("m", "{% for i in range(100) %}{{ messages[0]['content'] }}{% endfor %}", Map.of(), settings,
        Clock.systemUTC());
    OpenAiError e = assertThrows(OpenAiError.class, () -> t.render(List.of(new OpenAiRequest.Message("user", "0123456789".repeat(10))),
        false));
    assertTrue(e.getMessage().contains("xla-actors.http.chat-template.max-output-chars"), e.getMessage());
    assertEquals("0123456789".repeat(100), new ChatTemplate("m", "{% for i in range(100) %}{{ messages[0]['content'] }}{% endfor %}",
        Map.of()).render(List.of(new OpenAiRequest.Message("user", "0123456789")), false));
  }

  @Test
  void everySpecialTokenAndStrftimeNowAsHuggingFacePassesThem() {
    Clock clock = Clock.fixed(Instant.parse("2024-07-26T10:00:00Z"), ZoneOffset.UTC);
    ChatTemplate t = new ChatTemplate("m", "{{ bos_token }}|{{ eos_token }}|{{ unk_token }}|{{ pad_token }}|{{ strftime_now('%d %b %Y') }}",
        Map.of("bos_token", "<s>", "eos_token", "</s>", "unk_token", "<unk>", "pad_token", "<pad>"), ChatTemplateSettings.DEFAULTS, clock);
    assertEquals("<s>|</s>|<unk>|<pad>|26 Jul 2024", t.render(MESSAGES, true));
  }

  @Test
  void pythonStringMethodsAsTemplatesCallThem() {
    // SmolLM3's and Qwen3's templates call rstrip, lstrip and split; Java's String has none of them (or, for
    // strip, another idea of whitespace).
    ChatTemplate t = new ChatTemplate("m", "{% set c = messages[0]['content'] %}[{{ c.rstrip() }}][{{ c.lstrip('\\n ') }}]"
        + "[{{ c.split('</think>')[-1].strip() }}][{{ c.split() | join('|') }}][{{ c.split('x', 1) | join('|') }}]"
        + "[{{ c.strip().startswith('<think>') }}][{{ c.endswith(['a', '\\n']) }}][{{ 'hello wORLD'.title() }}]"
        + "[{{ 'MiXed'.lower() }}{{ 'MiXed'.upper() }}][{{ c.find('</think>') }}]", Map.of());
    String content = "\n <think>x y</think> answer\u00a0\n";
    assertEquals("[\n <think>x y</think> answer][<think>x y</think> answer\u00a0\n][answer][<think>x|y</think>|answer]"
        + "[\n <think>| y</think> answer\u00a0\n][true][true][Hello World][mixedMIXED][12]",
        t.render(List.of(new OpenAiRequest.Message("user", content)), false));
  }
}
