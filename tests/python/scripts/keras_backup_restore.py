"""Keras' BackupAndRestore on rank 0 with lockstep's callbacks, for the restart test.

    keras_backup_restore.py BACKUP_DIR [KILL_AT_EPOCH]

Trains a linear model for 4 epochs, each rank on its shard. With KILL_AT_EPOCH, rank 1
SIGKILLs itself after the first batch of that epoch (so rank 0 has finished writing
the previous epoch's backup), which ends the job. Each rank prints the epochs it
runs and, at the end, its weights.
"""

import json
import os
import signal
import sys

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402

import lockstep.keras as hvd  # noqa: E402

EPOCHS = 4
backup_dir = sys.argv[1]
kill_at = int(sys.argv[2]) if len(sys.argv) > 2 else -1

hvd.init()
rank, size = hvd.rank(), hvd.size()  # asked once: a rank that finishes first shuts lockstep down
rng = np.random.default_rng(3)
x = rng.standard_normal((48, 5)).astype(np.float32)
y = (x @ np.arange(1.0, 6.0)).astype(np.float32)[:, None]
model = keras.Sequential([keras.Input((5,)), keras.layers.Dense(1, use_bias=False, kernel_initializer="zeros")])
model.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.SGD(0.02, momentum=0.5)), loss="mse")


class Report(keras.callbacks.Callback):
    epoch = None

    def on_epoch_begin(self, epoch, logs=None):
        Report.epoch = epoch
        print(f"rank {rank}: epoch {epoch}", flush=True)

    def on_train_batch_end(self, batch, logs=None):
        if Report.epoch == kill_at and batch == 0 and rank == 1:
            os.kill(os.getpid(), signal.SIGKILL)


callbacks = [hvd.BroadcastGlobalVariablesCallback(0), hvd.BroadcastInitialEpochCallback(0), Report()]
if rank == 0:  # only rank 0 writes the backup
    callbacks.insert(0, keras.callbacks.BackupAndRestore(backup_dir))
xs, ys = x[rank::size], y[rank::size]
model.fit(xs, ys, batch_size=4, epochs=EPOCHS, shuffle=False, verbose=0, callbacks=callbacks)
print(f"rank {rank}: weights " + json.dumps(model.get_weights()[0].flatten().tolist()), flush=True)
