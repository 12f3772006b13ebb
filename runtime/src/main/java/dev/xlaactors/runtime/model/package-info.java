/**
 * Bringing models in from the artifacts they are shipped as: weights read from safetensors files ({@link
 * dev.xlaactors.runtime.model.SafeTensors}), memory-mapped and validated before any tensor is read.
 */
package dev.xlaactors.runtime.model;
