//! Helpers for rnic's cross-crate tests: finding the shared golden data, and reading it.
