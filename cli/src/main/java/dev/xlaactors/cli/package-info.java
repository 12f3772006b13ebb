/** The command line, {@code bin/xla-actors}: import, generate, score, embed and serve model packages. */
package dev.xlaactors.cli;
