package dev.xlaactors.runtime.model;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.xlaactors.error.InvalidArgumentException;
import dev.xlaactors.runtime.HostTensor;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Every way a package can be wrong is refused by {@link ModelPackage#open}, before anything is compiled or
 * uploaded, naming what is wrong: each test copies a good fixture package into a temporary directory,
 * breaks one thing (the manifest's text, a weights file, an index, a program) and checks the message.
 * No plugin is needed: open() reads files only.
 */
class ModelPackageRefusalTest {
  @TempDir Path dir;

  private Path copy(String fixture) {
    return ModelPackageTest.copy(fixture, dir.resolve("pkg"));
  }

  private static Path broken(String file) {
    return ModelPackageTest.fixture("causal-lm").resolveSibling("broken").resolve(file);
  }

  /** Replaces the first {@code from} (which must be there) with {@code to} in {@code file}. */
  private static void edit(Path file, String from, String to) throws IOException {
    String text = Files.readString(file);
    int at = text.indexOf(from);
    assertTrue(at >= 0, "'" + from + "' is not in " + file);
    Files.writeString(file, text.substring(0, at) + to + text.substring(at + from.length()));
  }

  private static void editManifest(Path pkg, String from, String to) throws IOException {
    edit(pkg.resolve(ModelPackage.MANIFEST), from, to);
  }

  /**
   * Opening {@code pkg} fails with a message that names the package first and holds every one of {@code
   * parts}; the message, for more checks.
   */
  private static String refused(Path pkg, String... parts) {
    InvalidArgumentException e = assertThrows(InvalidArgumentException.class, () -> ModelPackage.open(pkg));
    assertTrue(e.getMessage().startsWith("model package " + pkg.toAbsolutePath().normalize()), e.getMessage());
    for (String part : parts) {
      assertTrue(e.getMessage().contains(part), "expected '" + part + "' in: " + e.getMessage());
    }
    return e.getMessage();
  }

  private static void writeWeights(Path file, Map<String, HostTensor> tensors) {
    SafeTensors.write(file, tensors, null);
    tensors.values().forEach(HostTensor::close);
  }

  private static Map<String, HostTensor> affineWeights() {
    Map<String, HostTensor> t = new LinkedHashMap<>();
    t.put("w", HostTensor.ofFloats(new float[6], 3, 2));
    t.put("b", HostTensor.ofFloats(new float[2], 2));
    return t;
  }

  @Test
  void anUnknownTopLevelKeyIsRefusedNamingItAndTheAllowedKeys() throws IOException {
    Path pkg = copy("tensor");
    editManifest(pkg, "\"format\": 1,", "\"format\": 1, \"quantization\": \"int8\",");
    refused(pkg, "xla-model.json", "'quantization' is not a key of the manifest", "allowed there: format, name, kind");
  }

  @Test
  void anUnknownNestedKeyIsRefusedNamingItsPath() throws IOException {
    Path pkg = copy("tensor");
    editManifest(pkg, "\"batch\": 2,", "\"batch\": 2, \"slots\": 2,");
    refused(pkg, "'programs[1].slots' is not a key of 'programs[1]'", "allowed there: role, batch, file");

    Path other = ModelPackageTest.copy("causal-lm", dir.resolve("lm"));
    editManifest(other, "\"top_p\": 0.9", "\"top_p\": 0.9, \"beam_width\": 4");
    refused(other, "'generation.beam_width'", "eos_token_ids, bos_token_id, max_tokens");
  }

  @Test
  void aFormatOtherThanOneAndABadNameAreRefused() throws IOException {
    Path pkg = copy("tensor");
    editManifest(pkg, "\"format\": 1", "\"format\": 2");
    refused(pkg, "'format' is 2, this runtime reads format 1");
    editManifest(pkg, "\"format\": 2", "\"format\": 1");
    editManifest(pkg, "\"affine\"", "\"my model\"");
    refused(pkg, "'name' is \"my model\"", "[A-Za-z0-9._-]+");
  }

  @Test
  void aMissingProgramFileIsRefusedNamingIt() throws IOException {
    Path pkg = copy("tensor");
    Files.delete(pkg.resolve("main_b2.jax"));
    refused(pkg, "'programs[1].file'", "file 'main_b2.jax' does not exist in " + pkg);
  }

  @Test
  void aPathOutsideThePackageIsRefused() throws IOException {
    Path pkg = copy("tensor");
    Files.copy(pkg.resolve("main_b1.jax"), dir.resolve("outside.jax"));
    editManifest(pkg, "\"main_b1.jax\"", "\"../outside.jax\"");
    refused(pkg, "'programs[0].file'", "'../outside.jax' leaves the package directory");
    editManifest(pkg, "\"../outside.jax\"", "\"" + dir.resolve("outside.jax") + "\"");
    refused(pkg, "must be a path relative to the package directory");
    editManifest(pkg, "\"" + dir.resolve("outside.jax") + "\"", "\"link.jax\"");
    Files.createSymbolicLink(pkg.resolve("link.jax"), dir.resolve("outside.jax"));
    refused(pkg, "'link.jax' is a link to", "outside the package directory");
  }

  @Test
  void aWeightNoProgramTakesIsRefusedNamingIt() {
    Path pkg = copy("tensor");
    Map<String, HostTensor> weights = affineWeights();
    weights.put("lm_head", HostTensor.ofFloats(new float[4], 2, 2));
    writeWeights(pkg.resolve("model.safetensors"), weights);
    refused(pkg, "tensor 'lm_head' f32[2,2], which no program takes (a weight with no parameter");
  }

  @Test
  void aWeightOfAnotherDtypeIsRefusedNamingProgramTensorExpectedAndGot() {
    Path pkg = copy("tensor");
    Map<String, HostTensor> weights = affineWeights();
    weights.put("w", HostTensor.ofDoubles(new double[6], 3, 2));
    writeWeights(pkg.resolve("model.safetensors"), weights);
    refused(pkg, "program main (batch 1, main_b1.jax)", "weight 'w'", "expected f32[3,2], got f64[3,2]");
  }

  @Test
  void aWeightOfAnotherShapeIsRefusedNamingProgramTensorExpectedAndGot() {
    Path pkg = copy("tensor");
    Map<String, HostTensor> weights = affineWeights();
    weights.put("w", HostTensor.ofFloats(new float[6], 2, 3));
    writeWeights(pkg.resolve("model.safetensors"), weights);
    refused(pkg, "program main (batch 1, main_b1.jax)", "weight 'w'", "expected f32[3,2], got f32[2,3]");
  }

  @Test
  void aParameterWithNoWeightIsRefusedNamingIt() {
    Path pkg = copy("tensor");
    Map<String, HostTensor> weights = affineWeights();
    weights.remove("b").close();
    writeWeights(pkg.resolve("model.safetensors"), weights);
    refused(pkg, "program main (batch 1, main_b1.jax)", "takes weight 'b' f32[2]", "lack (a parameter with no weight)");
  }

  @Test
  void anIndexMappingToAMissingShardIsRefused() throws IOException {
    Path pkg = copy("tensor-sharded");
    edit(pkg.resolve("model.safetensors.index.json"), "\"b\": \"model-00002-of-00002.safetensors\"",
        "\"b\": \"model-00003-of-00002.safetensors\"");
    refused(pkg, "shard 'model-00003-of-00002.safetensors' of index", "does not exist in " + pkg);
  }

  @Test
  void anIndexThatDisagreesWithItsShardsIsRefusedNamingTheTensor() throws IOException {
    Path pkg = copy("tensor-sharded");
    Path index = pkg.resolve("model.safetensors.index.json");
    String good = Files.readString(index);

    edit(index, "\"b\": \"model-00002-of-00002.safetensors\"", "\"b\": \"model-00001-of-00002.safetensors\"");
    refused(pkg, "tensor 'b' is mapped to shard 'model-00001-of-00002.safetensors', which has no tensor of that name");

    Files.writeString(index, good);
    edit(index, "\"b\": \"model-00002-of-00002.safetensors\"",
        "\"b\": \"model-00002-of-00002.safetensors\", \"c\": \"model-00002-of-00002.safetensors\"");
    refused(pkg, "tensor 'c' is mapped to shard 'model-00002-of-00002.safetensors', which has no tensor of that name");

    Files.writeString(index, good);
    writeWeights(pkg.resolve("model-00002-of-00002.safetensors"),
        new LinkedHashMap<>(Map.of("b", HostTensor.ofFloats(new float[2], 2), "bias2", HostTensor.ofFloats(new float[1], 1))));
    refused(pkg, "shard 'model-00002-of-00002.safetensors' holds tensor 'bias2', which the weight_map lacks");

    Files.writeString(index, good);
    edit(index, "\"weight_map\"", "\"version\": 2, \"weight_map\"");
    refused(pkg, "unknown key 'version'; allowed: metadata, weight_map");
  }

  @Test
  void aProgramWhoseSignatureIsNotItsRolesIsRefused() throws IOException {
    Path pkg = copy("causal-lm");
    editManifest(pkg, "\"prefill_slot_s2.jax\"", "\"decode_slots_s2.jax\"");
    refused(pkg, "program prefill_slot (slots 2, length 4, decode_slots_s2.jax)",
        "takes 3 input(s) after the weights, expected 4 (tokens, length, slot, cache)");
  }

  @Test
  void aLengthThatIsNotTheProgramsIsRefused() throws IOException {
    Path pkg = copy("causal-lm");
    editManifest(pkg, "\"length\": 4,\n      \"file\": \"score_b1.jax\"", "\"length\": 5,\n      \"file\": \"score_b1.jax\"");
    refused(pkg, "program score (batch 1, length 5, score_b1.jax)", "input 1 'tokens' is s32[1,4], expected s32[1,5]");
  }

  @Test
  void aBatchThatIsNotTheProgramsIsRefused() throws IOException {
    Path tensor = copy("tensor");
    editManifest(tensor, "\"batch\": 1", "\"batch\": 3");
    refused(tensor, "program main (batch 3, main_b1.jax)", "input [1] is f32[1,3]",
        "expected its first dimension to be the batch 3");

    Path lm = ModelPackageTest.copy("causal-lm", dir.resolve("lm"));
    editManifest(lm, "\"batch\": 1", "\"batch\": 3");
    refused(lm, "program score (batch 3, length 4, score_b1.jax)", "input 1 'tokens' is s32[1,4], expected s32[3,4]");
  }

  @Test
  void logitsOfAnotherVocabularyAreRefused() throws IOException {
    Path pkg = copy("causal-lm");
    editManifest(pkg, "\"vocabulary\": 8", "\"vocabulary\": 9");
    refused(pkg, "program score (batch 2, length 4, score_b2.jax)", "returns [f32[2,4,8]], expected [f32[2,4,9]]",
        "V = limits.vocabulary");
  }

  @Test
  void aCacheOtherThanSlotCachesIsRefused() throws IOException {
    Path pkg = copy("causal-lm");
    Files.copy(broken("slot_cache_s2_wide.jax"), pkg.resolve("slot_cache_s2.jax"),
        java.nio.file.StandardCopyOption.REPLACE_EXISTING);
    refused(pkg, "program ", "input ", "'cache' is [f32[2,8,4]], expected [f32[2,8,5]], what slot_cache of 2 slots returns");
  }

  @Test
  void aRoleInputTheModuleDroppedIsRefused() throws IOException {
    Path pkg = copy("causal-lm");
    Files.copy(broken("prefill_slot_s2_no_length.jax"),
        pkg.resolve("prefill_slot_s2.jax"), java.nio.file.StandardCopyOption.REPLACE_EXISTING);
    refused(pkg, "program prefill_slot (slots 2, length 4, prefill_slot_s2.jax)",
        "input 2 'length' is not used by the program, so JAX dropped it");
  }

  @Test
  void aCausalLmWithoutOneOfTheSlotRolesIsRefused() throws IOException {
    Path pkg = copy("causal-lm");
    editManifest(pkg, "    {\n      \"role\": \"decode_slots\",\n      \"slots\": 2,\n      \"file\": \"decode_slots_s2.jax\"\n    },\n",
        "");
    refused(pkg, "needs prefill_slot, decode_slots and slot_cache at the same slot counts", "decode_slots is missing at slots [2]");
  }

  @Test
  void aRoleOfAnotherKindAndARepeatedSizeAreRefused() throws IOException {
    Path pkg = copy("tensor");
    Path manifest = pkg.resolve(ModelPackage.MANIFEST);
    String good = Files.readString(manifest);
    editManifest(pkg, "\"kind\": \"tensor\"", "\"kind\": \"embedding\"");
    refused(pkg, "'limits.vocabulary' is required");
    editManifest(pkg, "\"limits\": {}", "\"limits\": {\"vocabulary\": 8, \"context_length\": 8}");
    refused(pkg, "'embedding' is required for an embedding package");
    editManifest(pkg, "\"limits\"", "\"embedding\": {\"pooling\": \"mean\"}, \"limits\"");
    refused(pkg, "program main (batch 1, main_b1.jax) has role main, which a package of kind embedding does not have",
        "its roles are [embed]");
    Files.writeString(manifest, good);
    editManifest(pkg, "\"batch\": 2", "\"batch\": 1");
    refused(pkg, "'programs[1].batch' repeats main at batch 1");
  }

  @Test
  void theTokenizerAndGenerationAreChecked() throws IOException {
    Path pkg = copy("causal-lm");
    Path manifest = pkg.resolve(ModelPackage.MANIFEST);
    String good = Files.readString(manifest);
    editManifest(pkg, "\"huggingface\": \"tokenizer.json\"", "\"huggingface\": \"tokenizer.json\", \"tiktoken\": \"r50k_base\"");
    refused(pkg, "'tokenizer' needs exactly one of \"huggingface\"");

    Files.writeString(manifest, good);
    editManifest(pkg, "\"huggingface\": \"tokenizer.json\"", "\"tiktoken\": \"r50k_base\"");
    ModelPackage tiktoken = ModelPackage.open(pkg);
    assertEquals(new ModelPackage.TokenizerSpec(null, "r50k_base"), tiktoken.tokenizer().orElseThrow());

    Files.writeString(manifest, good);
    editManifest(pkg, "0,\n      7", "0,\n      8");
    refused(pkg, "'generation.eos_token_ids' has token id 8, expected an id in [0, 8) (limits.vocabulary)");

    Files.writeString(manifest, good);
    editManifest(pkg, "\"temperature\": 0.5", "\"temperature\": \"hot\"");
    refused(pkg, "'generation.temperature' must be a number, got the string \"hot\"");

    Files.writeString(manifest, good);
    editManifest(pkg, "\"host_callbacks\": []", "\"host_callbacks\": [\"tokenize\", 3]");
    refused(pkg, "'host_callbacks[1]' must be a callback's name");

    Files.writeString(manifest, good);
    assertEquals(Map.of(), ModelPackage.open(pkg).specialTokens(), "a package imported before special_tokens has none");
    editManifest(pkg, "\"chat_template\": \"chat_template.jinja\",", "\"chat_template\": \"chat_template.jinja\", "
        + "\"special_tokens\": {\"bos_token\": \"<s>\", \"eos_token\": \"</s>\", \"pad_token\": \"<pad>\"},");
    assertEquals(Map.of("bos_token", "<s>", "eos_token", "</s>", "pad_token", "<pad>"), ModelPackage.open(pkg).specialTokens());
    editManifest(pkg, "\"pad_token\"", "\"PAD\"");
    refused(pkg, "'special_tokens' has the name \"PAD\"", "bos_token, eos_token");
    editManifest(pkg, "\"PAD\": \"<pad>\"", "\"pad_token\": 0");
    refused(pkg, "'special_tokens.pad_token' must be a string");

    Files.writeString(manifest, good);
    Files.delete(pkg.resolve("chat_template.jinja"));
    refused(pkg, "'chat_template'", "file 'chat_template.jinja' does not exist");
  }

  @Test
  void anEmbedProgramAndTheEmbeddingDefaultsAreChecked() throws IOException {
    Path pkg = copy("embedding");
    Path manifest = pkg.resolve(ModelPackage.MANIFEST);
    String good = Files.readString(manifest);
    editManifest(pkg, "\"length\": 4", "\"length\": 3");
    refused(pkg, "program embed (batch 1, length 3, embed_b1.jax)", "input 1 'tokens' is s32[1,4], expected s32[1,3]");

    Files.writeString(manifest, good);
    editManifest(pkg, "\"pooling\": \"mean\"", "\"pooling\": \"max\"");
    refused(pkg, "'embedding.pooling' is \"max\", expected \"mean\" or \"cls\"");

    Files.writeString(manifest, good);
    editManifest(pkg, "\"context_length\": 4", "\"context_length\": 2");
    refused(pkg, "has length 4, longer than limits.context_length 2");
  }

  @Test
  void aDirectoryWithoutAManifestOrWithBadJsonIsRefused() throws IOException {
    refused(dir, "has no xla-model.json");
    Files.writeString(dir.resolve(ModelPackage.MANIFEST), "{\"format\": 1,}");
    refused(dir, "xla-model.json is not valid JSON");
  }
}
