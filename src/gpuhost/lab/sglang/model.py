"""A tiny Hugging Face snapshot of GLM-5-NVFP4: real layout and config, shard sizes listed, no weights."""

from __future__ import annotations

import json
from pathlib import Path

MODEL_ID = "nvidia/GLM-5-NVFP4"
NODE_DIR = "/srv/gpuhost-lab/models/GLM-5-NVFP4"
SHARDS = 8
SHARD_BYTES = 54_125_000_000  # 433 GB in all, as the real checkpoint

CONFIG = {
    "architectures": ["GlmMoeDsaForCausalLM"],
    "model_type": "glm_moe_dsa",
    "hidden_size": 6144,
    "num_hidden_layers": 78,
    "num_attention_heads": 64,
    "num_key_value_heads": 64,
    "n_routed_experts": 256,
    "num_experts_per_tok": 8,
    "n_shared_experts": 1,
    "moe_intermediate_size": 2048,
    "intermediate_size": 12288,
    "vocab_size": 154880,
    "max_position_embeddings": 202752,
    "torch_dtype": "bfloat16",
    "index_topk": 2048,
    "eos_token_id": [154820, 154827, 154829],
    "transformers_version": "5.2.0",
    "quantization_config": {
        "quant_method": "modelopt",
        "quant_algo": "NVFP4",
        "kv_cache_quant_algo": "FP8",
        "group_size": 16,
    },
}


#: GLM's special tokens (the checkpoint's tokenizer_config.json names them) and a few words the lab's answers use
SPECIAL_TOKENS = (
    "<|endoftext|>", "[MASK]", "[gMASK]", "[sMASK]", "<sop>", "<eop>", "<|system|>", "<|user|>", "<|assistant|>",
    "<|observation|>", "<think>", "</think>",
)  # fmt: skip
WORDS = ("!", "the", "model", "is", "serving", "tokens", "from", "lab", ".", "hi", "Paris", "391")


def tokenizer_json() -> dict[str, object]:
    """A small but real ``tokenizer.json``: the layout the ``tokenizers`` library (0.23.3) serialises a WordLevel
    tokenizer with a Whitespace pre-tokenizer and added special tokens to (``Tokenizer.to_str()``), so real
    transformers' ``AutoTokenizer`` (5.19.0, ``PreTrainedTokenizerFast``) loads the lab's snapshot offline."""
    vocab = {w: i for i, w in enumerate(WORDS)}
    vocab["[UNK]"] = len(vocab)
    added = [
        {
            "id": len(vocab) + i,
            "content": t,
            "single_word": False,
            "lstrip": False,
            "rstrip": False,
            "normalized": False,
            "special": True,
        }
        for i, t in enumerate(SPECIAL_TOKENS)
    ]
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": None,
        "pre_tokenizer": {"type": "Whitespace"},
        "post_processor": None,
        "decoder": None,
        "model": {"type": "WordLevel", "vocab": vocab, "unk_token": "[UNK]"},
    }


def write_snapshot(target: Path) -> Path:
    """Write the snapshot directory (config, tokenizer files, index, shard stubs); returns it."""
    target.mkdir(parents=True, exist_ok=True)
    (target / "config.json").write_text(json.dumps(CONFIG, indent=2) + "\n")
    (target / "generation_config.json").write_text(
        json.dumps({"eos_token_id": CONFIG["eos_token_id"], "temperature": 1.0, "top_p": 0.95}) + "\n"
    )
    (target / "hf_quant_config.json").write_text(
        json.dumps({"quantization": {"quant_algo": "NVFP4", "kv_cache_quant_algo": "FP8"}}) + "\n"
    )
    (target / "tokenizer_config.json").write_text(
        json.dumps({"tokenizer_class": "PreTrainedTokenizerFast", "model_max_length": 202752}) + "\n"
    )
    (target / "tokenizer.json").write_text(json.dumps(tokenizer_json()))
    names = [f"model-{i:05d}-of-{SHARDS:05d}.safetensors" for i in range(1, SHARDS + 1)]
    index = {
        "metadata": {"total_size": SHARD_BYTES * SHARDS, "shard_sizes": {n: SHARD_BYTES for n in names}},
        "weight_map": {f"model.layers.{i}.mlp.experts": names[i % SHARDS] for i in range(78)},
    }
    (target / "model.safetensors.index.json").write_text(json.dumps(index, indent=2) + "\n")
    for name in names:  # safetensors header only: 8-byte length + an empty JSON table
        header = b'{"__metadata__":{"format":"pt"}}'
        (target / name).write_bytes(len(header).to_bytes(8, "little") + header)
    return target
