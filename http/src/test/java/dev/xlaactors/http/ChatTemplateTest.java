package dev.xlaactors.http;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import org.junit.jupiter.api.Test;

/** Chat templates as Hugging Face writes and renders them (Jinja with trim_blocks and lstrip_blocks), by Jinjava. */
class ChatTemplateTest {
  private static final List<OpenAiRequest.Message> MESSAGES = List.of(new OpenAiRequest.Message("system", "Be brief."),
      new OpenAiRequest.Message("user", "Hi!"));

  @Test
  void zephyrStyleTemplateWithEosToken() {
    // The template of the llama test checkpoint (cli/src/test/resources/hf/llama/tokenizer_config.json).
    ChatTemplate t = new ChatTemplate("llama", "{% for message in messages %}{{ '<|' + message['role'] + '|>\\n' + message['content'] "
        + "+ eos_token + '\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>\\n' }}{% endif %}", "<s>", "</s>");
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
    ChatTemplate t = new ChatTemplate("qwen", chatml, "", "<|im_end|>");
    assertEquals("<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\n",
        t.render(MESSAGES, true));
    assertEquals("<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\n",
        t.render(List.of(new OpenAiRequest.Message("user", " Hi! ")), true));
  }

  @Test
  void raiseExceptionRefusesTheMessagesWithTheTemplatesWords() {
    ChatTemplate t = new ChatTemplate("strict", "{% for m in messages %}{% if m['role'] == 'system' %}"
        + "{{ raise_exception('System role not supported') }}{% endif %}{{ m['content'] }}{% endfor %}", "", "");
    OpenAiError e = assertThrows(OpenAiError.class, () -> t.render(MESSAGES, true));
    assertEquals(400, e.status());
    assertEquals("messages", e.param());
    assertTrue(e.getMessage().contains("System role not supported"), e.getMessage());
    assertEquals("Hi!", t.render(List.of(new OpenAiRequest.Message("user", "Hi!")), true));
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
    ChatTemplate t = new ChatTemplate("qwen2.5", qwen, "", "<|im_end|>");
    assertEquals("<|im_start|>system\nYou are Qwen.<|im_end|>\n<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\nHello.<|im_end|>\n"
        + "<|im_start|>assistant\n", t.render(List.of(new OpenAiRequest.Message("user", "Hi!"),
            new OpenAiRequest.Message("assistant", " Hello. ")), true));
    assertEquals("<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi!<|im_end|>\n", t.render(MESSAGES, false));
  }
}
