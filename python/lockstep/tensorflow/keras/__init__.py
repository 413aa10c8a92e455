"""lockstep.keras under Horovod's second import path for its Keras API.

Horovod scripts import `horovod.tensorflow.keras as hvd` as often as
`horovod.keras as hvd`; both become the same lockstep.keras here. Under
TF_USE_LEGACY_KERAS=1 that is Keras 2 (tf.keras from tf-keras), else Keras 3.
"""

from lockstep.keras import *  # noqa: F401,F403 - the same API under this name
from lockstep.keras import callbacks  # noqa: F401 - hvd.callbacks.BroadcastGlobalVariablesCallback, ...
