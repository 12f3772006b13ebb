package dev.xlaactors.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.langchain4j.data.embedding.Embedding;
import dev.langchain4j.model.openai.OpenAiEmbeddingModel;
import dev.xlaactors.http.ApiKeys;
import dev.xlaactors.runtime.model.ModelPackage;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * {@code serve --api-key}: the server of the command line ({@link ServeCommand.Serving}) over the tiny bert
 * fixture with a key, called by LangChain4j's OpenAI client with its {@code apiKey} (sent as {@code
 * Authorization: Bearer}): the right key embeds, a wrong one fails with OpenAI's 401 {@code invalid_api_key};
 * the probe stays open; the OpenAPI document states the model's limits (embedding length, vocabulary) and the key.
 */
class ApiKeyClientsTest {
  private static final String KEY = "sk-test-" + Long.toHexString(System.nanoTime());
  private static ServeCommand.Serving serving;

  @BeforeAll
  static void serve() throws Exception {
    System.setProperty("dev.xlaactors.cli.home", Path.of("..").toAbsolutePath().normalize().toString());
    serving = ServeCommand.Serving.start(List.of(ModelPackage.open(OpenAiClientsTest.imported("bert"))), "127.0.0.1", 0, null,
        ApiKeys.of(List.of(KEY)));
  }

  @AfterAll
  static void stop() {
    if (serving != null) {
      serving.close();
    }
  }

  private static OpenAiEmbeddingModel client(String apiKey) {
    return OpenAiEmbeddingModel.builder().baseUrl(serving.url() + "/v1").apiKey(apiKey).modelName("bert").maxRetries(0).build();
  }

  @Test
  void langChain4jWithTheKeyEmbedsAndWithAnotherGets401() throws Exception {
    Embedding embedding = client(KEY).embed("hello world").content();
    assertEquals(64, embedding.dimension()); // the checkpoint's hidden_size
    RuntimeException refused = assertThrows(RuntimeException.class, () -> client(KEY + "-not").embed("hello world"));
    assertTrue(refused.getMessage().contains("invalid_api_key") && refused.getMessage().contains("not one of this server's"),
        refused.getMessage());
    HttpResponse<String> health = HttpClient.newHttpClient().send(HttpRequest.newBuilder(URI.create(serving.url() + "/health")).build(),
        HttpResponse.BodyHandlers.ofString());
    assertEquals(200, health.statusCode());
  }

  @Test
  void theDocumentStatesTheModelsLimitsAndTheKey() throws Exception {
    HttpClient http = HttpClient.newHttpClient();
    HttpResponse<String> refused = http.send(HttpRequest.newBuilder(URI.create(serving.url() + "/openapi.json")).build(),
        HttpResponse.BodyHandlers.ofString());
    assertEquals(401, refused.statusCode());
    JsonNode doc = new ObjectMapper().readTree(http.send(HttpRequest.newBuilder(URI.create(serving.url() + "/openapi.json"))
        .header("Authorization", "Bearer " + KEY).build(), HttpResponse.BodyHandlers.ofString()).body());
    JsonNode embeddings = doc.at("/paths/~1v1~1embeddings/post/requestBody/content/application~1json/schema/properties");
    assertEquals("[64,null]", embeddings.at("/dimensions/enum").toString()); // the only length bert makes, or none
    int vocabulary = ModelPackage.open(OpenAiClientsTest.imported("bert")).limits().vocabulary();
    assertEquals(vocabulary - 1, embeddings.at("/input/oneOf/2/items/maximum").asInt());
    assertEquals(vocabulary - 1, embeddings.at("/input/oneOf/3/items/items/maximum").asInt());
    assertEquals(0, embeddings.at("/input/oneOf/0/minLength").asInt()); // bert embeds "" (its [CLS] and [SEP])
    assertEquals("bearer", doc.at("/components/securitySchemes/apiKey/scheme").asText());
  }
}
