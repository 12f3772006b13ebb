/**
 * Structured output: JSON schemas compiled to automata over UTF-8 bytes ({@link
 * dev.xlaactors.lm.structured.JsonSchemaAutomaton}, {@link dev.xlaactors.lm.structured.ByteAutomaton}), lifted to a
 * tokenizer's vocabulary with a per-state cache of token masks ({@link dev.xlaactors.lm.structured.TokenGrammar}),
 * and applied in the sampler as a logits processor ({@link dev.xlaactors.lm.structured.GrammarProcessor}), so the
 * output of any model, even random weights, parses.
 */
package dev.xlaactors.lm.structured;
