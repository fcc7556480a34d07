//! What a node advertises: `hami.io/node-nvidia-register` (both forms),
//! `hami.io/node-nvidia-score` and `hami.io/device-cordon`.

use std::collections::{BTreeMap, HashSet};

use serde::Deserialize;

use super::{bad, HamiError, REGISTER_ANNOTATION, SCORE_ANNOTATION};

/// Most devices read from one node (a per-device table is allocated from
/// the annotation, so an absurd one must not allocate without bound).
pub const MAX_DEVICES: usize = 256;

/// One physical GPU as HAMi's device plugin registered it
/// (`pkg/device/devices.go`, `DeviceInfo`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Device {
    /// The GPU's UUID (`GPU-...`).
    pub id: String,
    /// Its index on the node.
    pub index: u32,
    /// How many vGPUs (containers) it can hold at once (deviceSplitCount).
    pub count: u32,
    /// Memory in MiB (after HAMi's deviceMemoryScaling).
    pub devmem: u64,
    /// Compute in percent of SMs (100 x deviceCoreScaling).
    pub devcore: u32,
    /// The model, e.g. `NVIDIA-A100-SXM4-40GB`.
    pub kind: String,
    pub numa: i32,
    /// `hami-core`, `mig` or `mps`.
    pub mode: String,
    pub health: bool,
}

/// The JSON form; every field is `omitempty` in HAMi: a missing number is
/// 0, a missing `health` is false.
#[derive(Deserialize)]
struct JsonDevice {
    #[serde(default)]
    id: String,
    #[serde(default)]
    index: i64,
    #[serde(default)]
    count: i64,
    #[serde(default)]
    devmem: i64,
    #[serde(default)]
    devcore: i64,
    #[serde(default, rename = "type")]
    kind: String,
    #[serde(default)]
    numa: i64,
    #[serde(default)]
    mode: String,
    #[serde(default)]
    health: bool,
}

fn register_error(cause: impl Into<String>) -> HamiError {
    bad(REGISTER_ANNOTATION, cause)
}

fn in_range<T: TryFrom<i64>>(field: &str, id: &str, v: i64) -> Result<T, HamiError> {
    T::try_from(v).map_err(|_| register_error(format!("device {id:?}: {field} {v} out of range")))
}

impl JsonDevice {
    fn into_device(self) -> Result<Device, HamiError> {
        let id = self.id;
        Ok(Device {
            index: in_range("index", &id, self.index)?,
            count: in_range("count", &id, self.count)?,
            devmem: in_range("devmem", &id, self.devmem)?,
            devcore: in_range("devcore", &id, self.devcore)?,
            numa: in_range("numa", &id, self.numa)?,
            kind: self.kind,
            mode: if self.mode.is_empty() {
                "hami-core".to_string()
            } else {
                self.mode
            },
            health: self.health,
            id,
        })
    }
}

