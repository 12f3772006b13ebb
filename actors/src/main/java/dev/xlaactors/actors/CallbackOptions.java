package dev.xlaactors.actors;

/**
 * How a registered callback function is called ({@link CallbackRuntime#register(dev.xlaactors.runtime.HostCallback,
 * CallbackOptions)}). {@link #DEFAULT}: on the runtime's callback threads, with inputs copied into
 * Java-owned tensors that stay readable as long as the function likes.
 *
 * @param inline run the function on the thread that made the call (XLA's), saving two thread hand-offs;
 *     only for functions that never block (see {@link CallbackRuntime#registerInline})
 * @param borrowedInputs hand the function XLA's own input buffers instead of copies, saving one copy of
 *     every input per call (a 16 MiB input: about 1.5 ms). Such an input is readable only until the call
 *     is answered or given up: its {@code to...Array} accessors read XLA's buffer, returning it as an
 *     output or uploading it copies from there, and {@link dev.xlaactors.runtime.HostTensor#copy()} keeps
 *     it; {@link dev.xlaactors.runtime.HostTensor#data()} refuses (a view could outlive the buffer), and
 *     any use after the call fails with {@link IllegalStateException}. The XLA thread does not go on
 *     until a read in progress has finished, so a late reader never sees XLA reuse the memory.
 */
public record CallbackOptions(boolean inline, boolean borrowedInputs) {
  /** On the callback threads, inputs copied. */
  public static final CallbackOptions DEFAULT = new CallbackOptions(false, false);

  /** These options, with the function run inline. */
  public CallbackOptions withInline() {
    return new CallbackOptions(true, borrowedInputs);
  }

  /** These options, with inputs borrowed from XLA for the duration of the call. */
  public CallbackOptions withBorrowedInputs() {
    return new CallbackOptions(inline, true);
  }
}
