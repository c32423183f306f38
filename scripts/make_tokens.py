#!/usr/bin/python3
"""Turns any text into a kformer/llm.c token file with a byte-level tokenizer (vocab 256).

    scripts/make_tokens.py INPUT.txt OUTPUT.bin
    kformer input/tiny.yaml data.source=OUTPUT.bin

Each byte of the UTF-8 text is one token (0..255); the file is llm.c's format: a header of 256
int32 (magic 20240520, version 1, token count) followed by the tokens as uint16.
"""
import struct
import sys


def main(argv):
    if len(argv) != 3:
        sys.stderr.write(__doc__)
        return 2
    with open(argv[1], "rb") as f:
        data = f.read()
    if not data:
        sys.stderr.write(f"make_tokens: {argv[1]} is empty: give a text file\n")
        return 1
    header = [20240520, 1, len(data)] + [0] * 253
    with open(argv[2], "wb") as f:
        f.write(struct.pack("<256i", *header))
        f.write(struct.pack(f"<{len(data)}H", *data))
    print(f"make_tokens: {len(data)} tokens (vocab 256) -> {argv[2]}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
