/**
 * Bringing real models in: reading the artifacts models are shipped as ({@code jax.export} serialized
 * exports: {@link dev.xlaactors.runtime.model.JaxExport}), their weights (safetensors files, memory-mapped
 * and validated before any tensor is read: {@link dev.xlaactors.runtime.model.SafeTensors}), and binding
 * weights to the parameters of the compiled program.
 */
package dev.xlaactors.runtime.model;
