from ._native import (
    Buffer as Buffer,
    Counts as Counts,
    DeviceMatrix as DeviceMatrix,
    Field as Field,
    Grid as Grid,
    counts as counts,
    total as total,
)
