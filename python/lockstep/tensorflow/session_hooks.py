"""TF1 session support: a hook that broadcasts the initial variables."""

import tensorflow as tf

from lockstep.tensorflow.variables import broadcast_global_variables


class BroadcastGlobalVariablesHook(tf.compat.v1.train.SessionRunHook):
    """Broadcasts every global variable from root_rank once the session exists,
    so all ranks start training from root_rank's initialization (or checkpoint):

        hooks = [hvd.BroadcastGlobalVariablesHook(0)]
        with tf.compat.v1.train.MonitoredTrainingSession(hooks=hooks) as session: ...
    """

    def __init__(self, root_rank, device=""):
        super().__init__()
        self.root_rank = root_rank
        self.device = device  # accepted for ported scripts; the broadcast runs on the host
        self.broadcast_op = None

    def begin(self):
        # begin() runs once per graph the hook is used with; rebuild for a new graph.
        graph = tf.compat.v1.get_default_graph()
        if self.broadcast_op is None or self.broadcast_op.graph is not graph:
            self.broadcast_op = broadcast_global_variables(self.root_rank)

    def after_create_session(self, session, coord):
        session.run(self.broadcast_op)
