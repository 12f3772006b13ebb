package dev.xlaactors.cli;

import dev.xlaactors.actors.serve.ModelServer;
import dev.xlaactors.actors.serve.ServeSettings;
import dev.xlaactors.cluster.ClusterSettings;
import dev.xlaactors.cluster.ShardedComputations;
import dev.xlaactors.cluster.XlaCluster;
import dev.xlaactors.error.ErrorCode;
import dev.xlaactors.error.XlaException;
import dev.xlaactors.http.InferenceEndpoint;
import dev.xlaactors.http.TensorInference;
import dev.xlaactors.runtime.HostTensor;
import dev.xlaactors.runtime.Shape;
import dev.xlaactors.runtime.TensorType;
import dev.xlaactors.runtime.model.JaxExport;
import dev.xlaactors.runtime.model.ModelPackage;
import dev.xlaactors.runtime.model.ProgramSpec;
import dev.xlaactors.runtime.model.Role;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeoutException;
import org.apache.pekko.actor.typed.ActorSystem;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * {@link TensorInference} by the node of the cluster that holds the model: each row of a {@code /v2} request
 * is one run of {@link ShardedComputations} (the model's sharding entity, on whichever node sharding put it,
 * loads the package there once and runs its {@code main} program at its smallest batch), whatever node got
 * the HTTP request. The row is padded to that batch (copies of itself) and the first row of the outputs
 * answered.
 *
 * <p>Nothing is lost when a node goes: a run sent to a node that died before accepting it is sent again by
 * {@link ShardedComputations} until the model's entity starts on a survivor; a run accepted by a node that
 * then becomes unreachable or leaves fails there with {@code UNAVAILABLE}, and is sent again here (at most
 * {@value #MAX_SENDS} sends, within the row's deadline), so it is computed by the node sharding moves the
 * model to (a stateless model computes the same answer twice if the first node was only slow). A row that
 * still fails is answered with the error, naming the model, the node and how many times it was sent;
 * past its deadline, with {@code DEADLINE_EXCEEDED}. A cancelled row is answered at once; its run, if
 * already accepted, finishes on its node and its outputs are dropped.
 *
 * <p>Ready: this node is {@code Up} in the cluster. {@link ModelServer.Prediction}'s batch figures say how
 * the row ran (its batch size, alone in it); {@code queued} is zero and {@code computed} the round trip,
 * since the serving node does not report them. Thread-safe.
 */
final class ShardedTensorInference implements TensorInference {
  /** How many times a row is sent at most: once, then again after each node that accepted it was lost. */
  static final int MAX_SENDS = 3;
  private static final Logger LOG = LoggerFactory.getLogger(ShardedTensorInference.class);

  private final ActorSystem<?> system;
  private final ShardedComputations computations;
  private final String model;
  private final int batch;
  private final Duration defaultTimeout;
  private final Map<String, CompletableFuture<ModelServer.Prediction>> pending = new ConcurrentHashMap<>();

  private ShardedTensorInference(ActorSystem<?> system, ShardedComputations computations, String model, int batch,
      Duration defaultTimeout) {
    this.system = system;
    this.computations = computations;
    this.model = model;
    this.batch = batch;
    this.defaultTimeout = defaultTimeout;
  }

  /**
   * The {@code /v2} endpoint of tensor package {@code pkg}, computed through {@code computations}, where the
   * package is in the catalog under its name. Its inputs and outputs are read from the export of the smallest
   * {@code main} program (the inputs that are not weights, without the batch dimension): nothing is loaded on
   * this node until sharding puts the model's entity here.
   */
  static InferenceEndpoint endpoint(ActorSystem<?> system, ShardedComputations computations, ModelPackage pkg) {
    ProgramSpec main = pkg.programs(Role.MAIN).stream().min(Comparator.comparingInt(ProgramSpec::size))
        .orElseThrow(() -> new XlaException(ErrorCode.INVALID_ARGUMENT, "model package '" + pkg.name() + "' has no main program "
            + "to serve; its programs are " + pkg.programs().stream().map(ProgramSpec::describe).toList()));
    JaxExport export = main.export();
    Set<String> weights = Set.copyOf(pkg.weightParameters(main));
    List<String> names = new ArrayList<>();
    List<TensorType> inputs = new ArrayList<>();
    for (int i = 0; i < export.inputNames().size(); i++) {
      if (!weights.contains(export.inputNames().get(i))) {
        names.add(export.inputNames().get(i));
        inputs.add(unbatched(pkg.name(), main.size(), "input '" + export.inputNames().get(i) + "'", export.inputTypes().get(i)));
      }
    }
    List<TensorType> outputs = new ArrayList<>();
    for (int i = 0; i < export.outputTypes().size(); i++) {
      outputs.add(unbatched(pkg.name(), main.size(), "output " + i, export.outputTypes().get(i)));
    }
    // A run's tensors cross nodes in one Artery message, which drops (and logs) a bigger one: refuse such a
    // model now, not with a timeout per request. Every row of a model has the same size; 4 KiB for the rest.
    long limit = ClusterSettings.create(system).maximumFrameBytes();
    long in = 0;
    long out = 0;
    for (int i = 0; i < export.inputNames().size(); i++) {
      in += weights.contains(export.inputNames().get(i)) ? 0 : export.inputTypes().get(i).byteSize();
    }
    for (TensorType t : export.outputTypes()) {
      out += t.byteSize();
    }
    if (Math.max(in, out) + 4096 > limit) {
      throw new XlaException(ErrorCode.INVALID_ARGUMENT, "model '" + pkg.name() + "': a run of its main program at batch " + main.size()
          + " sends " + in + " bytes of inputs and answers " + out + " bytes of outputs, over the cluster's " + limit + "-byte messages "
          + "(pekko.remote.artery.advanced.maximum-frame-size, less 4 KiB): raise that key on every node, or serve it without --cluster");
    }
    ShardedTensorInference inference = new ShardedTensorInference(system, computations, pkg.name(), main.size(),
        ServeSettings.create(system).forModel(pkg.name()).defaultTimeout());
    return new InferenceEndpoint(pkg.name(), inference, names, inputs, outputs, export.outputPaths());
  }

  private static TensorType unbatched(String model, int size, String what, TensorType t) {
    if (t.shape().rank() == 0 || t.shape().dim(0) != size) {
      throw new XlaException(ErrorCode.INVALID_ARGUMENT, "model '" + model + "': the main program of batch " + size + " has " + what
          + " of type " + t + ", expected a leading (batch) dimension of " + size);
    }
    long[] dims = t.shape().dims();
    return new TensorType(t.dtype(), Shape.of(Arrays.copyOfRange(dims, 1, dims.length)));
  }

  @Override
  public CompletionStage<ModelServer.Prediction> infer(String requestId, List<HostTensor> row, Duration timeout) {
    Duration deadline = timeout != null ? timeout : defaultTimeout;
    CompletableFuture<ModelServer.Prediction> answer = new CompletableFuture<>();
    List<HostTensor> inputs = row.stream().map(this::batched).toList(); // ours: closed once the last send is answered
    pending.put(requestId, answer);
    answer.whenComplete((p, f) -> pending.remove(requestId, answer));
    send(requestId, inputs, deadline, System.nanoTime(), 1, answer);
    return answer;
  }

  private void send(String requestId, List<HostTensor> inputs, Duration deadline, long started, int sends,
      CompletableFuture<ModelServer.Prediction> answer) {
    Duration left = deadline.minusNanos(System.nanoTime() - started);
    if (left.isNegative() || left.isZero()) {
      inputs.forEach(HostTensor::close);
      answer.completeExceptionally(new XlaException(ErrorCode.DEADLINE_EXCEEDED, "model '" + model + "': no node of the cluster "
          + "answered within the request's deadline of " + deadline.toMillis() + " ms (sent " + (sends - 1) + " times)"));
      return;
    }
    computations.run(model, inputs, left).whenComplete((outputs, failure) -> {
      if (failure == null) {
        inputs.forEach(HostTensor::close);
        List<HostTensor> first = outputs.stream().map(this::firstRow).toList();
        outputs.forEach(HostTensor::close);
        Duration took = Duration.ofNanos(System.nanoTime() - started);
        if (!answer.complete(new ModelServer.Prediction(requestId, first, 0, batch, 1, Duration.ZERO, took))) {
          first.forEach(HostTensor::close); // cancelled meanwhile: nobody takes them
        }
        return;
      }
      XlaException error = asXlaException(failure, left);
      if (error.code() == ErrorCode.UNAVAILABLE && sends < MAX_SENDS && !answer.isDone()) {
        LOG.warn("model '{}': row {} is sent again (send {} of at most {}): {}", model, requestId, sends + 1, MAX_SENDS, error.getMessage());
        send(requestId, inputs, deadline, started, sends + 1, answer);
        return;
      }
      inputs.forEach(HostTensor::close);
      String what = error.getMessage().startsWith("model '" + model + "'") ? error.getMessage() : "model '" + model + "': " + error.getMessage();
      answer.completeExceptionally(new XlaException(error.code(), sends > 1 ? what + " (the row was sent " + sends + " times)" : what, error));
    });
  }

  private XlaException asXlaException(Throwable failure, Duration waited) {
    Throwable e = failure;
    while ((e instanceof CompletionException || e instanceof ExecutionException) && e.getCause() != null) {
      e = e.getCause();
    }
    if (e instanceof XlaException x) {
      return x;
    }
    if (e instanceof TimeoutException) { // the ask's backstop: the node's own requester did not answer
      return new XlaException(ErrorCode.DEADLINE_EXCEEDED, "no answer from this node's requester within " + waited.toMillis()
          + " ms plus its margin", e);
    }
    return new XlaException(ErrorCode.INTERNAL, "the run failed unexpectedly: " + e, e);
  }

  /** {@code t} repeated {@link #batch} times along a new leading dimension. */
  private HostTensor batched(HostTensor t) {
    byte[] one = t.toByteArray();
    byte[] all = new byte[one.length * batch];
    for (int i = 0; i < batch; i++) {
      System.arraycopy(one, 0, all, i * one.length, one.length);
    }
    long[] dims = t.shape().dims();
    long[] batchedDims = new long[dims.length + 1];
    batchedDims[0] = batch;
    System.arraycopy(dims, 0, batchedDims, 1, dims.length);
    return HostTensor.ofBytes(t.dtype(), all, batchedDims);
  }

  /** The first row of {@code t}, whose leading dimension is {@link #batch}. */
  private HostTensor firstRow(HostTensor t) {
    byte[] all = t.toByteArray();
    long[] dims = t.shape().dims();
    return HostTensor.ofBytes(t.dtype(), Arrays.copyOf(all, all.length / (int) dims[0]), Arrays.copyOfRange(dims, 1, dims.length));
  }

  @Override
  public void cancel(String requestId, String reason) {
    CompletableFuture<ModelServer.Prediction> answer = pending.get(requestId);
    if (answer != null) {
      answer.completeExceptionally(new XlaException(ErrorCode.CANCELLED, "model '" + model + "': row " + requestId + " was given up: "
          + reason));
    }
  }

  @Override
  public CompletionStage<String> notReady(Duration wait) {
    return CompletableFuture.completedFuture(XlaCluster.isUp(system) ? null
        : "this node is " + XlaCluster.selfStatus(system) + " in the cluster, not Up: it routes no request yet");
  }
}
