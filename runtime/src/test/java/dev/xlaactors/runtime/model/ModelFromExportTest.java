package dev.xlaactors.runtime.model;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.xlaactors.error.InvalidArgumentException;
import dev.xlaactors.graph.JaxFixture;
import dev.xlaactors.runtime.HostTensor;
import dev.xlaactors.runtime.XlaClient;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A model loaded as it is shipped: the {@code mlp} jax.export artifact (tools/jax_export_fixtures.py:
 * {@code f(params, x)} with params a dict of b1, b2, w1, w2) and its weights in a safetensors file, bound
 * by name; a run passes only x and gives JAX's outputs.
 */
class ModelFromExportTest {
  private static XlaClient client;

  @TempDir Path dir;

  @BeforeAll
  static void open() {
    client = XlaClient.create();
  }

  @AfterAll
  static void close() {
    client.close();
  }

  private static JaxExport mlp() throws Exception {
    return JaxExport.read(Path.of(ModelFromExportTest.class.getResource("/fixtures/export/mlp.jaxexport").toURI()));
  }

  /** The fixture's inputs by the export's input names (b1, b2, w1, w2, then x as "[1]"). */
  private static Map<String, HostTensor> inputsByName(JaxExport export, JaxFixture fixture) {
    Map<String, HostTensor> byName = new LinkedHashMap<>();
    for (int i = 0; i < fixture.inputs().size(); i++) {
      byName.put(export.inputNames().get(i), fixture.inputs().get(i));
    }
    return byName;
  }

  @Test
  void weightsFromASafetensorsFileAreBoundByNameAndARunTakesOnlyTheInput() throws Exception {
    JaxExport export = mlp();
    JaxFixture fixture = JaxFixture.load("export/mlp");
    Map<String, HostTensor> inputs = inputsByName(export, fixture);
    HostTensor x = inputs.remove("[1]");
    Path file = dir.resolve("mlp.safetensors");
    SafeTensors.write(file, inputs, Map.of());
    long uploadsBefore = client.uploadCount();
    try (SafeTensors weights = SafeTensors.open(file);
        Model model = Model.load(export, weights, client.devices().get(0))) {
      assertEquals(List.of("[1]"), model.inputNames());
      assertEquals(4, client.uploadCount() - uploadsBefore, "each weight uploaded once");
      for (int run = 0; run < 3; run++) {
        fixture.check(model.run(List.of(Argument.of(x)), null), 1e-5, 1e-6, "mlp run " + run);
      }
      assertEquals(4 + 3, client.uploadCount() - uploadsBefore, "a run uploads only x");
    }
  }

  @Test
  void aWeightWithNoParameterOrOfAnotherShapeFailsNamingIt() throws Exception {
    JaxExport export = mlp();
    Map<String, HostTensor> inputs = inputsByName(export, JaxFixture.load("export/mlp"));
    HostTensor x = inputs.remove("[1]");

    Map<String, HostTensor> extra = new LinkedHashMap<>(inputs);
    extra.put("w3", x);
    Path extraFile = dir.resolve("extra.safetensors");
    SafeTensors.write(extraFile, extra, Map.of());
    try (SafeTensors weights = SafeTensors.open(extraFile)) {
      InvalidArgumentException e = assertThrows(InvalidArgumentException.class,
          () -> Model.load(export, weights, client.devices().get(0)));
      assertTrue(e.getMessage().contains("weight 'w3'") && e.getMessage().contains("no parameter"), e.getMessage());
    }

    Map<String, HostTensor> misShaped = new LinkedHashMap<>(inputs);
    misShaped.put("b1", inputs.get("b2"));
    Path misShapedFile = dir.resolve("misshaped.safetensors");
    SafeTensors.write(misShapedFile, misShaped, Map.of());
    try (SafeTensors weights = SafeTensors.open(misShapedFile)) {
      InvalidArgumentException e = assertThrows(InvalidArgumentException.class,
          () -> Model.load(export, weights, client.devices().get(0)));
      assertTrue(e.getMessage().contains("weight 'b1'") && e.getMessage().contains("expected "), e.getMessage());
    }
  }
}
