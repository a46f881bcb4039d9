//! Bandwidth tests.
