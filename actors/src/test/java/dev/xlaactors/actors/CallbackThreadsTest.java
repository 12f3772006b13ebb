package dev.xlaactors.actors;

import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** The callback threads' bookkeeping of threads that wait in nested runs, get stuck, and come back. */
class CallbackThreadsTest {

  /**
   * A thread that waits in a nested run and whose call is given up meanwhile counts as blocked and as stuck, so
   * two replacements start for it; when it comes back, one of the two idle replacements is a surplus thread. The
   * next call's wake-up used to reach that surplus thread, which retired without taking the call, leaving it
   * queued while the other thread slept: NestedCallbacksTest's follow-up run of depth 32 waited out its 120 s
   * callback timeout so (one execution in flight, every callback thread idle).
   */
  @Test
  void aCallAfterASurplusThreadAppearsIsStillRun() throws Exception {
    CallbackThreads threads = new CallbackThreads("test-callbacks", 1, 4, Duration.ZERO);
    try {
      CountDownLatch entered = new CountDownLatch(1);
      CountDownLatch release = new CountDownLatch(1);
      CountDownLatch returned = new CountDownLatch(1);
      threads.execute(() -> {
        threads.whileWaiting(() -> { // a callback running a program: another thread takes its place
          entered.countDown();
          awaitQuietly(release);
          return null;
        });
        threads.stuckChanged(-1); // the given-up function returned
        returned.countDown();
      });
      assertTrue(entered.await(5, TimeUnit.SECONDS));
      threads.stuckChanged(+1); // its call was given up while it waited: a replacement for the stuck thread too
      Thread.sleep(300); // both replacements start and park
      release.countDown();
      assertTrue(returned.await(5, TimeUnit.SECONDS));
      Thread.sleep(300); // every idle thread parks
      for (int i = 0; i < 3; i++) {
        CompletableFuture<Void> ran = new CompletableFuture<>();
        threads.execute(() -> ran.complete(null));
        ran.get(5, TimeUnit.SECONDS);
        Thread.sleep(100);
      }
    } finally {
      threads.close();
    }
  }

  private static void awaitQuietly(CountDownLatch latch) {
    try {
      latch.await();
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }
}
