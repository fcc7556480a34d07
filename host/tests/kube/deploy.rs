//! Deploy manifests.
