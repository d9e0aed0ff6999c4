"""bertlab/errors.py: one exception family; each also is the built-in error callers may expect."""

import numpy as np
import pytest

from bertlab.errors import BertLabError, CheckpointError, DataError, InputError, is_whole_number


@pytest.mark.parametrize(
    "cls, builtin", [(InputError, ValueError), (DataError, ValueError), (CheckpointError, OSError)]
)
def test_every_error_is_a_bertlab_error_and_its_builtin(cls, builtin):
    err = cls("what was wrong; how to fix it")
    assert isinstance(err, BertLabError) and isinstance(err, builtin)
    with pytest.raises(BertLabError, match="how to fix it"):
        raise err


def test_is_whole_number_is_the_one_check_of_counts_and_indexes():
    assert all(is_whole_number(v) for v in (0, 3, -1, np.int64(2), np.uint8(7)))
    assert not any(is_whole_number(v) for v in (True, False, 2.0, np.float32(1), "2", None, [1]))
