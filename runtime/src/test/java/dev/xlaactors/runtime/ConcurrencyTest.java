package dev.xlaactors.runtime;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

class ConcurrencyTest {
  @Test
  void eightThreadsRunOneExecutableWithCorrectResults() throws Exception {
    int threads = 8;
    int runsPerThread = 250;
    try (XlaClient client = XlaClient.create();
        Executable exe = client.compile(TestPrograms.ADD_F32_4)) {
      ExecutorService pool = Executors.newFixedThreadPool(threads);
      try {
        List<Future<Integer>> results = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
          long seed = t;
          results.add(
              pool.submit(
                  () -> {
                    Random random = new Random(seed);
                    int checked = 0;
                    for (int i = 0; i < runsPerThread; i++) {
                      float[] a = FfiHandlerTest.randomFloats(4, random);
                      float[] b = FfiHandlerTest.randomFloats(4, random);
                      float[] got =
                          exe.run(HostTensor.ofFloats(a), HostTensor.ofFloats(b)).get(0).toFloatArray();
                      for (int j = 0; j < 4; j++) {
                        assertEquals(a[j] + b[j], got[j], 0f);
                        checked++;
                      }
                    }
                    return checked;
                  }));
        }
        int total = 0;
        for (Future<Integer> r : results) {
          total += r.get(60, TimeUnit.SECONDS);
        }
        assertEquals(threads * runsPerThread * 4, total);
      } finally {
        pool.shutdownNow();
      }
    }
  }

  @Test
  void closingWhileOtherThreadsRunNeverCrashes() throws Exception {
    XlaClient client = XlaClient.create();
    Executable exe = client.compile(TestPrograms.ADD_F32_4);
    ExecutorService pool = Executors.newFixedThreadPool(4);
    try {
      List<Future<?>> running = new ArrayList<>();
      for (int t = 0; t < 4; t++) {
        running.add(
            pool.submit(
                () -> {
                  for (int i = 0; i < 500; i++) {
                    try {
                      exe.run(HostTensor.ofFloats(new float[4]), HostTensor.ofFloats(new float[4]));
                    } catch (IllegalStateException closed) {
                      return; // refused cleanly after close
                    }
                  }
                }));
      }
      Thread.sleep(20);
      exe.close();
      client.close();
      for (Future<?> f : running) {
        f.get(60, TimeUnit.SECONDS);
      }
    } finally {
      pool.shutdownNow();
    }
  }
}
