//! Kubernetes resource quantities (`500m`, `40Gi`, `1e3`).
//!
//! The scheduler uses this same code (`wasmsched_engine::model::quantity`
//! re-exports it), so a plugin reads a quantity in an annotation or arg
//! exactly as the scheduler reads a request.
//!
//! Hand-written rather than taken from `kube_quantity` because the scheduler
//! needs kube-scheduler's exact integer semantics: milli-values for cpu and
//! values rounded *up* for everything else (`resource.Quantity.MilliValue`
//! and `Value`), which that crate's conversions (truncating, no sub-unit
//! scales) do not give.

use thiserror::Error;

/// Why a quantity string is not a Kubernetes quantity.
#[derive(Debug, Error, PartialEq, Eq)]
#[error("invalid quantity {0:?}: {1}")]
pub struct QuantityError(pub String, pub &'static str);

/// A parsed quantity as an exact fraction: `mantissa * 10^exp10 * 2^exp2`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Parsed {
    negative: bool,
    digits: u128,
    /// Power of ten applied to `digits` (the decimal point and SI suffix).
    exp10: i32,
    /// Power of two applied (binary suffixes Ki, Mi, ...).
    exp2: u32,
}

fn parse(s: &str) -> Result<Parsed, QuantityError> {
    let err = |why| QuantityError(s.to_string(), why);
    let t = s.trim();
    if t.is_empty() {
        return Err(err("empty"));
    }
    let (negative, body) = match t.as_bytes()[0] {
        b'-' => (true, &t[1..]),
        b'+' => (false, &t[1..]),
        _ => (false, t),
    };
    let num_end = body
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(body.len());
    let (number, suffix) = body.split_at(num_end);
    if number.is_empty() || number == "." || number.matches('.').count() > 1 {
        return Err(err("no number"));
    }
    let (int_part, frac_part) = number.split_once('.').unwrap_or((number, ""));
    let mut digits: u128 = 0;
    for c in int_part.chars().chain(frac_part.chars()) {
        digits = digits
            .checked_mul(10)
            .and_then(|d| d.checked_add(u128::from(c as u8 - b'0')))
            .ok_or_else(|| err("too large"))?;
    }
    let mut exp10 = -(frac_part.len() as i32);
    let mut exp2 = 0;
    match suffix {
        "" => {}
        "n" => exp10 -= 9,
        "u" => exp10 -= 6,
        "m" => exp10 -= 3,
        "k" => exp10 += 3,
        "M" => exp10 += 6,
        "G" => exp10 += 9,
        "T" => exp10 += 12,
        "P" => exp10 += 15,
        "E" => exp10 += 18,
        "Ki" => exp2 = 10,
        "Mi" => exp2 = 20,
        "Gi" => exp2 = 30,
        "Ti" => exp2 = 40,
        "Pi" => exp2 = 50,
        "Ei" => exp2 = 60,
        s if s.starts_with(['e', 'E']) => {
            let e: i32 = s[1..].parse().map_err(|_| err("bad exponent"))?;
            if e.abs() > 30 {
                return Err(err("exponent out of range"));
            }
            exp10 += e;
        }
        _ => return Err(err("unknown suffix")),
    }
    Ok(Parsed {
        negative,
        digits,
        exp10,
        exp2,
    })
}

/// Scales the quantity by `10^extra10` and rounds up (away from zero for
/// positive values, as `Quantity.Value` does).
fn to_int(p: Parsed, extra10: i32, original: &str) -> Result<i64, QuantityError> {
    let err = |why| QuantityError(original.to_string(), why);
    let mut num: u128 = p.digits;
    let exp10 = p.exp10 + extra10;
    let mut den: u128 = 1;
    if exp10 >= 0 {
        num = num
            .checked_mul(10u128.pow(exp10 as u32))
            .ok_or_else(|| err("too large"))?;
    } else {
        den = 10u128
            .checked_pow((-exp10) as u32)
            .ok_or_else(|| err("too precise"))?;
    }
    num = num
        .checked_mul(1u128 << p.exp2)
        .ok_or_else(|| err("too large"))?;
    let value = num.div_ceil(den);
    let value = i64::try_from(value).map_err(|_| err("too large"))?;
    Ok(if p.negative { -value } else { value })
}

