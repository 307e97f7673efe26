"""The chat format the demo model is trained on, and the tokenizer_config.json that renders it."""

# ChatML as Qwen formats it: turns of <|im_start|>role\ncontent<|im_end|>\n; the generation
# prompt opens an assistant turn, and enable_thinking=false adds the empty think block that
# Qwen3 uses for a direct answer (ninfer's format_chat writes the same text).
CHAT_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}"
    "{{- '<|im_start|>assistant\\n' }}"
    "{%- if enable_thinking is defined and enable_thinking is false %}"
    "{{- '<think>\\n\\n</think>\\n\\n' }}"
    "{%- endif %}"
    "{%- endif %}"
)


def chat_text(user, assistant=None, think_block=False):
    """The template's output for one user turn (and the assistant's answer, closed, when given)."""
    s = f"<|im_start|>user\n{user}<|im_end|>\n<|im_start|>assistant\n"
    if think_block:
        s += "<think>\n\n</think>\n\n"
    if assistant is not None:
        s += f"{assistant}<|im_end|>\n"
    return s


def tokenizer_config():
    return {
        "tokenizer_class": "TokenizersBackend",
        "add_bos_token": False,
        "add_prefix_space": False,
        "bos_token": None,
        "eos_token": "<|im_end|>",
        "pad_token": "<|endoftext|>",
        "unk_token": None,
        "clean_up_tokenization_spaces": False,
        "errors": "replace",
        "split_special_tokens": False,
        "model_max_length": 4096,
        "chat_template": CHAT_TEMPLATE,
    }
