//! `include`: configuration fragments merged into the file that names
//! them, so that optional parts (gang scheduling, GPU sharing, the
//! deletion-cost controller) each bring a fragment instead of a whole
//! configuration, and any of them combine (deploy/components/).
//!
//! `include: ["fragment-*.yaml"]` names files in the including file's
//! directory (a ConfigMap volume holds every key there): a name, or a
//! pattern whose `*` matches any characters but `/` and a leading `.`.
//! Matches are merged in name order; a pattern that matches nothing adds
//! nothing, a plain name that is missing is an error. Fragments cannot
//! include others. The merge:
//!
//! - `profiles`: by `schedulerName`. A new name is appended. For a
//!   profile the file already has, each extension point's `enabled` and
//!   `disabled` lists are appended to, and `pluginConfig` entries are
//!   added (a plugin configured twice is an error); any other field set in
//!   both is an error.
//! - `wasmPlugins`: appended; a name given twice is an error.
//! - `apiVersion`, `kind`: when a fragment has them, the same as the file's.
//! - every other field (`deletionCost`, `parallelism`, ...): set by one
//!   file only; set in two, it is an error naming both.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use super::{err, ConfigError};

/// The fragments `patterns` name, relative to `dir`, in merge order.
pub fn expand(dir: &Path, patterns: &[String]) -> Result<Vec<PathBuf>, ConfigError> {
    let mut out = Vec::new();
    for (i, pattern) in patterns.iter().enumerate() {
        let field = format!("include[{i}]");
        if pattern.is_empty() || pattern.contains('/') || pattern == "." || pattern == ".." {
            return Err(err(
                field,
                format!(
                    "{pattern:?}: a file name or pattern in the configuration's directory (no '/')"
                ),
            ));
        }
        if !pattern.contains('*') {
            let path = dir.join(pattern);
            if !path.exists() {
                return Err(err(field, format!("{}: no such file", path.display())));
            }
            out.push(path);
            continue;
        }
        let entries = std::fs::read_dir(if dir.as_os_str().is_empty() {
            Path::new(".")
        } else {
            dir
        })
        .map_err(|e| err(&field, format!("{}: {e}", dir.display())))?;
        let mut names: Vec<String> = entries
            .filter_map(|e| e.ok())
            .filter_map(|e| e.file_name().into_string().ok())
            .filter(|n| !n.starts_with('.') && matches(pattern, n))
            .collect();
        names.sort();
        out.extend(names.into_iter().map(|n| dir.join(n)));
    }
    let mut seen = std::collections::HashSet::new();
    out.retain(|p| seen.insert(p.clone()));
    Ok(out)
}

/// Glob match with `*` only.
fn matches(pattern: &str, name: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if parts.len() == 1 {
        return pattern == name;
    }
    if !name.starts_with(first) || name.len() < first.len() + last.len() || !name.ends_with(last) {
        return false;
    }
    let mut rest = &name[first.len()..name.len() - last.len()];
    for part in &parts[1..parts.len() - 1] {
        match rest.find(part) {
            Some(i) => rest = &rest[i + part.len()..],
            None => return false,
        }
    }
    true
}

/// Where each top-level field (and each profile's) was set, for errors.
#[derive(Default)]
pub struct Origins {
    fields: std::collections::HashMap<String, String>,
}

impl Origins {
    /// Records the fields of the including file.
    pub fn of_base(base: &Value, name: &str) -> Self {
        let mut o = Self::default();
        o.record(base, name);
        o
    }

    fn record(&mut self, v: &Value, name: &str) {
        let Some(map) = v.as_object() else { return };
        for (k, val) in map {
            match k.as_str() {
                "profiles" => {
                    for p in val.as_array().into_iter().flatten() {
                        let id = profile_id(p);
                        for (pk, pv) in p.as_object().into_iter().flatten() {
                            if pk == "pluginConfig" {
                                for c in pv.as_array().into_iter().flatten() {
                                    let plugin = c["name"].as_str().unwrap_or("");
                                    self.fields.insert(
                                        format!("profiles[{id}].pluginConfig[{plugin}]"),
                                        name.into(),
                                    );
                                }
                            } else if pk != "plugins" && pk != "schedulerName" {
                                self.fields
                                    .insert(format!("profiles[{id}].{pk}"), name.into());
                            }
                        }
                    }
                }
                "wasmPlugins" => {
                    for w in val.as_array().into_iter().flatten() {
                        let n = w["name"].as_str().unwrap_or("");
                        self.fields.insert(format!("wasmPlugins[{n}]"), name.into());
                    }
                }
                _ => {
                    self.fields.insert(k.clone(), name.into());
                }
            }
        }
    }