/// `Quantity.Value()`: the quantity in base units, rounded up
/// (`40Gi` -> 42949672960, `100m` -> 1).
pub fn value(s: &str) -> Result<i64, QuantityError> {
    to_int(parse(s)?, 0, s)
}

/// `Quantity.MilliValue()`: the quantity in thousandths, rounded up
/// (`500m` -> 500, `2` -> 2000): what cpu amounts are counted in.
pub fn milli_value(s: &str) -> Result<i64, QuantityError> {
    to_int(parse(s)?, 3, s)
}

/// The quantity in billionths of its unit, rounded up past the ninth
/// decimal (exact for every quantity Kubernetes writes: it keeps nine
/// decimal digits at most). Used where quantities are compared or summed
/// exactly (DRA capacities and counters, CEL's `quantity()`).
pub fn nano_value(s: &str) -> Result<i128, QuantityError> {
    let p = parse(s)?;
    let err = |why| QuantityError(s.to_string(), why);
    let exp10 = p.exp10 + 9;
    let mut num: u128 = p.digits;
    let mut den: u128 = 1;
    if exp10 >= 0 {
        num = num
            .checked_mul(10u128.pow(exp10 as u32))
            .ok_or_else(|| err("too large"))?;
    } else {
        den = 10u128
            .checked_pow((-exp10) as u32)
            .ok_or_else(|| err("too precise"))?;
    }
    num = num
        .checked_mul(1u128 << p.exp2)
        .ok_or_else(|| err("too large"))?;
    let v = i128::try_from(num.div_ceil(den)).map_err(|_| err("too large"))?;
    Ok(if p.negative { -v } else { v })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_kubernetes_forms() {
        assert_eq!(milli_value("500m").unwrap(), 500);
        assert_eq!(milli_value("2").unwrap(), 2000);
        assert_eq!(milli_value("0.1").unwrap(), 100);
        assert_eq!(milli_value("1.5").unwrap(), 1500);
        assert_eq!(value("40Gi").unwrap(), 40 * 1024 * 1024 * 1024);
        assert_eq!(value("128974848").unwrap(), 128_974_848);
        assert_eq!(value("129e6").unwrap(), 129_000_000);
        assert_eq!(value("129M").unwrap(), 129_000_000);
        assert_eq!(value("123Mi").unwrap(), 123 * 1024 * 1024);
        assert_eq!(value("1k").unwrap(), 1000);
        assert_eq!(value("100m").unwrap(), 1, "Value rounds up");
        assert_eq!(value("0").unwrap(), 0);
        assert_eq!(value("-1").unwrap(), -1);
        assert_eq!(milli_value("1u").unwrap(), 1, "MilliValue rounds up");
    }

    #[test]
    fn nano_values_are_exact() {
        assert_eq!(nano_value("1").unwrap(), 1_000_000_000);
        assert_eq!(
            nano_value("40Gi").unwrap(),
            40 * (1i128 << 30) * 1_000_000_000
        );
        assert_eq!(nano_value("1n").unwrap(), 1);
        assert_eq!(nano_value("1.5m").unwrap(), 1_500_000);
        assert_eq!(nano_value("-2k").unwrap(), -2_000_000_000_000);
        assert_eq!(nano_value("1Ei").unwrap(), (1i128 << 60) * 1_000_000_000);
        assert!(nano_value("1e30").is_err(), "beyond i128");
    }

    #[test]
    fn rejects_garbage() {
        for bad in ["", "abc", "1.2.3", "10Xi", "1e", "Gi", "."] {
            assert!(value(bad).is_err(), "{bad:?} should fail");
        }
        assert!(value("99999999999999999999999Ei").is_err());
    }
}
