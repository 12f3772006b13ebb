package dev.xlaactors.runtime.model;

import dev.xlaactors.error.ErrorCode;
import dev.xlaactors.error.InvalidArgumentException;
import dev.xlaactors.error.XlaException;
import dev.xlaactors.runtime.HostTensor;
import dev.xlaactors.runtime.TensorType;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.TreeSet;

/**
 * The weights of a model as one set of named tensors, whether they live in one safetensors file or in
 * shards listed by a Hugging Face index ({@code model.safetensors.index.json}: {@code {"metadata": {...},
 * "weight_map": {tensor: shard file}}}).
 *
 * <p>{@link #index} opens every shard and checks the index against them before it returns: every tensor of
 * each shard is in the map and mapped to that shard, every mapped tensor is in the shard it is mapped to,
 * and no tensor is in two shards. A shard is named relative to the index's directory and must stay inside
 * it (no absolute path, no {@code ..}, no link out). Failures are {@link InvalidArgumentException}s naming
 * the index, the shard and the tensor.
 *
 * <p>Lifetime: holds every file open (see {@link SafeTensors}) until {@link #close()}; tensors already
 * returned stay valid after it. Thread-safe.
 */
public final class WeightFiles implements AutoCloseable {
  private final String description;
  private final List<SafeTensors> files;
  private final Map<String, SafeTensors> fileOf;
  private final Map<String, TensorType> types;

  private WeightFiles(String description, List<SafeTensors> files, Map<String, SafeTensors> fileOf) {
    this.description = description;
    this.files = List.copyOf(files);
    this.fileOf = Collections.unmodifiableMap(fileOf);
    Map<String, TensorType> t = new LinkedHashMap<>();
    fileOf.forEach((name, file) -> t.put(name, file.types().get(name)));
    this.types = Collections.unmodifiableMap(t);
  }

  /** The weights of one safetensors file. */
  public static WeightFiles single(Path file) {
    SafeTensors opened = SafeTensors.open(Objects.requireNonNull(file, "file"));
    Map<String, SafeTensors> fileOf = new LinkedHashMap<>();
    opened.types().keySet().forEach(name -> fileOf.put(name, opened));
    return new WeightFiles(file.toString(), List.of(opened), fileOf);
  }

  /** The weights of the shards a Hugging Face index names, checked against the index (see the class doc). */
  public static WeightFiles index(Path indexFile) {
    Objects.requireNonNull(indexFile, "indexFile");
    Map<String, String> weightMap = readIndex(indexFile);
    Path directory = indexFile.toAbsolutePath().getParent();
    Map<String, SafeTensors> byShard = new LinkedHashMap<>();
    try {
      for (String shard : new TreeSet<>(weightMap.values())) {
        Path path = PackagePaths.inside(directory, shard, "shard '" + shard + "' of index " + indexFile);
        byShard.put(shard, SafeTensors.open(path));
      }
      Map<String, SafeTensors> fileOf = new LinkedHashMap<>();
      for (Map.Entry<String, SafeTensors> shard : byShard.entrySet()) {
        for (String tensor : shard.getValue().types().keySet()) {
          String mapped = weightMap.get(tensor);
          if (mapped == null) {
            throw invalid(indexFile, "shard '" + shard.getKey() + "' holds tensor '" + tensor + "', which the "
                + "weight_map lacks: add \"" + tensor + "\": \"" + shard.getKey() + "\" to it, or drop the tensor");
          }
          if (!mapped.equals(shard.getKey())) {
            throw invalid(indexFile, "tensor '" + tensor + "' is mapped to shard '" + mapped + "' but is (also) in "
                + "shard '" + shard.getKey() + "': each tensor must be in exactly the shard the weight_map names");
          }
          fileOf.put(tensor, shard.getValue());
        }
      }
      for (Map.Entry<String, String> e : weightMap.entrySet()) {
        if (!fileOf.containsKey(e.getKey())) {
          throw invalid(indexFile, "tensor '" + e.getKey() + "' is mapped to shard '" + e.getValue()
              + "', which has no tensor of that name (it has " + byShard.get(e.getValue()).types().size()
              + "): fix the weight_map or the shard");
        }
      }
      WeightFiles opened = new WeightFiles(indexFile.toString(), new ArrayList<>(byShard.values()), fileOf);
      byShard = null;
      return opened;
    } finally {
      if (byShard != null) {
        byShard.values().forEach(SafeTensors::close);
      }
    }
  }

