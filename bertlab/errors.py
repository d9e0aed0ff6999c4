"""Exceptions raised by bertlab. Every message says what was wrong and how to fix it. Also
`is_whole_number`, the test every count or index argument shares before its own message.

Imports nothing from bertlab.
"""

import numbers


def is_whole_number(value: object) -> bool:
    """An int or a numpy integer, never a bool (True is an int to Python) and never a float such as 2.0."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


class BertLabError(Exception):
    """Base class for every error bertlab raises on purpose."""


class InputError(BertLabError, ValueError):
    """The text or arguments a user gave cannot be processed (empty text, no [MASK], ...)."""


class CheckpointError(BertLabError, OSError):
    """A checkpoint directory, file or Hub id is missing, truncated or does not match."""


class DataError(BertLabError, ValueError):
    """A data file is malformed; the message names the file and line."""


class DistributedError(BertLabError, RuntimeError):
    """Another process of a torchrun job stopped or can no longer be reached; the message says how to go on."""


class TrainingDiverged(BertLabError, RuntimeError):
    """Training blew up: the gradients stopped being finite numbers for several steps in a row."""


class NoGradientsError(InputError):
    """A computation that needs gradients (integrated gradients, head importance) was asked of a
    model without them: a dynamic int8 copy (`bertlab compress quantize`). `source` is the folder
    it was made from, where its config.json says so, for the page to offer instead."""

    def __init__(self, message: str, source: str | None = None):
        super().__init__(message)
        self.source = source