    fn conflict(&self, field: &str, fragment: &str) -> Result<(), ConfigError> {
        match self.fields.get(field) {
            Some(first) => Err(err(
                format!("{fragment}: {field}"),
                format!("also set in {first}: a field is set by one file only"),
            )),
            None => Ok(()),
        }
    }
}

fn profile_id(p: &Value) -> String {
    p["schedulerName"].as_str().unwrap_or("").to_string()
}

/// Merges `fragment` (named `name` in errors) into `base`.
pub fn merge(
    base: &mut Value,
    fragment: Value,
    name: &str,
    origins: &mut Origins,
) -> Result<(), ConfigError> {
    let Value::Object(frag) = fragment else {
        return Err(err(name, "not a mapping"));
    };
    let Some(base_map) = base.as_object_mut() else {
        return Err(err("config", "not a mapping"));
    };
    for key in ["apiVersion", "kind"] {
        if let Some(v) = frag.get(key) {
            if base_map.get(key).is_some_and(|b| b != v) {
                return Err(err(
                    format!("{name}: {key}"),
                    format!("{v} differs from the including file's {}", base_map[key]),
                ));
            }
        }
    }
    for (key, value) in frag {
        match key.as_str() {
            "apiVersion" | "kind" => {}
            "include" => {
                return Err(err(
                    format!("{name}: include"),
                    "a fragment cannot include others",
                ))
            }
            "profiles" => {
                for p in value.as_array().cloned().unwrap_or_default() {
                    merge_profile(base_map, p, name, origins)?;
                }
            }
            "wasmPlugins" => {
                let list = base_map
                    .entry("wasmPlugins")
                    .or_insert_with(|| Value::Array(Vec::new()));
                for w in value.as_array().cloned().unwrap_or_default() {
                    let n = w["name"].as_str().unwrap_or("").to_string();
                    let field = format!("wasmPlugins[{n}]");
                    origins.conflict(&field, name)?;
                    origins.fields.insert(field, name.into());
                    if let Some(l) = list.as_array_mut() {
                        l.push(w);
                    }
                }
            }
            _ => {
                origins.conflict(&key, name)?;
                origins.fields.insert(key.clone(), name.into());
                base_map.insert(key, value);
            }
        }
    }
    Ok(())
}

fn merge_profile(
    base: &mut Map<String, Value>,
    profile: Value,
    name: &str,
    origins: &mut Origins,
) -> Result<(), ConfigError> {
    let id = profile_id(&profile);
    let list = base
        .entry("profiles")
        .or_insert_with(|| Value::Array(Vec::new()))
        .as_array_mut()
        .ok_or_else(|| err("profiles", "not a list"))?;
    let Value::Object(fields) = profile else {
        return Err(err(format!("{name}: profiles[{id}]"), "not a mapping"));
    };
    let Some(target) = list.iter_mut().find(|p| profile_id(p) == id) else {
        let new = Value::Object(fields);
        origins.record(&serde_json::json!({"profiles": [new.clone()]}), name);
        list.push(new);
        return Ok(());
    };
    let target = target
        .as_object_mut()
        .ok_or_else(|| err(format!("profiles[{id}]"), "not a mapping"))?;
    for (key, value) in fields {
        match key.as_str() {
            "schedulerName" => {}
            "plugins" => {
                let plugins = target
                    .entry("plugins")
                    .or_insert_with(|| Value::Object(Map::new()));
                for (point, set) in value.as_object().cloned().unwrap_or_default() {
                    let Some(plugins) = plugins.as_object_mut() else {
                        break;
                    };
                    let target_set = plugins
                        .entry(point)
                        .or_insert_with(|| Value::Object(Map::new()));
                    for (list_name, items) in set.as_object().cloned().unwrap_or_default() {
                        if let Some(t) = target_set.as_object_mut() {
                            let l = t
                                .entry(list_name)
                                .or_insert_with(|| Value::Array(Vec::new()));
                            if let (Some(l), Some(items)) = (l.as_array_mut(), items.as_array()) {
                                l.extend(items.iter().cloned());
                            }
                        }
                    }
                }
            }
            "pluginConfig" => {
                let l = target
                    .entry("pluginConfig")
                    .or_insert_with(|| Value::Array(Vec::new()));
                for c in value.as_array().cloned().unwrap_or_default() {
                    let plugin = c["name"].as_str().unwrap_or("").to_string();
                    let field = format!("profiles[{id}].pluginConfig[{plugin}]");
                    origins.conflict(&field, name)?;
                    origins.fields.insert(field, name.into());
                    if let Some(l) = l.as_array_mut() {
                        l.push(c);
                    }
                }
            }
            _ => {
                let field = format!("profiles[{id}].{key}");
                origins.conflict(&field, name)?;
                origins.fields.insert(field, name.into());
                target.insert(key, value);
            }
        }
    }
    Ok(())
}

