//! Typed plugin args. The host passes a plugin's `pluginConfig` args as
//! JSON text to `init`; [`parse`] turns it into your own `Deserialize`
//! type, with an error that names the plugin and the field, since that
//! error is what the operator sees when the scheduler refuses to start.
//!
//! ```ignore
//! #[derive(serde::Deserialize, Default)]
//! #[serde(default, deny_unknown_fields, rename_all = "camelCase")]
//! struct Args { spot_label: String, max_nodes: u32 }
//!
//! fn init(text: &str) -> Result<Self, String> {
//!     let args: Args = wasmsched_plugin_sdk::args::parse("my-policy", text)?;
//!     ...
//! }
//! ```

use serde::de::DeserializeOwned;

/// Parses `text` (a JSON object; empty text means `{}`) as `T`. Errors
/// read `NAME args: field `a.b`: MESSAGE`, or `NAME args: MESSAGE` when
/// no single field is at fault (invalid JSON, an unknown field).
pub fn parse<T: DeserializeOwned>(plugin: &str, text: &str) -> Result<T, String> {
    let text = if text.trim().is_empty() { "{}" } else { text };
    let value: serde_json::Value =
        serde_json::from_str(text).map_err(|e| format!("{plugin} args: {e}"))?;
    if !value.is_object() {
        return Err(format!("{plugin} args: expected a JSON object"));
    }
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        if path == "." || path.is_empty() || inner.to_string().starts_with("unknown field") {
            format!("{plugin} args: {inner}")
        } else {
            format!("{plugin} args: field `{path}`: {inner}")
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Debug, Deserialize, Default, PartialEq)]
    #[serde(default, deny_unknown_fields, rename_all = "camelCase")]
    struct Args {
        spot_label: String,
        weights: Weights,
    }

    #[derive(Debug, Deserialize, Default, PartialEq)]
    #[serde(default, deny_unknown_fields)]
    struct Weights {
        batch: u32,
    }

    #[test]
    fn empty_text_is_the_default() {
        assert_eq!(parse::<Args>("p", "").unwrap(), Args::default());
        assert_eq!(parse::<Args>("p", " {} ").unwrap(), Args::default());
    }

    #[test]
    fn fields_are_typed() {
        let a: Args = parse("p", r#"{"spotLabel": "x", "weights": {"batch": 3}}"#).unwrap();
        assert_eq!(a.spot_label, "x");
        assert_eq!(a.weights.batch, 3);
    }

    #[test]
    fn errors_name_the_plugin_and_the_field() {
        let e = parse::<Args>("p", r#"{"weights": {"batch": -1}}"#).unwrap_err();
        assert!(
            e.starts_with("p args: field `weights.batch`: invalid value"),
            "{e}"
        );
        let e = parse::<Args>("p", r#"{"spotLabl": "x"}"#).unwrap_err();
        assert!(e.starts_with("p args: unknown field `spotLabl`"), "{e}");
        assert_eq!(
            parse::<Args>("p", "[]").unwrap_err(),
            "p args: expected a JSON object"
        );
        assert!(parse::<Args>("p", "{")
            .unwrap_err()
            .starts_with("p args: EOF"));
    }
}
