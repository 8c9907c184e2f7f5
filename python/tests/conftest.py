"""Test setup: chooses the devspan package under test and decides whether GPU tests run.

By default the tests import the source package python/devspan/, with the extension module that
python/build.sh places in it. With DEVSPAN_TEST_INSTALLED=1 they import the devspan installed
in the running Python (`pip install ./python`), and fail if that is the source package.

GPU tests are skipped with no CUDA framework or device, unless DEVSPAN_REQUIRE_GPU=1, which
turns that into a failure."""

import os
import pathlib
import sys

import pytest

PYTHON_DIR = pathlib.Path(__file__).resolve().parents[1]
INSTALLED = os.environ.get("DEVSPAN_TEST_INSTALLED") == "1"

if INSTALLED:
    import devspan

    if PYTHON_DIR in pathlib.Path(devspan.__file__).resolve().parents:
        raise RuntimeError(
            f"DEVSPAN_TEST_INSTALLED=1, but devspan was imported from the source tree ({devspan.__file__}): "
            "run pytest from outside python/, with the Python that has devspan installed"
        )
else:
    sys.path.insert(0, str(PYTHON_DIR))

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
