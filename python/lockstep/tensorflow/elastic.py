"""Elastic training for lockstep.tensorflow (TensorFlow 2, eager), as Horovod's
`hvd.elastic`: TensorFlowKerasState for a Keras model and optimizer, TensorFlowState
for a list of tf.Variables, and `run`."""

from lockstep.common import basics
from lockstep.common.elastic import HorovodInternalError, HostsUpdatedInterrupt, ObjectState, State, run_fn
from lockstep.common.host_ops import allgather_object, broadcast_object
from lockstep.tensorflow.variables import broadcast_variables


def run(func):
    """Decorator: `func(state, ...)` runs until done, resuming from the last commit
    after a lost peer or a change of hosts (see lockstep.common.elastic.runner)."""
    return run_fn(func, allgather_object)


def __getattr__(name):
    # TensorFlowKerasState lives with the Keras frontend; importing it on first use
    # keeps `import lockstep.tensorflow` from importing Keras.
    if name == "TensorFlowKerasState":
        from lockstep.tensorflow.keras_state import TensorFlowKerasState

        return TensorFlowKerasState
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class TensorFlowState(ObjectState):
    """A list of tf.Variables (TensorFlow 2 has no global variable collection, so
    they must be given) and any picklable values as attributes."""

    def __init__(self, variables=None, session=None, **kwargs):
        if variables is None:
            raise ValueError(
                "TensorFlowState needs `variables` under TensorFlow 2 (eager): "
                "pass the list of tf.Variable objects to track"
            )
        if session is not None:
            raise ValueError("TensorFlowState does not support TensorFlow 1 sessions")
        self.variables = list(variables)
        self.session = None
        self._save_model()
        super().__init__(bcast_object=broadcast_object, get_rank=basics.rank, **kwargs)

    def _save_model(self):
        self._values = [variable.numpy() for variable in self.variables]

    def _load_model(self):
        for variable, value in zip(self.variables, self._values):
            variable.assign(value)

    def save(self):
        self._save_model()
        super().save()

    def restore(self):
        self._load_model()
        super().restore()

    def sync(self):
        broadcast_variables(self.variables, root_rank=self._sync_root)
        self._save_model()
        super().sync()

    def snapshot(self):
        return {"variables": self._values, **super().snapshot()}

    def load_snapshot(self, snapshot):
        self._values = snapshot["variables"]
        self._load_model()
        super().load_snapshot(snapshot)


__all__ = [  # noqa: F822 (TensorFlowKerasState comes from __getattr__)
    "HorovodInternalError",
    "HostsUpdatedInterrupt",
    "ObjectState",
    "State",
    "TensorFlowKerasState",
    "TensorFlowState",
    "run",
]
