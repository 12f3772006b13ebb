/**
 * Drawing the next token: {@link dev.xlaactors.lm.sampling.SamplingParams} (a request's sampling as
 * plain data), {@link dev.xlaactors.lm.sampling.Sampler} (one row of logits to one
 * {@link dev.xlaactors.lm.sampling.Sample}) and {@link dev.xlaactors.lm.sampling.SequenceState} (what a
 * sequence carries between steps: its random generator and its tokens).
 */
package dev.xlaactors.lm.sampling;
