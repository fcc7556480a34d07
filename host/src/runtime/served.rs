//! What the API server is, read once at start: its version, logged, and
//! a warning below the oldest minor wasmsched supports.
//!
//! 1.32 is the oldest supported minor: below it the fields wasmsched
//! schedules by are not all served as it reads them (scheduling gates are
//! GA in 1.30, native sidecars on by default in 1.29 and GA in 1.33,
//! pod-level resources alpha in 1.32 and on by default in 1.34), and 1.32
//! is the oldest release our users run. The tests run against the newest release
//! (`scripts/servers/versions`).

use k8s_openapi::apimachinery::pkg::version::Info;

/// The oldest Kubernetes minor (1.x) wasmsched supports.
pub const OLDEST_SUPPORTED_MINOR: u32 = 32;

/// The server's minor version (`"37"`, or `"37+"` as some distributions
/// report it), or why it cannot be read.
pub fn minor_of(info: &Info) -> Result<u32, String> {
    if info.major.trim_end_matches('+') != "1" {
        return Err(format!("major version {:?}, not 1", info.major));
    }
    let digits: String = info
        .minor
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits
        .parse()
        .map_err(|_| format!("minor version {:?} is not a number", info.minor))
}

/// The warning for a server older than the oldest supported minor, or
/// whose version cannot be read; `None` when it is supported.
pub fn warning(info: &Info) -> Option<String> {
    match minor_of(info) {
        Ok(minor) if minor >= OLDEST_SUPPORTED_MINOR => None,
        Ok(minor) => Some(format!(
            "API server 1.{minor} ({}) is older than 1.{OLDEST_SUPPORTED_MINOR}, the oldest \
             release wasmsched supports: pods may be scheduled by fields it does not serve \
             as 1.{OLDEST_SUPPORTED_MINOR} does (docs/compatibility.md, Served versions)",
            info.git_version
        )),
        Err(e) => Some(format!(
            "API server version {} not understood ({e}); wasmsched supports 1.{OLDEST_SUPPORTED_MINOR} and newer",
            info.git_version
        )),
    }
}

/// Logs the server's version, and the warning if any.
pub fn log(info: &Info) {
    tracing::info!(version = %info.git_version, "API server");
    if let Some(w) = warning(info) {
        tracing::warn!("{w}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(major: &str, minor: &str) -> Info {
        Info {
            major: major.into(),
            minor: minor.into(),
            git_version: format!("v{major}.{minor}.0"),
            ..Default::default()
        }
    }

    #[test]
    fn minors_are_read_as_servers_report_them() {
        assert_eq!(minor_of(&info("1", "37")), Ok(37));
        assert_eq!(minor_of(&info("1", "32+")), Ok(32));
        assert!(minor_of(&info("2", "0")).unwrap_err().contains("major"));
        assert!(minor_of(&info("1", ""))
            .unwrap_err()
            .contains("not a number"));
    }

    #[test]
    fn only_older_or_unreadable_servers_are_warned_about() {
        assert_eq!(warning(&info("1", "37")), None);
        assert_eq!(warning(&info("1", "32")), None);
        let w = warning(&info("1", "31")).unwrap();
        assert!(
            w.starts_with("API server 1.31 (v1.31.0) is older than 1.32"),
            "{w}"
        );
        assert!(warning(&info("1", "x")).unwrap().contains("not understood"));
    }
}