/// Records in `origins` (`schedulerName/plugin` to `name`) each plugin
/// that `value`'s profiles name in an `enabled` list, unless an earlier
/// file named it.
pub fn record_plugins(
    value: &Value,
    name: &str,
    origins: &mut std::collections::BTreeMap<String, String>,
) {
    for p in value["profiles"].as_array().into_iter().flatten() {
        let id = profile_id(p);
        for set in p["plugins"]
            .as_object()
            .into_iter()
            .flat_map(|m| m.values())
        {
            for e in set["enabled"].as_array().into_iter().flatten() {
                if let Some(plugin) = e["name"].as_str() {
                    origins
                        .entry(format!("{id}/{plugin}"))
                        .or_insert_with(|| name.to_string());
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn patterns_match_names() {
        assert!(matches("fragment-*.yaml", "fragment-gangs.yaml"));
        assert!(matches("*.yaml", "a.yaml"));
        assert!(matches("a*b*c", "a-b-c"));
        assert!(!matches("fragment-*.yaml", "config.yaml"));
        assert!(!matches("a*a", "a"));
    }

    #[test]
    fn fragments_add_to_profiles_and_sections() {
        let mut base = json!({"apiVersion": "wasmsched.io/v1alpha1",
            "profiles": [{"schedulerName": "gpu", "plugins": {"multiPoint": {"disabled": [{"name": "X"}]}}}],
            "wasmPlugins": [{"name": "GpuTopology"}]});
        let mut o = Origins::of_base(&base, "config.yaml");
        merge(
            &mut base,
            json!({"profiles": [{"schedulerName": "gpu", "plugins": {"multiPoint": {"enabled": [{"name": "Coscheduling"}]}}},
                {"schedulerName": "hami"}]}),
            "gangs.yaml",
            &mut o,
        )
        .unwrap();
        merge(
            &mut base,
            json!({"deletionCost": {"interval": "30s"}}),
            "dc.yaml",
            &mut o,
        )
        .unwrap();
        assert_eq!(
            base["profiles"][0]["plugins"]["multiPoint"],
            json!({"disabled": [{"name": "X"}], "enabled": [{"name": "Coscheduling"}]})
        );
        assert_eq!(base["profiles"][1]["schedulerName"], "hami");
        assert_eq!(base["deletionCost"]["interval"], "30s");
    }

    #[test]
    fn a_field_set_twice_names_both_files() {
        let mut base = json!({"apiVersion": "wasmsched.io/v1alpha1", "parallelism": 2, "wasmPlugins": [{"name": "P"}],
            "profiles": [{"schedulerName": "gpu", "pluginConfig": [{"name": "P", "args": {}}]}]});
        let mut o = Origins::of_base(&base, "config.yaml");
        for (frag, field) in [
            (json!({"parallelism": 4}), "x.yaml: parallelism"),
            (
                json!({"wasmPlugins": [{"name": "P"}]}),
                "x.yaml: wasmPlugins[P]",
            ),
            (
                json!({"profiles": [{"schedulerName": "gpu", "pluginConfig": [{"name": "P"}]}]}),
                "x.yaml: profiles[gpu].pluginConfig[P]",
            ),
            (json!({"include": ["y.yaml"]}), "x.yaml: include"),
            (json!({"apiVersion": "other"}), "x.yaml: apiVersion"),
        ] {
            let e = merge(&mut base.clone(), frag, "x.yaml", &mut o).unwrap_err();
            assert_eq!(e.field, field, "{e}");
        }
        let e = merge(&mut base, json!({"parallelism": 4}), "x.yaml", &mut o).unwrap_err();
        assert!(e.cause.contains("also set in config.yaml"), "{e}");
    }
}
