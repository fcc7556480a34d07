//! Consumable capacity (DRAConsumableCapacity, with
//! DRAFractionalCapacityRange as 1.37 has it on): what a request consumes
//! of each capacity of a device (its `requestPolicy`'s default,
//! `validValues` and `validRange` rounding), whether that fits beside what
//! the device's other shares consume, and the `consumedCapacity` and
//! `shareID` written. Upstream's `consumable_capacity.go` of the
//! incubating allocator, on exact [`Nanos`] rather than `Quantity`.

use std::collections::BTreeMap;

use crate::model::dra::{nanos_text, Nanos};
use crate::model::dra_capacity::{CapacityPolicy, CapacityRange, DeviceCapacity, Q};

/// Consumed capacity by name as written.
pub type Consumed = BTreeMap<String, Nanos>;

/// The shares of one device that allows multiple allocations.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Shared {
    /// Allocation results (and reservations in flight) holding a share.
    pub holders: u32,
    /// What they consume together.
    pub consumed: Consumed,
}

/// Shared devices by id (`<driver>/<pool>/<device>`): a persistent map,
/// as the store's devices in use are.
pub type SharedUse = imbl::GenericHashMap<
    String,
    std::sync::Arc<Shared>,
    foldhash::fast::RandomState,
    imbl::shared_ptr::DefaultSharedPtr,
>;

/// Adds (`sign` 1) or takes away (-1) a share consuming `consumed` of
/// device `id`; the device leaves the map with its last share.
pub fn account(shared: &mut SharedUse, id: &str, consumed: &Consumed, sign: i8) {
    let mut entry = shared.get(id).map(|e| (**e).clone()).unwrap_or_default();
    for (k, v) in consumed {
        let x = entry.consumed.entry(k.clone()).or_default();
        if sign >= 0 {
            *x += v;
        } else {
            *x -= v;
        }
    }
    if sign >= 0 {
        entry.holders += 1;
    } else {
        entry.holders = entry.holders.saturating_sub(1);
    }
    if entry.holders == 0 {
        shared.remove(id);
    } else {
        shared.insert(id.to_string(), std::sync::Arc::new(entry));
    }
}

const ONE: Nanos = 1_000_000_000;
const MILLI: Nanos = 1_000_000;
const MAX_I64: Nanos = i64::MAX as Nanos;

/// Upstream's `errCapacityRequestNotRepresentable` text.
const NOT_REPRESENTABLE: &str =
    "capacity request cannot be represented in the device's range arithmetic";

/// A consumed amount: its value and the text to write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Amount {
    pub n: Nanos,
    pub text: String,
}

impl Amount {
    fn of(q: &Q) -> Self {
        Self {
            n: q.n,
            text: q.raw.clone(),
        }
    }
}

/// Whether a device with `caps`, of which `current` (allocated claims)
/// and `allocating` (this attempt) are consumed, can take a request for
/// `requests` (upstream's `CmpRequestOverCapacity`). `Err`: a request that
/// cannot be represented (upstream aborts the allocation).
pub fn fits(
    current: Option<&Consumed>,
    allocating: Option<&Consumed>,
    requests: &BTreeMap<String, Q>,
    caps: &[DeviceCapacity],
) -> Result<bool, String> {
    if requests.keys().any(|k| !caps.iter().any(|c| &c.name == k)) {
        // The device does not have a requested capacity: another may.
        return Ok(false);
    }
    // Every capacity resolved first: an unrepresentable request aborts
    // whatever order the capacities are visited in.
    let consumed = consume_all(requests, caps)?;
    for (cap, amount) in caps.iter().zip(&consumed) {
        if violates_policy(amount.n, cap.policy.as_ref()) {
            return Ok(false);
        }
        let get = |m: Option<&Consumed>| m.and_then(|m| m.get(&cap.name)).copied().unwrap_or(0);
        if amount.n + get(current) + get(allocating) > cap.value.n {
            return Ok(false);
        }
    }
    Ok(true)
}

