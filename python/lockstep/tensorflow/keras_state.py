"""TensorFlowKerasState: Horovod's elastic state for a Keras model under lockstep.tensorflow."""

from lockstep.keras.elastic import KerasState


class TensorFlowKerasState(KerasState):
    """A built Keras model and its optimizer (default: the compiled one), and any
    picklable values as attributes. `backend` is accepted for Horovod's sake: it only
    mattered for TensorFlow 1 sessions."""

    def __init__(self, model, optimizer=None, backend=None, **kwargs):
        self.backend = backend
        super().__init__(model, optimizer=optimizer, **kwargs)
