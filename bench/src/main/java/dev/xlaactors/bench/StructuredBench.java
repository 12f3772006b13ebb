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
import dev.xlaactors.lm.structured.GrammarProcessor;
import dev.xlaactors.lm.structured.JsonSchemaAutomaton;
import dev.xlaactors.lm.structured.TokenGrammar;
import dev.xlaactors.lm.structured.TokenVocabulary;
import dev.xlaactors.lm.text.TiktokenTokenizer;
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
 * Structured output measured ({@code bench/run.sh structured}): (1) the per-token cost of the sampler with
 * and without logits processors (a grammar in its widest state, a logit bias, occurrence penalties), in ns
 * per token per vocabulary entry, over real tokenizers' vocabularies (tiktoken's r50k_base, GPT-2's 50,257
 * ids, and o200k_base, 200,019 ids: Qwen's 151,936-id vocabulary is not in any registry reachable here);
 * (2) with a model package: {@code samples} seeded generations per schema of a small suite, each output
 * checked by networknt's JSON Schema validator, and the decode time per token constrained over
 * unconstrained (same prompt, same token count, the model's logits from the real decode program).
 *
 * <p>Usage: {@code StructuredBench [package dir] [samples per schema] [max tokens]}. Prints {@code RESULT
 * structured valid=<fraction> overhead=<ratio>} last when a package is given.
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
      "{\"type\":\"object\"}");

  public static void main(String[] args) throws Exception {
    for (String encoding : List.of("r50k_base", "o200k_base")) {
      processorCost(encoding);
    }
    if (args.length > 0) {
      model(Path.of(args[0]), args.length > 1 ? Integer.parseInt(args[1]) : 1000, args.length > 2 ? Integer.parseInt(args[2]) : 64);
    }
  }

  /** ns per token per vocabulary entry of the sampler alone and with each processor, median of 7 rounds. */
  private static void processorCost(String encoding) {
    try (TiktokenTokenizer tokenizer = TiktokenTokenizer.of(encoding)) {
      long t0 = System.nanoTime();
      TokenVocabulary vocabulary = TokenVocabulary.of(tokenizer);
      double readMs = (System.nanoTime() - t0) / 1e6;
      int v = vocabulary.size();
      int end = tokenizer.tokenId("<|endoftext|>").orElse(v - 1);
      TokenGrammar grammar = new TokenGrammar(JsonSchemaAutomaton.compile(SCHEMAS.get(0)), vocabulary);
      // The widest state: inside the first string ('{"name":"' read), where nearly every token is allowed.
      int[] prefix = tokenizer.encode("{\"name\":\"");
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
      StringBuilder line = new StringBuilder(encoding + " (" + v + " ids, vocabulary read in " + String.format(Locale.ROOT, "%.0f", readMs)
          + " ms, grammar state's first token set in ");
      long m0 = System.nanoTime();
      SequenceState warm = SequenceState.create(cases.get("grammar"), new int[] {1});
      for (int t : prefix) {
        warm.append(t);
      }
      sampler.sample(row.clone(), cases.get("grammar"), warm);
      line.append(String.format(Locale.ROOT, "%.1f ms", (System.nanoTime() - m0) / 1e6)).append("): ns/token/entry");
      for (Map.Entry<String, SamplingParams> c : cases.entrySet()) {
        List<Double> rounds = new ArrayList<>();
        for (int round = 0; round < 7; round++) {
          SequenceState state = SequenceState.create(c.getValue(), new int[] {1});
          for (int t : prefix) {
            state.append(t); // the grammar reads these as generated: it sits inside the string
          }
          int steps = 40;
          long a = System.nanoTime();
          for (int s = 0; s < steps; s++) {
            float[] copy = row; // the sampler copies the row itself
            sampler.sample(copy, c.getValue(), state);
            state = c.getKey().equals("grammar") ? restart(c.getValue(), prefix) : state;
          }
          rounds.add((System.nanoTime() - a) / (double) steps / v);
        }
        Collections.sort(rounds);
        line.append(String.format(Locale.ROOT, " %s %.2f/%.2f/%.2f", c.getKey(), rounds.get(0), rounds.get(3), rounds.get(6)));
      }
      System.out.println(line + " (min/median/max of 7)");
    }
  }

  /** A fresh sequence inside the string again (a drawn token may have closed it). */
  private static SequenceState restart(SamplingParams params, int[] prefix) {
    SequenceState s = SequenceState.create(params, new int[] {1});
    for (int t : prefix) {
      s.append(t);
    }
    return s;
  }

  private static void model(Path dir, int samples, int maxTokens) throws Exception {
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
      int valid = 0;
      int total = 0;
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
              total++;
              String out = text.toString(StandardCharsets.UTF_8);
              boolean ok;
              try {
                ok = ended && validator.validate(json.readTree(out)).isEmpty();
              } catch (Exception e) {
                ok = false;
              }
              if (ok) {
                valid++;
                schemaValid++;
              } else if (total - valid <= 5) {
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
      System.out.printf(Locale.ROOT, "RESULT structured valid=%.4f overhead=%.3f%n", valid / (double) total, overhead);
    } finally {
      system.terminate();
    }
  }

  private static int constrainedLast = Integer.MAX_VALUE;
}
