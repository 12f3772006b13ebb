package dev.xlaactors.actors.jobs;

import dev.xlaactors.graph.Composites;
import dev.xlaactors.graph.Graph;
import dev.xlaactors.graph.GraphBuilder;
import dev.xlaactors.graph.Value;
import dev.xlaactors.runtime.DType;
import dev.xlaactors.runtime.HostCallback;
import dev.xlaactors.runtime.HostFunction;
import dev.xlaactors.runtime.HostTensor;
import dev.xlaactors.runtime.TensorType;
import java.util.List;
import java.util.Random;

/** Step programs for the job tests. */
final class JobPrograms {
  private JobPrograms() {}

  static final TensorType F32_4 = TensorType.of(DType.F32, 4);

  /** Item {@code i}'s input: {@code [i, i+1, i+2, i+3]}. */
  static HostTensor itemInput(long i) {
    return HostTensor.ofFloats(new float[] {i, i + 1, i + 2, i + 3});
  }

  /** The expected line values of item {@code i} for {@link #twicePlusOne}: {@code 2x+1}, as the default format writes them. */
  static String expectedLine(long i) {
    return (2f * i + 1) + "," + (2f * i + 3) + "," + (2f * i + 5) + "," + (2f * i + 7);
  }

  /** {@code x -> 2x + 1} on f32[4], no callbacks. */
  static Program twicePlusOne() {
    return Program.ofText("twice-plus-one", ComputationActorTest.TWICE_PLUS_ONE);
  }

  /** {@code x -> 2 * check(x) + 1} where {@code check} is a Java callback (identity unless it throws). */
  static Program twicePlusOneChecked(String callbackName, HostFunction check) {
    GraphBuilder b = new GraphBuilder("checked_" + callbackName.replace("-", "_"));
    Value x = b.parameter(F32_4);
    Value checked = b.hostCall(new HostCallback(callbackName, List.of(F32_4), null, check), x).get(0);
    return Program.of(b.build(b.add(b.multiply(checked, b.constant(2f)), b.constant(1f))));
  }

  /**
   * One step of a tiny random-weights language model: token (s32[]) -> one-hot -> embedding (vocab x dim)
   * -> tanh -> logits (dim x vocab) -> softmax -> {@code sample} callback, which returns the next token
   * (s32[]) and a stop flag (s32[], 1 to stop). Outputs: next token, stop flag.
   */
  static Graph tinyLanguageModel(int vocab, int dim, long seed, HostFunction sample) {
    Random weights = new Random(seed);
    float[] embedding = new float[vocab * dim];
    float[] projection = new float[dim * vocab];
    for (int i = 0; i < embedding.length; i++) {
      embedding[i] = (float) weights.nextGaussian();
      projection[i] = (float) weights.nextGaussian();
    }
    TensorType s32 = TensorType.of(DType.S32);
    HostCallback sampler = new HostCallback("sample", List.of(s32, s32), null, sample);
    GraphBuilder b = new GraphBuilder("tiny_lm_step");
    Value token = b.parameter(s32);
    Value oneHot = b.convert(b.equal(b.iota(TensorType.of(DType.S32, vocab), 0), token), DType.F32);
    Value hidden = b.tanh(b.matmul(b.reshape(oneHot, 1, vocab), b.constant(embedding, vocab, dim)));
    Value probs = Composites.softmax(b, b.matmul(hidden, b.constant(projection, dim, vocab)), 1);
    List<Value> sampled = b.hostCall(sampler, b.reshape(probs, vocab));
    return b.build(sampled.get(0), sampled.get(1));
  }

  /** Samples a token id from probabilities with {@code random}. */
  static int sample(float[] probs, Random random) {
    double u = random.nextDouble();
    double sum = 0;
    for (int i = 0; i < probs.length; i++) {
      sum += probs[i];
      if (u < sum) {
        return i;
      }
    }
    return probs.length - 1;
  }
}
