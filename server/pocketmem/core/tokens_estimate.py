"""How many tokens a text costs an LLM, estimated without a tokenizer. Pure.

No BPE vocabulary ships with pocketmem (the ones LLMs use are downloads, and each model family has its
own), so the context package counts with a rule that is honest for both languages:

    each Han character, kana or hangul syllable       1 token
    each run of Latin letters (a word)                ceil(len / 4) tokens, at least 1
    each run of digits                                ceil(len / 3) tokens
    each other visible character (punctuation, ...)   1 token
    spaces and line breaks                            free

Dividing the character count by 4 (the usual English rule) would count a Chinese sentence at a quarter of
its real cost; byte-level BPE tokenizers spend one or more tokens on almost every Han character, while
English words of up to four letters are mostly a single token. The package keeps a reserve (500 of 4000
by default) for the difference between this rule and a particular model's tokenizer.
"""

from __future__ import annotations

import math
import re

_CJK = r"\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\U00020000-\U0002fa1f"
_PIECES = re.compile(rf"([{_CJK}])|([A-Za-z\u00c0-\u024f]+)|(\d+)|(\s+)|(.)", re.DOTALL)


def estimate_tokens(text: str) -> int:
    total = 0
    for cjk, word, digits, space, other in _PIECES.findall(text):
        if cjk:
            total += 1
        elif word:
            total += max(1, math.ceil(len(word) / 4))
        elif digits:
            total += math.ceil(len(digits) / 3)
        elif other:
            total += 1
        # whitespace is free
        del space
    return total
