from ._native import (
    Buffer as Buffer,
    Counts as Counts,
    DeviceMatrix as DeviceMatrix,
    Field as Field,
    Grid as Grid,
    Mesh as Mesh,
    column_sums as column_sums,
    counts as counts,
    mesh as mesh,
    scale as scale,
    total as total,
)
