//! Device quantities as exact integers (nanounits), shared by the DRA
//! model and its consumable capacity.

use super::quantity;

/// An amount of a resource, exactly, in billionths (quantities have nine
/// decimal digits at most).
pub type Nanos = i128;

/// A quantity as [`Nanos`], rounded up past the ninth decimal.
pub fn nanos(q: &str) -> Result<Nanos, String> {
    quantity::nano_value(q).map_err(|e| e.to_string())
}
