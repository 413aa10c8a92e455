"""lockstep's TensorFlow op library: asynchronous C++ kernels that enqueue into the
core (csrc/bindings/tensorflow). It is built next to lockstep._core wherever the
Python that builds lockstep can import TensorFlow.

Loading it registers the Lockstep* ops, so a SavedModel or GraphDef holding them
loads in any process that imported lockstep.tensorflow.
"""

import os

import tensorflow as tf

from lockstep import _core

LIBRARY_PATH = os.path.join(os.path.dirname(os.path.abspath(_core.__file__)), "_tensorflow_ops.so")


def _load():
    if not os.path.exists(LIBRARY_PATH):
        raise ImportError(
            f"lockstep.tensorflow needs {LIBRARY_PATH}, which is built only when the Python that builds "
            "lockstep can import tensorflow: install tensorflow, then rebuild lockstep (make build, or "
            "pip install again)"
        )
    try:
        return tf.load_op_library(LIBRARY_PATH)
    except tf.errors.NotFoundError as error:
        raise ImportError(
            f"lockstep's TensorFlow op library does not match the installed TensorFlow {tf.__version__} "
            f"(it was built against another version); rebuild lockstep: {error}"
        ) from error


OPS = _load()
