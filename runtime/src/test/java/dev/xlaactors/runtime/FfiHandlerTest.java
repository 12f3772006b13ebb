package dev.xlaactors.runtime;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.xlaactors.error.ErrorCode;
import dev.xlaactors.error.ExecutionFailedException;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** The FFI proof: a handler of the bridge, registered at run time, called from a compiled program. */
class FfiHandlerTest {
  private static XlaClient client;

  @BeforeAll
  static void start() {
    client = XlaClient.create();
  }

  @AfterAll
  static void stop() {
    client.close();
  }

  @Test
  void pluginReportsFfiHandlerRegistration() {
    assertTrue(client.plugin().hasFfiHandlers(), "the pinned plugin's FFI extension must register handlers");
  }

  @Test
  void handlerAddsTheAttributeAndScalesByPerRunData() {
    float[] input = randomFloats(6, new Random());
    try (Executable exe = client.compile(TestPrograms.scaleAdd("2.5", null))) {
      for (int run = 1; run <= 3; run++) {
        float scale = run * 1.5f;
        try (RunContext context = RunContext.create(client.plugin(), run, scale)) {
          HostTensor out = exe.run(List.of(HostTensor.ofFloats(input, 2, 3)), context).get(0);
          float[] expected = new float[6];
          for (int i = 0; i < 6; i++) {
            expected[i] = input[i] * scale + 2.5f;
          }
          assertArrayEquals(expected, out.toFloatArray(), 0f, "run " + run);
        }
      }
    }
  }

  @Test
  void runWithoutContextUsesScaleOne() {
    float[] input = {1, 2, 3, 4, 5, 6};
    try (Executable exe = client.compile(TestPrograms.scaleAdd("-1.0", null))) {
      HostTensor out = exe.run(HostTensor.ofFloats(input, 2, 3)).get(0);
      assertArrayEquals(new float[] {0, 1, 2, 3, 4, 5}, out.toFloatArray(), 0f);
    }
  }

  @Test
  void handlerErrorFailsTheRunWithItsMessageAndTheNextRunWorks() {
    try (Executable failing = client.compile(TestPrograms.scaleAdd("1.0", "the handler refused this input"));
        Executable working = client.compile(TestPrograms.scaleAdd("1.0", null))) {
      HostTensor input = HostTensor.ofFloats(new float[6], 2, 3);
      ExecutionFailedException e = assertThrows(ExecutionFailedException.class, () -> failing.run(input));
      assertTrue(e.getMessage().contains("the handler refused this input"), e.getMessage());
      assertEquals(ErrorCode.FAILED_PRECONDITION, e.code());
      assertArrayEquals(new float[] {1, 1, 1, 1, 1, 1}, working.run(input).get(0).toFloatArray(), 0f);
    }
  }

  static float[] randomFloats(int n, Random random) {
    float[] values = new float[n];
    for (int i = 0; i < n; i++) {
      values[i] = random.nextFloat() * 10 - 5;
    }
    return values;
  }
}
