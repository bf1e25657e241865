"""A byte-level tokenizer: ids 0-255 are the bytes of UTF-8 text, then special tokens.

No download, no merges: every string round-trips, every id is one byte or one
special. Incomplete UTF-8 sequences decode with U+FFFD (the detokenizer streams
with an incremental decoder so characters split across tokens come out whole).
"""

from __future__ import annotations

import codecs
import json
from pathlib import Path
from typing import Any, Iterable, Optional, Sequence, Union

SPECIAL_TOKENS = ("<s>", "</s>", "<pad>", "<|system|>", "<|user|>", "<|assistant|>", "<|end|>", "<unk>")
TOKENIZER_CLASS = "ReferenceByteTokenizer"
CONFIG_FILE = "tokenizer_config.json"


class ByteTokenizer:
    num_byte_tokens = 256

    def __init__(self) -> None:
        self.special_tokens = SPECIAL_TOKENS
        self.special_ids = {tok: 256 + i for i, tok in enumerate(SPECIAL_TOKENS)}
        self.vocab_size = 256 + len(SPECIAL_TOKENS)
        self.bos_token_id = self.special_ids["<s>"]
        self.eos_token_id = self.special_ids["</s>"]
        self.pad_token_id = self.special_ids["<pad>"]
        self.end_token_id = self.special_ids["<|end|>"]

    # -- encode -------------------------------------------------------------------
    def encode(self, text: str, add_bos: bool = True) -> list[int]:
        """Special-token spellings in text stay plain bytes (user text cannot inject them)."""
        ids = list(text.encode("utf-8"))
        return [self.bos_token_id, *ids] if add_bos else ids

    def apply_chat_template(self, messages: Sequence[dict[str, Any]], add_generation_prompt: bool = True) -> list[int]:
        """<s><|role|>content<|end|>... then <|assistant|> to prompt the reply."""
        ids = [self.bos_token_id]
        for message in messages:
            ids.append(self.special_ids[f"<|{message['role']}|>"])
            ids.extend(self.encode(message["content"], add_bos=False))
            ids.append(self.end_token_id)
        if add_generation_prompt:
            ids.append(self.special_ids["<|assistant|>"])
        return ids

    # -- decode -------------------------------------------------------------------
    def is_special(self, token_id: int) -> bool:
        return token_id >= 256

    def decode_bytes(self, ids: Iterable[int], skip_special_tokens: bool = True) -> bytes:
        if type(ids) is not list:
            ids = list(ids)
        if max(ids, default=0) < 256:
            return bytes(ids)  # byte tokens only (every step of a plain generation): one C call
        out = bytearray()
        for t in ids:
            if t < 256:
                out.append(t)
            elif not skip_special_tokens:
                out += self.id_to_token(t).encode()
        return bytes(out)

    def decode(self, ids: Iterable[int], skip_special_tokens: bool = True) -> str:
        return self.decode_bytes(ids, skip_special_tokens).decode("utf-8", errors="replace")

    def id_to_token(self, token_id: int) -> str:
        """Display text of one token (logprob texts): a byte as latin-1 escape when not printable."""
        if token_id >= 256:
            return self.special_tokens[token_id - 256] if token_id < self.vocab_size else "<invalid>"
        return bytes([token_id]).decode("utf-8", errors="backslashreplace")

    def token_bytes(self, token_id: int) -> list[int]:
        return [token_id] if token_id < 256 else list(self.id_to_token(token_id).encode())

    @staticmethod
    def incremental_decoder() -> codecs.IncrementalDecoder:
        return codecs.getincrementaldecoder("utf-8")(errors="replace")

    # -- files --------------------------------------------------------------------
    def save(self, directory: Path) -> None:
        config = {
            "tokenizer_class": TOKENIZER_CLASS,
            "special_tokens": list(self.special_tokens),
            "bos_token": "<s>",
            "eos_token": "</s>",
            "pad_token": "<pad>",
            "vocab_size": self.vocab_size,
        }
        (Path(directory) / CONFIG_FILE).write_text(json.dumps(config, indent=2) + "\n")

    @classmethod
    def from_pretrained(cls, directory: Optional[Union[str, Path]]) -> "ByteTokenizer":
        """The checkpoint must declare this tokenizer (no other tokenizer is bundled)."""
        path = Path(directory) / CONFIG_FILE if directory is not None else None
        if path is not None and path.exists():
            config = json.loads(path.read_text())
            if config.get("tokenizer_class") != TOKENIZER_CLASS:
                raise ValueError(f"{path}: tokenizer_class {config.get('tokenizer_class')!r} is not supported; "
                                 f"the reference engine ships only {TOKENIZER_CLASS}")
            if list(config.get("special_tokens", SPECIAL_TOKENS)) != list(SPECIAL_TOKENS):
                raise ValueError(f"{path}: special tokens differ from {TOKENIZER_CLASS}'s")
        return cls()
