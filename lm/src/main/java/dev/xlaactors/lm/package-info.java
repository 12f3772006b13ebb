/**
 * Language and embedding models over model packages ({@link dev.xlaactors.runtime.model.ModelPackage}):
 * tokenizers, an incremental detokenizer, sampling parameters and the sampler, a slot decoder over the
 * exported slot programs of any decoder, and embeddings.
 */
package dev.xlaactors.lm;
