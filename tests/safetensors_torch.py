"""A safetensors file read into torch tensors by hand (Debian has no `safetensors` package): the F32 files
`alpha export` writes. Shared by the PyTorch reference and fixture scripts (tests/hf_reference.py,
tests/make_export_fixture.py, scripts/torch_activations.py)."""
import json
import struct

import torch


def load_safetensors(path):
    """Returns ({name: float32 tensor}, the header's __metadata__ dict)."""
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + n].decode("utf-8"))
    data = raw[8 + n :]
    tensors = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        assert e["dtype"] == "F32", (name, e["dtype"])
        b, en = e["data_offsets"]
        tensors[name] = torch.frombuffer(bytearray(data[b:en]), dtype=torch.float32).reshape(e["shape"]).clone()
    return tensors, header.get("__metadata__", {})
