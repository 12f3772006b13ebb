/**
 * Bringing real models in: reading the artifacts models are shipped as ({@code jax.export} serialized
 * exports: {@link dev.xlaactors.runtime.model.JaxExport}), their weights (safetensors files, memory-mapped
 * and validated before any tensor is read: {@link dev.xlaactors.runtime.model.SafeTensors}), and binding
 * weights to the parameters of the compiled program: {@link dev.xlaactors.runtime.model.Model} (parameters
 * bound to device-resident buffers, shared by concurrent runs), {@link
 * dev.xlaactors.runtime.model.SegmentedModel} (the same for a program cut at its host calls), the one
 * handle a run takes, {@link dev.xlaactors.runtime.model.BoundProgram} (either of the two), and the per-run
 * {@link dev.xlaactors.runtime.model.Argument}s (host tensors, device buffers, donated buffers).
 */
package dev.xlaactors.runtime.model;