/// Go's `strconv.ParseBool`.
fn parse_bool(s: &str) -> Option<bool> {
    match s {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

/// One `uuid,count,mem,cores,type,numa,health[,index,mode]` segment of the
/// pre-2.8 form (7 fields up to v2.4, 9 since).
fn legacy_device(segment: &str) -> Result<Device, HamiError> {
    let f: Vec<&str> = segment.split(',').collect();
    if f.len() != 7 && f.len() != 9 {
        return Err(register_error(format!(
            "segment {segment:?} has {} fields, expected 7 or 9",
            f.len()
        )));
    }
    let num = |i: usize, name: &str| -> Result<i64, HamiError> {
        f[i].parse::<i64>()
            .map_err(|_| register_error(format!("device {:?}: invalid {name} {:?}", f[0], f[i])))
    };
    let health = parse_bool(f[6])
        .ok_or_else(|| register_error(format!("device {:?}: invalid health {:?}", f[0], f[6])))?;
    let (index, mode) = if f.len() == 9 {
        (num(7, "index")?, f[8].to_string())
    } else {
        (0, String::new())
    };
    JsonDevice {
        id: f[0].to_string(),
        index,
        count: num(1, "count")?,
        devmem: num(2, "memory")?,
        devcore: num(3, "cores")?,
        kind: f[4].to_string(),
        numa: num(5, "numa")?,
        mode,
        health,
    }
    .into_device()
}

/// Reads `hami.io/node-nvidia-register`: a JSON array (HAMi 2.8+) or the
/// older colon-separated form. An empty device list, an empty or repeated
/// UUID, a negative number or a malformed value is an error naming the
/// annotation.
pub fn parse_register(value: &str) -> Result<Vec<Device>, HamiError> {
    let text = value.trim();
    let devices = if text.starts_with('[') {
        let raw: Vec<JsonDevice> =
            serde_json::from_str(text).map_err(|e| register_error(format!("invalid JSON: {e}")))?;
        if raw.len() > MAX_DEVICES {
            return Err(register_error(format!(
                "{} devices, at most {MAX_DEVICES} are read",
                raw.len()
            )));
        }
        raw.into_iter()
            .map(JsonDevice::into_device)
            .collect::<Result<Vec<_>, _>>()?
    } else {
        if !text.contains(':') {
            return Err(register_error("missing device separator ':'"));
        }
        let segments: Vec<&str> = text.split(':').filter(|s| !s.is_empty()).collect();
        if segments.len() > MAX_DEVICES {
            return Err(register_error(format!(
                "{} devices, at most {MAX_DEVICES} are read",
                segments.len()
            )));
        }
        segments
            .into_iter()
            .map(legacy_device)
            .collect::<Result<Vec<_>, _>>()?
    };
    if devices.is_empty() {
        return Err(register_error("no devices"));
    }
    let mut seen = HashSet::new();
    for d in &devices {
        if d.id.is_empty() {
            return Err(register_error("a device has no id"));
        }
        if !seen.insert(d.id.as_str()) {
            return Err(register_error(format!("device {:?} listed twice", d.id)));
        }
    }
    Ok(devices)
}

/// Writes devices in the JSON form of HAMi 2.8+ (`MarshalNodeDevices`;
/// for test fixtures and examples).
pub fn encode_register_json(devices: &[Device]) -> String {
    let list: Vec<serde_json::Value> = devices
        .iter()
        .map(|d| {
            serde_json::json!({
                "id": d.id, "index": d.index, "count": d.count, "devmem": d.devmem,
                "devcore": d.devcore, "type": d.kind, "numa": d.numa, "mode": d.mode,
                "health": d.health,
            })
        })
        .collect();
    serde_json::Value::Array(list).to_string()
}

/// Writes devices in the 9-field colon form of HAMi 2.5-2.7
/// (`EncodeNodeDevices`).
pub fn encode_register_legacy(devices: &[Device]) -> String {
    devices
        .iter()
        .map(|d| {
            format!(
                "{},{},{},{},{},{},{},{},{}:",
                d.id, d.count, d.devmem, d.devcore, d.kind, d.numa, d.health, d.index, d.mode
            )
        })
        .collect()
}

/// Link scores between GPU pairs, by UUID (`hami.io/node-nvidia-score`:
/// `[{"uuid":"GPU-0","score":{"GPU-1":50,...}},...]`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PairScores(pub BTreeMap<String, BTreeMap<String, i64>>);

impl PairScores {
    /// The score between `a` and `b` (either direction; 0 when unknown).
    pub fn between(&self, a: &str, b: &str) -> i64 {
        let one = |x: &str, y: &str| self.0.get(x).and_then(|m| m.get(y)).copied();
        one(a, b).or_else(|| one(b, a)).unwrap_or(0)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

#[derive(Deserialize)]
struct JsonPairScore {
    #[serde(default)]
    uuid: String,
    #[serde(default)]
    score: BTreeMap<String, i64>,
}

/// Reads `hami.io/node-nvidia-score`.
pub fn parse_pair_scores(value: &str) -> Result<PairScores, HamiError> {
    let raw: Vec<JsonPairScore> = serde_json::from_str(value.trim())
        .map_err(|e| bad(SCORE_ANNOTATION, format!("invalid JSON: {e}")))?;
    if raw.len() > MAX_DEVICES {
        return Err(bad(SCORE_ANNOTATION, "too many devices"));
    }
    let mut out = BTreeMap::new();
    for r in raw {
        if r.uuid.is_empty() {
            return Err(bad(SCORE_ANNOTATION, "an entry has no uuid"));
        }
        if r.score.len() > MAX_DEVICES {
            return Err(bad(SCORE_ANNOTATION, "too many scores"));
        }
        out.insert(r.uuid, r.score);
    }
    Ok(PairScores(out))
}

/// Reads `hami.io/device-cordon`: UUIDs separated by commas, spaces and
/// empty entries ignored (HAMi's `CordonedDevices`).
pub fn parse_cordon(value: &str) -> HashSet<String> {
    value
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}
