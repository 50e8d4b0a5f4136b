"""Moved to :mod:`thoughtsource.star.scratch_model`; kept for one release (import from there)."""

# moved to thoughtsource.star.scratch_model; kept for one release
from .analysis.accuracy import LEARNT_SHARE, learnt_range  # moved to star.analysis.accuracy
from .scratch_model import (
    ALPHABET,
    BOS,
    CURVES_PLOT,
    DEV_CURVE_FILE,
    EOS,
    INFO_FILE,
    PAD,
    TRAIN_CURVE_FILE,
    UNK,
    Architecture,
    BaseConfig,
    BaseData,
    BaseGate,
    BaseNotLearnt,
    BaseTraining,
    accuracy_by_digits,
    build_base,
    build_model,
    build_tokenizer,
    describe_accuracies,
    gate_callback,
    is_complete,
    parameter_count,
    read_curve,
    training_problems,
    training_records,
)

__all__ = ["ALPHABET", "BOS", "CURVES_PLOT", "DEV_CURVE_FILE", "EOS", "INFO_FILE", "LEARNT_SHARE", "PAD", "TRAIN_CURVE_FILE", "UNK", "Architecture", "BaseConfig", "BaseData", "BaseGate", "BaseNotLearnt", "BaseTraining", "accuracy_by_digits", "build_base", "build_model", "build_tokenizer", "describe_accuracies", "gate_callback", "is_complete", "learnt_range", "parameter_count", "read_curve", "training_problems", "training_records"]
