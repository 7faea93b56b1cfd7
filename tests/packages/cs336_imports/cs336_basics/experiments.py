"""A training helper written with PEP 695 generics (Python 3.12); no graded entry lives here."""


def first[T](items: list[T]) -> T:
    return items[0]


class Buffer[T]:
    def __init__(self) -> None:
        self.items: list[T] = []