  /** The index's {@code weight_map}, with its shape checked. */
  private static Map<String, String> readIndex(Path indexFile) {
    if (!Files.isRegularFile(indexFile)) {
      throw invalid(indexFile, "does not exist or is not a file: a sharded checkpoint's index "
          + "(model.safetensors.index.json, as Hugging Face writes it) is expected there");
    }
    Object root;
    try {
      root = HeaderJson.parse(Files.readString(indexFile, StandardCharsets.UTF_8));
    } catch (IOException e) {
      throw new XlaException(ErrorCode.DATA_LOSS, "weights index " + indexFile + " cannot be read: " + e, e);
    } catch (HeaderJson.Malformed e) {
      throw invalid(indexFile, "is not valid JSON: " + e.getMessage());
    }
    if (!(root instanceof Map<?, ?> top)) {
      throw invalid(indexFile, "must be a JSON object {\"metadata\": {...}, \"weight_map\": {...}}");
    }
    for (Object key : top.keySet()) {
      if (!key.equals("metadata") && !key.equals("weight_map")) {
        throw invalid(indexFile, "has unknown key '" + key + "'; allowed: metadata, weight_map");
      }
    }
    if (top.containsKey("metadata") && !(top.get("metadata") instanceof Map)) {
      throw invalid(indexFile, "\"metadata\" must be an object");
    }
    if (!(top.get("weight_map") instanceof Map<?, ?> map)) {
      throw invalid(indexFile, "needs \"weight_map\": an object mapping each tensor's name to its shard file");
    }
    if (map.isEmpty()) {
      throw invalid(indexFile, "has an empty weight_map: expected each tensor's name mapped to its shard file");
    }
    Map<String, String> weightMap = new LinkedHashMap<>();
    for (Map.Entry<?, ?> e : map.entrySet()) {
      if (!(e.getValue() instanceof String shard) || shard.isEmpty()) {
        throw invalid(indexFile, "weight_map entry '" + e.getKey() + "' must be a shard file name, got " + e.getValue());
      }
      weightMap.put((String) e.getKey(), shard);
    }
    return weightMap;
  }

  private static InvalidArgumentException invalid(Path indexFile, String what) {
    return new InvalidArgumentException("weights index " + indexFile + " " + what);
  }

  /** Every tensor's name and type: a single file's in its header's order, shards' in shard-name order. */
  public Map<String, TensorType> types() {
    return types;
  }

  /** Whether the weights have a tensor called {@code name}. */
  public boolean contains(String name) {
    return fileOf.containsKey(name);
  }

  /** The file holding tensor {@code name}; refused naming the weights for a name they lack. */
  public Path fileOf(String name) {
    return entry(name).file();
  }

  /** The files, in the order {@link #types()} walks them. */
  public List<Path> files() {
    return files.stream().map(SafeTensors::file).toList();
  }

  /**
   * The tensor called {@code name}, memory-mapped from its file without a copy (see {@link
   * SafeTensors#tensor}); refused naming the weights for a name they lack.
   */
  public HostTensor tensor(String name) {
    return entry(name).tensor(name);
  }

  private SafeTensors entry(String name) {
    SafeTensors file = fileOf.get(Objects.requireNonNull(name, "name"));
    if (file == null) {
      throw new InvalidArgumentException("weights " + description + " have no tensor '" + name + "'; they have "
          + fileOf.size() + ": " + fileOf.keySet().stream().limit(20).toList() + (fileOf.size() > 20 ? "..." : ""));
    }
    return file;
  }

  /** Closes every file; tensors already returned stay valid. Idempotent. */
  @Override
  public void close() {
    files.forEach(SafeTensors::close);
  }

  @Override
  public String toString() {
    return "WeightFiles(" + description + ", " + files.size() + " file(s), " + types.size() + " tensors)";
  }
}
