"""Checks shared by the PyTorch and CuPy tests."""

# Element types devspan shares with the frameworks, by devspan name.
SIGNED = {"i8", "i16", "i32", "i64", "f16", "bf16", "f32", "f64"}
FLOATS = {"f16", "bf16", "f32", "f64"}


def cast_values_ok(src, dst):
    """Whether test data may hold negative numbers for a src -> dst conversion.

    Float -> unsigned conversions of negative values differ on purpose: devspan saturates (as
    Rust's `as` does) where C casts are undefined."""
    return not (src in FLOATS and dst not in SIGNED)