/// What the request consumes of each of `caps`, in their order
/// (upstream's `GetConsumedCapacityFromRequest`).
pub fn consume_all(
    requests: &BTreeMap<String, Q>,
    caps: &[DeviceCapacity],
) -> Result<Vec<Amount>, String> {
    let mut out = Vec::with_capacity(caps.len());
    for cap in caps {
        let amount = consume(requests.get(&cap.name), cap)
            .map_err(|e| format!("capacity {:?}: {e}", cap.name))?;
        if amount.n < 0 {
            return Err(format!(
                "capacity {:?}: capacity value is negative",
                cap.name
            ));
        }
        out.push(amount);
    }
    Ok(out)
}

/// [`consume_all`] as a map.
pub fn consumed_map(requests: &BTreeMap<String, Q>, caps: &[DeviceCapacity]) -> Consumed {
    consume_all(requests, caps)
        .map(|v| {
            caps.iter()
                .map(|c| c.name.clone())
                .zip(v.into_iter().map(|a| a.n))
                .collect()
        })
        .unwrap_or_default()
}

/// Upstream's `calculateConsumedCapacity`: the default (or the whole
/// capacity) without a request; else the request rounded up by the
/// policy.
fn consume(requested: Option<&Q>, cap: &DeviceCapacity) -> Result<Amount, String> {
    let Some(req) = requested else {
        return Ok(match cap.policy.as_ref().and_then(|p| p.default.as_ref()) {
            Some(d) => Amount::of(d),
            None => Amount::of(&cap.value),
        });
    };
    let Some(policy) = &cap.policy else {
        return Ok(Amount::of(req));
    };
    if let Some(range) = &policy.valid_range {
        return round_up_range(req, range);
    }
    Ok(policy
        .valid_values
        .iter()
        .find(|v| req.n <= v.n)
        .map_or_else(|| Amount::of(req), Amount::of))
}

/// `q` in milli units, when that is exact and fits in an int64.
fn milli(n: Nanos) -> Option<Nanos> {
    (n % MILLI == 0 && (n / MILLI).abs() <= MAX_I64).then_some(n / MILLI)
}

/// Upstream's `useMilli` (fractional capacity ranges on): every bound
/// exact in milli units, and a step of at least 1m.
fn use_milli(range: &CapacityRange) -> bool {
    let fields = [Some(&range.min), range.max.as_ref(), range.step.as_ref()];
    fields.into_iter().flatten().all(|q| milli(q.n).is_some())
        && range.step.as_ref().is_none_or(|s| s.n >= MILLI)
}

/// `Quantity.Value()`: rounded up to a whole number.
fn whole(n: Nanos) -> Nanos {
    n.div_euclid(ONE) + Nanos::from(n.rem_euclid(ONE) != 0)
}

/// Upstream's `roundUpRange`.
fn round_up_range(req: &Q, range: &CapacityRange) -> Result<Amount, String> {
    if req.n < range.min.n {
        return Ok(Amount::of(&range.min));
    }
    let Some(step) = &range.step else {
        return Ok(Amount::of(req));
    };
    let binary = is_binary(&step.raw);
    if use_milli(range) {
        let requested = milli(req.n).ok_or_else(|| {
            format!(
                "{NOT_REPRESENTABLE}: request {} is not a representable milli value",
                req.raw
            )
        })?;
        let (step_m, min_m) = (step.n / MILLI, range.min.n / MILLI);
        let n = (requested - min_m + step_m - 1).div_euclid(step_m);
        if n > (MAX_I64 - min_m) / step_m {
            return Err(format!(
                "{NOT_REPRESENTABLE}: rounding request {} up to the next step passes the milli-value range",
                req.raw
            ));
        }
        let v = (min_m + step_m * n) * MILLI;
        return Ok(Amount {
            n: v,
            text: text(v, binary),
        });
    }
    if req.n > MAX_I64 * ONE {
        return Err(format!(
            "{NOT_REPRESENTABLE}: request {} exceeds MaxInt64",
            req.raw
        ));
    }
    let (requested, step_i, min_i) = (whole(req.n), whole(step.n), whole(range.min.n));
    let added = requested - min_i;
    let n = added.div_euclid(step_i) + Nanos::from(added.rem_euclid(step_i) != 0);
    if min_i >= 0 && n > (MAX_I64 - min_i) / step_i {
        return Err(format!(
            "{NOT_REPRESENTABLE}: rounding request {} up to the next step passes MaxInt64",
            req.raw
        ));
    }
    let v = (min_i + step_i * n) * ONE;
    Ok(Amount {
        n: v,
        text: text(v, binary),
    })
}

