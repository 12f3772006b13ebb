package dev.xlaactors.examples.gpt;

import dev.xlaactors.actors.CallbackRuntime;
import dev.xlaactors.actors.CallbackServer;
import dev.xlaactors.actors.DeviceRunHandle;
import dev.xlaactors.error.CallbackException;
import dev.xlaactors.error.ErrorCode;
import dev.xlaactors.runtime.DType;
import dev.xlaactors.runtime.DeviceBuffer;
import dev.xlaactors.runtime.HostCall;
import dev.xlaactors.runtime.HostTensor;
import dev.xlaactors.runtime.TensorType;
import dev.xlaactors.runtime.model.Argument;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletionException;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.actor.typed.Behavior;
import org.apache.pekko.actor.typed.Props;
import org.apache.pekko.actor.typed.javadsl.Behaviors;

/**
 * The decode steps of a {@link GptModel} run through the supervised layer: each step is a {@link
 * CallbackRuntime#startOnDevice} run (outputs and the KV cache stay on the device, the cache donated), and
 * the program's host callback "sample" is served by a {@link CallbackServer} actor registered with the
 * runtime, so every sampling call is supervised: timed out by {@code xla-actors.actors.callbacks}
 * ({@code default-timeout}, or {@code timeouts.sample}), and a failure aborts the step with an error naming
 * the callback.
 *
 * <p>The callback's name is fixed in the exported program, so one server answers every generation: it
 * routes each call to the generation whose run made it, by run id (a call that arrives before its
 * generation has bound the run id waits for it). One per model and runtime: the registration fixes the
 * output template {@code s32[batch]}; {@link #close()} unregisters it. Thread-safe.
 */
public final class GptSampling implements AutoCloseable {
  private static final String CALLBACK = "sample";
  private static final AtomicLong SERVERS = new AtomicLong();

  private final CallbackRuntime runtime;
  private final GptModel model;
  private final ActorRef<Object> actor; // takes CallbackServer.Request and Stop
  private final ActorRef<CallbackServer.Request> server;
  private final Map<Long, GptGeneration> generations = new HashMap<>(); // by run id, while a step runs
  private final Map<Long, CallbackServer.Request> waiting = new HashMap<>(); // calls whose run is not bound yet
  // Runs whose step has returned (the last 64): a call of theirs that comes late is refused, not kept waiting.
  private final Map<Long, Boolean> finished = new java.util.LinkedHashMap<>() {
    @Override
    protected boolean removeEldestEntry(Map.Entry<Long, Boolean> eldest) {
      return size() > 64;
    }
  };

  private GptSampling(CallbackRuntime runtime, GptModel model, ActorSystem<?> system) {
    this.runtime = runtime;
    this.model = model;
    this.actor = system.systemActorOf(serve(), "gpt-sampling-" + SERVERS.incrementAndGet(), Props.empty());
    this.server = actor.narrow();
  }

  /**
   * Registers the "sample" callback of {@code model}'s decode program with {@code runtime}, served here;
   * fails if the runtime already has a callback of that name (close the other model's sampling first).
   */
  public static GptSampling register(CallbackRuntime runtime, GptModel model, ActorSystem<?> system) {
    GptSampling sampling = new GptSampling(runtime, model, system);
    try {
      runtime.registerServer(CALLBACK, List.of(TensorType.of(DType.S32, model.batch())), sampling.server)
          .toCompletableFuture().join();
      return sampling;
    } catch (CompletionException e) {
      sampling.actor.tell(Stop.INSTANCE);
      throw e.getCause() instanceof RuntimeException r ? r : e;
    }
  }

  /** The model whose decode steps this serves. */
  public GptModel model() {
    return model;
  }

  /** A message only this class sends: stops the serving actor. */
  private enum Stop { INSTANCE }

  private Behavior<Object> serve() {
    return Behaviors.receive(Object.class)
        .onMessageEquals(Stop.INSTANCE, Behaviors::stopped)
        .onMessage(CallbackServer.Request.class, this::onRequest)
        .build();
  }

  private Behavior<Object> onRequest(CallbackServer.Request request) {
    GptGeneration generation;
    synchronized (this) {
      generation = generations.get(request.call().runId());
      if (generation == null && !finished.containsKey(request.call().runId())) {
        waiting.put(request.call().runId(), request); // answered when step() binds the run
        return Behaviors.same();
      }
    }
    if (generation == null) { // its step is over (the run was aborted): the supervisor has given the call up
      request.replyTo().tell(CallbackServer.Response.failed(request.call().tag(), new CallbackException(CALLBACK,
          ErrorCode.CANCELLED, "run " + request.call().runId() + " has ended; its sampling call came too late")));
      return Behaviors.same();
    }
    answer(request, generation);
    return Behaviors.same();
  }

  /** Answers {@code request} with {@code generation}'s sampled tokens, then closes the call's inputs. */
  static void answer(CallbackServer.Request request, GptGeneration generation) {
    HostCall call = request.call();
    try {
      if (!call.callbackName().equals(CALLBACK)) {
        throw new CallbackException(call.callbackName(), ErrorCode.INVALID_ARGUMENT,
            "the decode program called '" + call.callbackName() + "', expected '" + CALLBACK + "'");
      }
      int[] tokens = generation.sampleFrom(call.inputs().get(0).data().asFloatBuffer()); // Java's copy, read in place
      request.replyTo().tell(CallbackServer.Response.ok(call.tag(), List.of(HostTensor.ofInts(tokens, tokens.length))));
    } catch (RuntimeException e) {
      request.replyTo().tell(CallbackServer.Response.failed(call.tag(), e));
    } finally {
      // The call's inputs are Java's copies (pooled memory when large, a batch of logits): given back now,
      // not when the GC finds them. The answer holds none of them.
      call.inputs().forEach(HostTensor::close);
    }
  }

  /**
   * One supervised decode step of {@code generation}: {@code token} (s32[batch], host or device) at
   * {@code pos}, {@code cache} donated; returns the sampled tokens and the updated cache, on the device.
   */
  List<DeviceBuffer> step(GptGeneration generation, Argument token, int pos, DeviceBuffer cache) {
    DeviceRunHandle run;
    try {
      run = runtime.startOnDevice(model.decodeSampleModel(),
          List.of(token, Argument.of(HostTensor.scalar(pos)), Argument.donated(cache)));
    } catch (RuntimeException e) {
      cache.close(); // refused before the run took it
      throw e;
    }
    CallbackServer.Request early;
    synchronized (this) {
      generations.put(run.runId(), generation);
      early = waiting.remove(run.runId());
    }
    if (early != null) {
      answer(early, generation);
    }
    try {
      return run.result().toCompletableFuture().join();
    } catch (CompletionException e) {
      throw e.getCause() instanceof RuntimeException r ? r : e;
    } finally {
      synchronized (this) {
        generations.remove(run.runId());
        waiting.remove(run.runId()); // an aborted run's call: its supervisor has given it up
        finished.put(run.runId(), Boolean.TRUE);
      }
      if (!cache.isClosed()) {
        cache.close(); // the run failed before XLA took the cache
      }
    }
  }

  /** Unregisters "sample" from the runtime and stops the serving actor. */
  @Override
  public void close() {
    try {
      runtime.unregister(CALLBACK).toCompletableFuture().join();
    } finally {
      actor.tell(Stop.INSTANCE);
    }
  }
}
