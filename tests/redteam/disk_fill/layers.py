"""Fills the disk at import: the file-size cap and the size-limited scratch stop it."""

with open("big.bin", "wb") as fh:
    chunk = b"\0" * (1 << 20)
    for _ in range(100_000):
        fh.write(chunk)

EXPECT = {"max_score": 0, "message": "output size limit"}