/// Upstream's `violatesPolicy`: outside the range (above max, off the
/// step) or not one of the valid values; the default always passes.
fn violates_policy(n: Nanos, policy: Option<&CapacityPolicy>) -> bool {
    let Some(p) = policy else {
        return false;
    };
    if p.default.as_ref().is_some_and(|d| d.n == n) {
        return false;
    }
    if let Some(r) = &p.valid_range {
        if r.max.as_ref().is_some_and(|m| n > m.n) {
            return true;
        }
        if let Some(step) = &r.step {
            let (requested, step, min) = if use_milli(r) {
                match milli(n) {
                    Some(m) => (m, step.n / MILLI, r.min.n / MILLI),
                    None => return true,
                }
            } else {
                (whole(n), whole(step.n), whole(r.min.n))
            };
            return (requested - min) % step != 0;
        }
        return false;
    }
    !p.valid_values.is_empty() && !p.valid_values.iter().any(|v| v.n == n)
}

/// Whether a quantity is written with a binary suffix (`Gi`): a rounded
/// value takes the step's format, as upstream's `NewQuantity` does.
fn is_binary(raw: &str) -> bool {
    ["Ki", "Mi", "Gi", "Ti", "Pi", "Ei"]
        .iter()
        .any(|s| raw.ends_with(s))
}

/// An amount as people read it: binary suffixes where they fit (`32Gi`).
pub fn display(n: Nanos) -> String {
    text(n, true)
}

/// A computed amount as quantity text.
fn text(n: Nanos, binary: bool) -> String {
    if binary && n > 0 && n % ONE == 0 {
        let mut v = n / ONE;
        let mut suffix = "";
        for s in ["Ki", "Mi", "Gi", "Ti", "Pi", "Ei"] {
            if v % 1024 != 0 {
                break;
            }
            v /= 1024;
            suffix = s;
        }
        return format!("{v}{suffix}");
    }
    nanos_text(n)
}

