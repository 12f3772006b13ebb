"""Drives a live xla-actors HTTP server with tritonclient[http], the Open Inference Protocol's reference
client, over OpenInferenceFixture's models (affine: y = x @ w + b; toy-embedder: int32 tokens and mask).
Run by OpenInferenceClientTest: python oip_client_check.py HOST:PORT. Prints one 'ok: ...' line per check
and 'ALL OK' at the end; any failure raises (non-zero exit)."""
import sys

import numpy as np
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

client = httpclient.InferenceServerClient(url=sys.argv[1])

assert client.is_server_live()
assert client.is_server_ready()
server = client.get_server_metadata()
assert server["name"] == "xla-actors" and server["extensions"] == ["binary_tensor_data"], server
print("ok: server live, ready, metadata", server)

assert client.is_model_ready("affine")
meta = client.get_model_metadata("affine")
assert meta["inputs"] == [{"name": "input_1", "datatype": "FP32", "shape": [-1, 3]}], meta
assert meta["outputs"] == [{"name": "output_0", "datatype": "FP32", "shape": [-1, 2]}], meta
print("ok: model metadata", meta)

# FP32, two rows (two requests to the model server, one response), the output asked for by name.
w = np.arange(6, dtype=np.float32).reshape(3, 2) - 2.0
b = np.array([0.5, -1.0], np.float32)
x = np.array([[1, 2, 3], [0.5, -1, 4]], np.float32)
x_in = httpclient.InferInput("input_1", list(x.shape), "FP32")
x_in.set_data_from_numpy(x, binary_data=False)
result = client.infer("affine", [x_in], outputs=[httpclient.InferRequestedOutput("output_0", binary_data=False)],
                      request_id="req-7", timeout=30_000_000)
y = result.as_numpy("output_0")
assert y.dtype == np.float32 and y.shape == (2, 2), y
np.testing.assert_allclose(y, x @ w + b, rtol=1e-5)
response = result.get_response()
assert response["id"] == "req-7" and response["model_name"] == "affine" and response["parameters"]["rows"] == 2, response
print("ok: FP32 infer of 2 rows", y.tolist())

# No outputs named: the client asks for binary outputs, which are answered as JSON; it reads them alike.
result = client.infer("affine", [x_in])
np.testing.assert_allclose(result.as_numpy("output_0"), x @ w + b, rtol=1e-5)
print("ok: all outputs when none is selected")

# The client's defaults: binary tensor data both ways (the binary_tensor_data extension).
binary = httpclient.InferInput("input_1", list(x.shape), "FP32")
binary.set_data_from_numpy(x)
result = client.infer("affine", [binary], outputs=[httpclient.InferRequestedOutput("output_0")])
assert result.get_output("output_0")["parameters"]["binary_data_size"] == 16, result.get_response()
np.testing.assert_allclose(result.as_numpy("output_0"), x @ w + b, rtol=1e-5)
print("ok: binary tensor data in and out")

# INT32 inputs, given out of order.
tokens = np.array([[3, 1, 4, 1]], np.int32)
mask = np.array([[1, 1, 0, 1]], np.int32)
inputs = [httpclient.InferInput("input_2", [1, 4], "INT32"), httpclient.InferInput("input_1", [1, 4], "INT32")]
inputs[0].set_data_from_numpy(mask, binary_data=False)
inputs[1].set_data_from_numpy(tokens, binary_data=False)
states = client.infer("toy-embedder", inputs, outputs=[httpclient.InferRequestedOutput("output_0", binary_data=False)]) \
    .as_numpy("output_0")
embed = (np.arange(32, dtype=np.float32).reshape(8, 4) % 7) - 3.0
position = np.arange(16, dtype=np.float32).reshape(4, 4) * 0.25
np.testing.assert_allclose(states, ((embed[tokens] + position[None]) * mask[..., None]).astype(np.float32), rtol=1e-6)
print("ok: INT32 infer", states.shape)


def refused(call, status, words):
    try:
        call()
    except InferenceServerException as e:
        assert e.status() == status and all(w in e.message() for w in words), (e.status(), e.message())
        print("ok: refused", status, e.message())
        return
    raise AssertionError("not refused: expected " + status)


refused(lambda: client.infer("nope", [x_in]), "404", ["no model 'nope'"])
refused(lambda: client.get_model_metadata("nope"), "404", ["no model 'nope'"])
assert not client.is_model_ready("nope")
bad = httpclient.InferInput("input_1", [1, 3], "INT32")
bad.set_data_from_numpy(np.array([[1, 2, 3]], np.int32), binary_data=False)
refused(lambda: client.infer("affine", [bad]), "400", ["input 'input_1' is FP32, got INT32"])
refused(lambda: client.infer("affine", [x_in], outputs=[httpclient.InferRequestedOutput("y", binary_data=False)]), "400",
        ["no output \"y\""])
print("ALL OK")
