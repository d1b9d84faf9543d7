"""Where the Python tests find the things scripts/test.sh provides."""
import os
from pathlib import Path


def smollm2_path() -> Path:
    """The SmolLM2 GGUF: $KC_SMOLLM2_GGUF, else the cache of scripts/fetch_smollm2.sh."""
    p = os.environ.get("KC_SMOLLM2_GGUF")
    if p:
        return Path(p)
    cache = Path(os.environ.get("KC_CACHE", Path.home() / ".cache" / "kerncheck"))
    return cache / "smollm2" / "SmolLM2-135M-Instruct.Q4_1.gguf"
