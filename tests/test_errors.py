"""bertlab/errors.py: one exception family; each also is the built-in error callers may expect."""

import pytest

from bertlab.errors import BertLabError, CheckpointError, DataError, InputError


@pytest.mark.parametrize(
    "cls, builtin", [(InputError, ValueError), (DataError, ValueError), (CheckpointError, OSError)]
)
def test_every_error_is_a_bertlab_error_and_its_builtin(cls, builtin):
    err = cls("what was wrong; how to fix it")
    assert isinstance(err, BertLabError) and isinstance(err, builtin)
    with pytest.raises(BertLabError, match="how to fix it"):
        raise err
