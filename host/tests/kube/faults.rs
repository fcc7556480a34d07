//! Faults: see below.
