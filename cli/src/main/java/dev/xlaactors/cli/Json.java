package dev.xlaactors.cli;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonGenerator;
import java.io.IOException;
import java.io.OutputStream;

/** The JSON the commands print: one compact document per line, on standard output. */
final class Json {
  private static final JsonFactory FACTORY = new JsonFactory();

  private Json() {}

  /** Writes {@code values} as a JSON array of numbers (each float's shortest decimal form). */
  static void writeFloats(JsonGenerator g, float[] values) throws IOException {
    g.writeStartArray();
    for (float v : values) {
      g.writeNumber(v);
    }
    g.writeEndArray();
  }

  /** A generator writing to {@code out}, which it leaves open. */
  static JsonGenerator generator(OutputStream out) throws IOException {
    return FACTORY.createGenerator(out).disable(JsonGenerator.Feature.AUTO_CLOSE_TARGET);
  }
}
