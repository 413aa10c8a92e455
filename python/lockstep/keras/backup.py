"""Keras' BackupAndRestore in a lockstep job: rank 0 alone keeps the backup (the others
need no shared storage and never write), and this callback gives every rank the
epoch it restored, so all ranks resume at the same epoch.

    callbacks = [hvd.BroadcastGlobalVariablesCallback(0), hvd.BroadcastInitialEpochCallback(0)]
    if hvd.rank() == 0:
        callbacks.insert(0, keras.callbacks.BackupAndRestore(backup_dir))
"""

import keras

from lockstep.common import basics, validation
from lockstep.common.host_ops import broadcast_object


class BroadcastInitialEpochCallback(keras.callbacks.Callback):
    """At the start of fit(), set every rank's starting epoch to root_rank's, which a
    BackupAndRestore placed before this callback on root_rank may have restored.
    (Keras reads the starting epoch right after on_train_begin.) Put
    BroadcastGlobalVariablesCallback in the list too, for the restored weights."""

    def __init__(self, root_rank=0):
        super().__init__()
        self.root_rank = root_rank

    def on_train_begin(self, logs=None):
        root_rank = validation.check_root_rank(self.root_rank)
        restored = getattr(self.model, "_initial_epoch", None) if basics.rank() == root_rank else None
        self.model._initial_epoch = broadcast_object(
            restored, root_rank=root_rank, name="BroadcastInitialEpochCallback"
        )
