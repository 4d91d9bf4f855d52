"""Minimal stand-in for the `expecttest` package (not packaged by Debian), which torch's test
utilities import for expect-file tests; the distributed tests never use it."""

import unittest

ACCEPT = False


class TestCase(unittest.TestCase):
    def assertExpectedInline(self, actual, expect, skip=0):  # noqa: N802 - expecttest's name
        self.assertEqual(str(actual).strip(), str(expect).strip())
