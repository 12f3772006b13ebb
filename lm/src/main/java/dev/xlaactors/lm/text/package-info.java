/**
 * Text and tokens: the {@link dev.xlaactors.lm.text.Tokenizer} interface with its Hugging Face
 * ({@code tokenizer.json}) and tiktoken implementations, a GPT-2 {@code tokenizer.json} writer, the
 * {@link dev.xlaactors.lm.text.IncrementalDetokenizer} that streams text safely token by token, and the
 * {@link dev.xlaactors.lm.text.StopStringMatcher} that cuts a stream at a stop string.
 */
package dev.xlaactors.lm.text;
