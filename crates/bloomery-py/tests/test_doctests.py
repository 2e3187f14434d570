"""The examples in the docstrings run (bloomery's and its extension module's)."""

import doctest

import bloomery
import bloomery._bloomery


def test_docstring_examples_run():
    attempted = 0
    for module in (bloomery, bloomery._bloomery):
        result = doctest.testmod(module, optionflags=doctest.ELLIPSIS, raise_on_error=False, verbose=False)
        assert result.failed == 0
        attempted += result.attempted
    assert attempted >= 40
