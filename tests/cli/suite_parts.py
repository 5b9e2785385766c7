"""Runs part of a CLI suite, so that ctest can run its parts as separate tests.

A suite that imports `load_tests` from here runs, with CLI_PART in the environment:
  only:A,B     its test classes A and B;
  except:A,B   every other class;
and the whole suite without it (a developer's run). tests/CMakeLists.txt says why each suite is
split: a long class beside the rest on the second core, or a class that judges real runs' step
times alone (RUN_SERIAL) and the rest beside other tests.
"""
import os
import unittest


def _chosen():
    part = os.environ.get("CLI_PART", "")
    if not part:
        return None
    how, _, names = part.partition(":")
    classes = {n for n in names.split(",") if n}
    if how not in ("only", "except") or not classes:
        raise SystemExit(f"CLI_PART={part!r}: expected only:CLASS[,CLASS...] or except:CLASS[,...]")
    return how == "only", classes


def _cases(suite):
    for item in suite:
        if isinstance(item, unittest.TestSuite):
            yield from _cases(item)
        else:
            yield item


def load_tests(loader, tests, pattern):
    chosen = _chosen()
    if chosen is None:
        return tests
    only, classes = chosen
    found = {type(case).__name__ for case in _cases(tests)}
    unknown = classes - found
    if unknown:
        raise SystemExit(f"CLI_PART names classes the suite does not have: {sorted(unknown)}")
    part = unittest.TestSuite()
    for case in _cases(tests):
        if (type(case).__name__ in classes) == only:
            part.addTest(case)
    return part
