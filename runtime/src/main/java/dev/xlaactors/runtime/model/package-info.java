/**
 * Models: compiled programs with parameters bound to device-resident buffers ({@link
 * dev.xlaactors.runtime.model.Model}), the per-run {@link dev.xlaactors.runtime.model.Argument}s (host
 * tensors, device buffers, donated buffers), and bringing models in from the artifacts they are shipped
 * as: {@code jax.export} serialized exports ({@link dev.xlaactors.runtime.model.JaxExport}) and weights
 * read from safetensors files ({@link dev.xlaactors.runtime.model.SafeTensors}), memory-mapped and
 * validated before any tensor is read.
 */
package dev.xlaactors.runtime.model;
