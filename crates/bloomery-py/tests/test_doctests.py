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


def test_the_examples_testmod_does_not_find_run_too():
    """doctest's finder skips the extension's static methods (from_bytes, open) and
    properties (capacity): their examples never ran, and from_bytes's had gone stale."""
    found = {test.name for module in (bloomery, bloomery._bloomery) for test in doctest.DocTestFinder().find(module)}
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    ran = []
    for class_name, cls in vars(bloomery._bloomery).items():
        if not isinstance(cls, type):
            continue
        for name, attribute in vars(cls).items():
            # A static method's docstring is its function's (the staticmethod object's is the
            # staticmethod class's own).
            if isinstance(attribute, (staticmethod, classmethod)):
                attribute = getattr(cls, name)
            doc = getattr(attribute, "__doc__", None)
            if not isinstance(doc, str) or ">>>" not in doc or f"bloomery.{class_name}.{name}" in found:
                continue
            test = doctest.DocTestParser().get_doctest(doc, dict(vars(bloomery)), f"{class_name}.{name}", None, 0)
            runner.run(test)
            ran.append(f"{class_name}.{name}")
    assert runner.summarize(verbose=False).failed == 0
    assert {"BloomFilter.from_bytes", "BloomFilter.open", "BloomFilter.capacity"} <= set(ran), ran
