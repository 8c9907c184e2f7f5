"""Test setup: finds the built extension (python/devspan.abi3.so, made by python/build.sh) and
decides whether GPU tests run: with no CUDA framework or device they are skipped, unless
DEVSPAN_REQUIRE_GPU=1, which turns that into a failure."""

import os
import pathlib
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

REQUIRE_GPU = os.environ.get("DEVSPAN_REQUIRE_GPU") == "1"


def need(module_name):
    """Imports a GPU framework for a test module, or skips (fails with DEVSPAN_REQUIRE_GPU=1)."""
    try:
        mod = __import__(module_name)
    except ImportError as e:
        if REQUIRE_GPU:
            pytest.fail(f"{module_name} is needed for GPU tests: {e}", pytrace=False)
        pytest.skip(f"{module_name} not installed", allow_module_level=True)
    return mod


def no_gpu(reason):
    if REQUIRE_GPU:
        pytest.fail(f"GPU tests cannot run: {reason} (DEVSPAN_REQUIRE_GPU=1)", pytrace=False)
    pytest.skip(reason, allow_module_level=True)
