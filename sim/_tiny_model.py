"""Write a tiny, randomly initialised Llama and a byte-level BPE tokenizer to OUT, with nothing downloaded.

Run with the real-engine venv's python (it has torch, tokenizers and transformers):

    python tiny_model.py OUT [--seed 0] [--shape tiny|demo]

The tokenizer learns from inferwatch's own Markdown (a clone's, or the READMEs an installed package ships), the
weights are random from a fixed seed: the model writes nonsense, quickly, which is all an engine's metrics need.
ChatML template, so /v1/chat/completions works. About 10 s and 15 MB (the demo shape: 20 s, 85 MB). Run as a
script by inferwatch.sim._real_vllm (never imported by inferwatch: torch and transformers live only in the
engine's venv).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

REPO = Path(__file__).resolve().parents[1]  # a clone's root (sim/ is in it), or the installed package
SPECIALS = ["<|pad|>", "<|begin_of_text|>", "<|im_end|>", "<|im_start|>"]
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\n' }}"
    "{% if m['content'] is string %}{{ m['content'] }}{% else %}"
    "{% for p in m['content'] %}{% if p['type'] == 'text' %}{{ p['text'] }}{% endif %}{% endfor %}{% endif %}"
    "{{ '<|im_end|>\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
# The model's sizes, by name. `tiny` (the real-engine tests): a decode step costs the engine core so little that
# vLLM's API server, detokenizing and streaming every token in Python on the same two cores, is what limits it;
# then requests leave the engine's queue for the API server's, and `waiting` drops to 0 while 8 clients wait on
# 2 slots (measured: 0 in 11-18 % of samples, running 1.6-1.9 of 2, /metrics answering in over a second). `demo`
# (the real demo, whose point is a queue at the engine): a step costs ~30x as much, the engine core is what
# limits, and the same 8 clients held waiting at 6.00 and running at 2.00 in every sample (100-140 tokens/s).
SHAPES = {
    "tiny": {"vocab": 4096, "hidden": 256, "layers": 2, "heads": 4, "context": 2048},  # ~15 MB
    "demo": {"vocab": 4096, "hidden": 768, "layers": 6, "heads": 12, "context": 2048},  # ~85 MB
}


def corpus():
    for path in sorted(REPO.glob("**/*.md")):
        if ".venv" not in path.parts:
            yield from (line for line in path.read_text(errors="replace").splitlines() if line.strip())


def build(out: Path, seed: int, shape: str = "tiny") -> None:
    size = SHAPES[shape]
    out.mkdir(parents=True, exist_ok=True)
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(
        corpus(),
        trainer=trainers.BpeTrainer(
            vocab_size=size["vocab"],
            special_tokens=SPECIALS,
            show_progress=False,
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        ),
    )
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<|begin_of_text|>",
        eos_token="<|im_end|>",
        pad_token="<|pad|>",
        model_max_length=size["context"],
    )
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(out)
    config_path = out / "tokenizer_config.json"  # some transformers write the template beside it instead
    config = json.loads(config_path.read_text())
    config["chat_template"] = CHAT_TEMPLATE
    config_path.write_text(json.dumps(config, indent=2))
    torch.manual_seed(seed)
    model = LlamaForCausalLM(
        LlamaConfig(
            vocab_size=len(fast),
            hidden_size=size["hidden"],
            intermediate_size=2 * size["hidden"],
            num_hidden_layers=size["layers"],
            num_attention_heads=size["heads"],
            num_key_value_heads=size["heads"],
            max_position_embeddings=size["context"],
            tie_word_embeddings=False,
            bos_token_id=fast.bos_token_id,
            eos_token_id=fast.eos_token_id,
            pad_token_id=fast.pad_token_id,
            torch_dtype="bfloat16",
        )
    )
    model.to(torch.bfloat16).save_pretrained(out, safe_serialization=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("out", type=Path)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--shape", choices=sorted(SHAPES), default="tiny")
    args = parser.parse_args()
    build(args.out, args.seed, args.shape)
    print(f"tiny model in {args.out}")
