"""Hangs at import: the submission must end with a wall-time message, the batch going on."""

while True:
    pass

EXPECT = {"max_score": 0, "message": "wall time"}