/// A share's id: a UUID derived from the claim, the request and the
/// device (upstream draws a random one; a derived one keeps `simulate`
/// reproducible and is unique per device, as the API requires).
pub fn share_id(claim_uid: &str, request: &str, device: &str) -> String {
    let mut h: [u64; 2] = [0xcbf2_9ce4_8422_2325, 0x6c62_272e_07bb_0142];
    for (i, part) in [claim_uid, request, device].iter().enumerate() {
        for b in part.bytes().chain([0xff, i as u8]) {
            for (k, x) in h.iter_mut().enumerate() {
                *x ^= u64::from(b) + k as u64;
                *x = x.wrapping_mul(0x0000_0100_0000_01b3);
            }
        }
    }
    let v = (u128::from(h[0]) << 64) | u128::from(h[1]);
    // Version 4, variant 10 bits, as a random UUID has.
    let v = (v & !(0xf << 76) | (0x4 << 76)) & !(0x3 << 62) | (0x2 << 62);
    let s = format!("{v:032x}");
    format!(
        "{}-{}-{}-{}-{}",
        &s[0..8],
        &s[8..12],
        &s[12..16],
        &s[16..20],
        &s[20..32]
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(s: &str) -> Q {
        Q {
            n: crate::model::dra::nanos(s).unwrap(),
            raw: s.into(),
        }
    }

    fn range(min: &str, max: Option<&str>, step: Option<&str>) -> CapacityPolicy {
        CapacityPolicy {
            default: None,
            valid_values: Vec::new(),
            valid_range: Some(CapacityRange {
                min: q(min),
                max: max.map(q),
                step: step.map(q),
            }),
        }
    }

    fn with_default(mut p: CapacityPolicy, d: &str) -> CapacityPolicy {
        p.default = Some(q(d));
        p
    }

    fn values(d: &str, vs: &[&str]) -> CapacityPolicy {
        CapacityPolicy {
            default: Some(q(d)),
            valid_values: vs.iter().map(|v| q(v)).collect(),
            valid_range: None,
        }
    }

    fn cap(value: &str, policy: Option<CapacityPolicy>) -> DeviceCapacity {
        DeviceCapacity {
            name: "capacity-0".into(),
            value: q(value),
            policy,
        }
    }

    /// Upstream's `testCalculateConsumedCapacity` (fractional ranges on,
    /// as 1.37 has them).
    #[test]
    fn calculate_consumed_capacity() {
        type Case<'a> = (
            &'a str,
            Option<&'a str>,
            &'a str,
            Option<CapacityPolicy>,
            &'a str,
        );
        let ok: &[Case] = &[
            ("empty", None, "1", Some(CapacityPolicy::default()), "1"),
            (
                "min in range",
                None,
                "2",
                Some(with_default(range("1", None, None), "1")),
                "1",
            ),
            ("default in set", None, "2", Some(values("1", &["1"])), "1"),
            (
                "more than min in range",
                Some("2"),
                "2",
                Some(with_default(range("1", None, None), "1")),
                "2",
            ),
            (
                "less than min in range",
                Some("1"),
                "2",
                Some(with_default(range("2", None, None), "1")),
                "2",
            ),
            (
                "with step (round up)",
                Some("2"),
                "3",
                Some(with_default(range("1", None, Some("2")), "1")),
                "3",
            ),
            (
                "with step (no remaining)",
                Some("2"),
                "2",
                Some(with_default(range("1", None, Some("1")), "1")),
                "2",
            ),
            (
                "fractional step round up (0.25 to 0.3)",
                Some("250m"),
                "1",
                Some(with_default(range("200m", Some("1"), Some("100m")), "200m")),
                "300m",
            ),
            (
                "fractional step already aligned (0.4 = min+2*step)",
                Some("400m"),
                "1",
                Some(with_default(range("200m", Some("1"), Some("100m")), "200m")),
                "400m",
            ),
            (
                "valid value in set",
                Some("2"),
                "3",
                Some(values("1", &["1", "2", "3"])),
                "2",
            ),
            (
                "set (round up)",
                Some("2"),
                "3",
                Some(values("1", &["1", "3"])),
                "3",
            ),
            (
                "larger than set",
                Some("3"),
                "3",
                Some(values("1", &["1", "2"])),
                "3",
            ),
            ("no policy", Some("5"), "8", None, "5"),
            (
                "binary step",
                Some("5Gi"),
                "80Gi",
                Some(range("4Gi", None, Some("4Gi"))),
                "8Gi",
            ),
        ];
        for (name, req, value, policy, want) in ok {
            let got = consume(req.map(q).as_ref(), &cap(value, policy.clone())).unwrap();
            assert_eq!(got.n, q(want).n, "{name}");
        }
        let got = consume(
            Some(&q("5Gi")),
            &cap("80Gi", Some(range("4Gi", None, Some("4Gi")))),
        )
        .unwrap();
        assert_eq!(got.text, "8Gi");
    }

    /// The error cases of upstream's `testCalculateConsumedCapacity`.
    #[test]
    fn calculate_consumed_capacity_unrepresentable() {
        let too_big = "9224372036854776E3";
        let errs: &[(&str, &str, CapacityPolicy)] = &[
            (
                "request-above-maxint64-is-rejected",
                "18446744073709551619",
                with_default(range("0", None, Some("3")), "0"),
            ),
            (
                "rounded-value-above-maxint64-is-rejected",
                "9223372036854775807",
                with_default(range("0", None, Some("2")), "0"),
            ),
            (
                "fractional-step-request-not-milli-representable-is-rejected",
                too_big,
                with_default(range("100m", None, Some("100m")), "1"),
            ),
            (
                "fractional-step-rounded-value-passes-milli-range-is-rejected",
                "9223372036854775.806",
                with_default(range("100m", None, Some("100m")), "100m"),
            ),
        ];
        for (name, req, policy) in errs {
            let e = consume(Some(&q(req)), &cap(req, Some(policy.clone()))).unwrap_err();
            assert!(e.starts_with(NOT_REPRESENTABLE), "{name}: {e}");
        }
    }

    /// Upstream's `testViolateCapacityRequestPolicy`.
    #[test]
    fn violate_capacity_request_policy() {
        let cases: &[(&str, &str, Option<CapacityPolicy>, bool)] = &[
            ("no constraint", "1", None, false),
            (
                "less than maximum",
                "1",
                Some(with_default(range("1", Some("2"), None), "1")),
                false,
            ),
            (
                "more than maximum",
                "2",
                Some(with_default(range("1", Some("1"), None), "1")),
                true,
            ),
            ("in set", "1", Some(values("1", &["1"])), false),
            ("not in set", "2", Some(values("1", &["1"])), true),
            (
                "fractional step aligned",
                "300m",
                Some(with_default(range("200m", Some("1"), Some("100m")), "200m")),
                false,
            ),
            (
                "fractional step not aligned",
                "250m",
                Some(with_default(range("200m", Some("1"), Some("100m")), "200m")),
                true,
            ),
            (
                "requested value overflows milli representation",
                "9224372036854776E3",
                Some(with_default(range("1", None, Some("1")), "1")),
                true,
            ),
        ];
        for (name, v, policy, want) in cases {
            assert_eq!(violates_policy(q(v).n, policy.as_ref()), *want, "{name}");
        }
    }

    /// Upstream's `CmpRequestOverCapacity`: shares add up to the value;
    /// a capacity the device lacks skips it; an unrepresentable request
    /// is an error even when another capacity would not fit.
    #[test]
    fn request_over_capacity() {
        let caps = vec![cap("80Gi", Some(range("1Gi", None, Some("1Gi"))))];
        let req: BTreeMap<String, Q> = [("capacity-0".to_string(), q("40Gi"))].into();
        assert_eq!(fits(None, None, &req, &caps), Ok(true));
        let half: Consumed = [("capacity-0".to_string(), q("40Gi").n)].into();
        assert_eq!(fits(Some(&half), None, &req, &caps), Ok(true));
        assert_eq!(fits(Some(&half), Some(&half), &req, &caps), Ok(false));
        let other: BTreeMap<String, Q> = [("memory".to_string(), q("1"))].into();
        assert_eq!(fits(None, None, &other, &caps), Ok(false));
        // No request: the whole capacity (no default).
        assert_eq!(fits(Some(&half), None, &BTreeMap::new(), &caps), Ok(false));
        let huge: BTreeMap<String, Q> =
            [("capacity-0".to_string(), q("18446744073709551619"))].into();
        assert!(fits(Some(&half), Some(&half), &huge, &caps).is_err());
    }

    #[test]
    fn share_ids_are_uuids_unique_per_share() {
        let a = share_id("uid-1", "gpu", "d/p/dev");
        let b = share_id("uid-2", "gpu", "d/p/dev");
        assert_ne!(a, b);
        assert_eq!(a, share_id("uid-1", "gpu", "d/p/dev"));
        assert_eq!(a.len(), 36);
        assert_eq!(&a[14..15], "4");
    }
}
