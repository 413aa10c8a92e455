"""Horovod's horovod.tensorflow.keras.callbacks: lockstep.keras' callbacks."""

from lockstep.keras.callbacks import (  # noqa: F401
    BroadcastGlobalVariablesCallback,
    LearningRateScheduleCallback,
    LearningRateWarmupCallback,
    MetricAverageCallback,
)
